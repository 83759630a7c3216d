#!/usr/bin/env bash
# CPU training throughput, txl against the project's PyTorch reference (tests/reference/bench_ref.py)
# on the same configs and thread count, in one run:
#   scripts/bench-cpu.sh [THREADS] [REPEATS]          (defaults: all cores, 3)
# Prints the median tokens/s of each, their ratio, the share of the measured sgemm peak txl
# reaches (FLOPs per token as in the README), and peak memory. Configs: configs/bench/{tiny,small,
# medium}.ini. TORCH_PYTHON picks the Python with torch (default /usr/bin/python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
threads=${1:-$(nproc)}
repeats=${2:-3}
py=${TORCH_PYTHON:-/usr/bin/python3}
train=$TXL_BUILD/bin/txl-train
[ -x "$train" ] || { echo "bench-cpu: build first (scripts/build.sh)" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "bench-cpu: no torch for $py" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A steps=([tiny]=30 [small]=8 [medium]=4)
for cfg in tiny small medium; do
  for r in $(seq "$repeats"); do
    OMP_NUM_THREADS=$threads "$train" "$TXL_ROOT/configs/bench/$cfg.ini" --bench "${steps[$cfg]}" \
      --set run.threads="$threads" > "$out/txl-$cfg-$r.txt" 2>&1
    for attn in shift gather; do
      OMP_NUM_THREADS=$threads "$py" "$TXL_ROOT/tests/reference/bench_ref.py" --config "$cfg" \
        --threads "$threads" --steps "${steps[$cfg]}" --warmup 2 --attn $attn > "$out/torch-$attn-$cfg-$r.txt" 2>&1
    done
  done
done
"$py" - "$out" "$repeats" "$threads" <<'PY'
import glob, re, statistics, sys
out, repeats, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def nums(pattern, regex):
    vals = []
    for f in sorted(glob.glob(f"{out}/{pattern}")):
        m = re.search(regex, open(f).read())
        if not m:
            sys.exit(f"bench-cpu: no figures in {f}:\n" + open(f).read()[-2000:])
        vals.append(tuple(float(g.replace(",", "")) for g in m.groups()))
    return vals
version = re.search(r"torch (\S+) threads", open(glob.glob(f"{out}/torch-*")[0]).read()).group(1)
print(f"txl vs PyTorch {version} (tests/reference/bench_ref.py), {threads} thread(s), median of {repeats} runs")
print(f"{'config':8} {'txl tok/s':>10} {'torch tok/s':>12} {'ratio':>6} {'txl % sgemm peak':>17} {'txl MiB':>8} {'torch MiB':>10}")
for cfg in ("tiny", "small", "medium"):
    t = nums(f"txl-{cfg}-*.txt", r"\| ([\d,]+) tok/s .*= ([\d.]+)% of the measured.*\n.*peak memory of rank 0: (\d+) MiB")
    best_torch, best_mem = 0.0, 0.0
    for attn in ("shift", "gather"):
        p = nums(f"torch-{attn}-{cfg}-*.txt", r": (\d+) tokens/s.*peak memory (\d+) MiB")
        med = statistics.median(v[0] for v in p)
        if med > best_torch:
            best_torch, best_mem = med, statistics.median(v[1] for v in p)
    tok = statistics.median(v[0] for v in t)
    share = statistics.median(v[1] for v in t)
    mem = statistics.median(v[2] for v in t)
    print(f"{cfg:8} {tok:10.0f} {best_torch:12.0f} {tok / best_torch:6.2f} {share:16.1f}% {mem:8.0f} {best_mem:10.0f}")
print("torch: the faster of its two attention formulations (the original's rel-shift, a gather)")
PY
