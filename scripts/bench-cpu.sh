#!/usr/bin/env bash
# CPU training throughput, txl against the project's PyTorch reference (tests/reference/bench_ref.py)
# on the same configs and the same number of threads, in one run:
#   scripts/bench-cpu.sh [THREADS] [REPEATS]          (defaults: all cores, 3)
# Each side runs in two layouts of THREADS threads: one process with THREADS threads, and THREADS
# data-parallel processes with one thread each (txl: MPI ranks; torch: gloo processes, gradients
# all-reduced); torch also in its two attention formulations. Prints, per config, the median
# tokens/s of each layout, the best layout of each side, their ratio, the share of the measured
# sgemm peak that txl reaches (FLOPs per token as in docs/results.md), and peak memory per process.
# Configs: configs/bench/{tiny,small,medium}.ini. TORCH_PYTHON picks the Python with torch
# (default /usr/bin/python3).
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
declare -A steps=([tiny]=40 [small]=8 [medium]=4)
layouts="1x$threads"
[ "$threads" -gt 1 ] && layouts="$layouts ${threads}x1"
for cfg in tiny small medium; do
  for r in $(seq "$repeats"); do
    for lay in $layouts; do
      procs=${lay%x*} per=${lay#*x}
      OMP_NUM_THREADS=$per mpirun -n "$procs" --bind-to none "$train" "$TXL_ROOT/configs/bench/$cfg.ini" \
        --bench "${steps[$cfg]}" --set run.threads="$per" > "$out/txl-$cfg-$lay-$r.txt" 2>&1
      for attn in shift gather; do
        OMP_NUM_THREADS=$per "$py" "$TXL_ROOT/tests/reference/bench_ref.py" --config "$cfg" --procs "$procs" \
          --threads "$per" --steps "${steps[$cfg]}" --warmup 2 --attn $attn > "$out/torch-$cfg-$lay-$attn-$r.txt" 2>&1
      done
    done
  done
done
"$py" - "$out" "$repeats" "$threads" "$layouts" <<'PY'
import glob, re, statistics, sys
out, repeats, threads, layouts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
def nums(pattern, regex):
    vals = []
    for f in sorted(glob.glob(f"{out}/{pattern}")):
        m = re.search(regex, open(f).read())
        if not m:
            sys.exit(f"bench-cpu: no figures in {f}:\n" + open(f).read()[-2000:])
        vals.append(tuple(float(g.replace(",", "")) for g in m.groups()))
    return vals
def med(vals, i):
    return statistics.median(v[i] for v in vals)
version = re.search(r"torch (\S+) procs", open(glob.glob(f"{out}/torch-*")[0]).read()).group(1)
print(f"txl vs PyTorch {version} (tests/reference/bench_ref.py), {threads} thread(s) in all, median of {repeats} runs")
print("layout PxT: P processes of T threads each")
print(f"{'config':7} {'layout':>6} {'txl tok/s':>10} {'torch tok/s':>12}   (torch: shift / gather)")
best = {}
for cfg in ("tiny", "small", "medium"):
    for lay in layouts:
        t = nums(f"txl-{cfg}-{lay}-*.txt",
                 r"\| ([\d,]+) tok/s .*= ([\d.]+)% of the measured.*\n.*peak memory of rank 0: (\d+) MiB")
        tt = (med(t, 0), med(t, 1), med(t, 2), lay)
        row = {}
        for attn in ("shift", "gather"):
            p = nums(f"torch-{cfg}-{lay}-{attn}-*.txt", r": (\d+) tokens/s.*peak memory (\d+) MiB")
            row[attn] = (med(p, 0), med(p, 1), f"{lay} {attn}")
        print(f"{cfg:7} {lay:>6} {tt[0]:10.0f} {max(v[0] for v in row.values()):12.0f}   "
              f"({row['shift'][0]:.0f} / {row['gather'][0]:.0f})")
        b = best.setdefault(cfg, {"txl": tt, "torch": max(row.values())})
        if tt[0] > b["txl"][0]:
            b["txl"] = tt
        if max(row.values())[0] > b["torch"][0]:
            b["torch"] = max(row.values())
print()
print("best layout of each side:")
print(f"{'config':7} {'txl tok/s':>10} {'layout':>7} {'torch tok/s':>12} {'layout':>13} {'ratio':>6} "
      f"{'txl % sgemm peak':>17} {'txl MiB':>8} {'torch MiB':>10}")
for cfg, b in best.items():
    t, p = b["txl"], b["torch"]
    print(f"{cfg:7} {t[0]:10.0f} {t[3]:>7} {p[0]:12.0f} {p[2]:>13} {t[0] / p[0]:6.2f} {t[1]:16.1f}% "
          f"{t[2]:8.0f} {p[1]:10.0f}")
print("memory: peak resident set of one process (rank 0)")
PY
