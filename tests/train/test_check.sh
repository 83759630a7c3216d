#!/usr/bin/env bash
# txl-train --check: every config in configs/ checks for 1, 2, 4 and 8 ranks on the CPU and (in a
# build with the CUDA backend) on GPUs, in one process and without a GPU; what cannot start is
# one line. And the memory estimate: a run larger than the memory this process may use is
# refused with one line before anything is allocated (also under a cgroup's memory limit, where
# root may make one).
source "$(dirname "$0")/lib.sh" "$1" "$2"
# the vocabularies of the recipes' corpora (not bundled): WikiText-103 and -2 (word level, the
# original's preparation), enwik8 (bytes) and text8 (letters and space)
n_token_of() {
  case "$(sed -n 's/^corpus *= *//p' "$1")" in
    *wt103*) echo 267735 ;; *wt2*) echo 33278 ;; *enwik8*) echo 205 ;; *text8*) echo 27 ;; *) echo 0 ;;
  esac
}
make_corpus "$WORK/demo.h5" 40000 2000
devices="cpu"
"$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --set run.device=cuda > "$WORK/probe.out" 2>&1 && devices="cpu cuda"
[ "$devices" = "cpu" ] && echo "this build has no CUDA backend: --check on cuda is not run"
n=0
shopt -s nullglob
confs=("$SRC"/configs/*.ini "$SRC"/configs/*/*.ini)
shopt -u nullglob
for conf in "${confs[@]}"; do
  name=${conf#"$SRC/"}
  extra=()
  case "$name" in configs/demo.ini) extra=(--set data.corpus="$WORK/demo.h5") ;; esac
  nt=$(n_token_of "$conf")
  [ "$nt" != 0 ] && extra+=(--set data.n_token="$nt")
  for dev in $devices; do
    for P in 1 2 4 8; do
      if "$BIN/txl-train" "$conf" --check --ranks "$P" --set run.device="$dev" "${extra[@]}" > "$WORK/c.out" 2>&1 \
         && grep -q "^check passed: the config is valid for $P rank" "$WORK/c.out" \
         && grep -q "^memory per rank (estimate): " "$WORK/c.out"; then
        n=$((n + 1))
      else
        cat "$WORK/c.out"; fail "$name on $P rank(s), $dev: --check failed"
      fi
    done
  done
done
# n counts the cases that passed (each failure was reported above); a loop that found no config
# is a failure, not a pass
ndev=$(wc -w <<< "$devices")
[ "${#confs[@]}" -gt 0 ] && [ "$n" -eq $(( ${#confs[@]} * 4 * ndev )) ] \
  && ok "--check passes for all $n config x rank count x device cases (${#confs[@]} configs)" \
  || fail "--check ran $n cases for ${#confs[@]} configs in $SRC/configs"
grep -q "^corpus: $WORK/demo.h5 (char level, vocabulary" <("$BIN/txl-train" "$SRC/configs/demo.ini" --check \
  --set data.corpus="$WORK/demo.h5") && ok "--check reads the corpus header when the file is here" \
  || fail "--check did not read the demo corpus"
"$BIN/txl-train" "$SRC/configs/wt103_base.ini" --check --ranks 8 --set data.n_token=267735 > "$WORK/w.out"
grep -q "columns: 60 global, 7 or 8 on each rank; evaluation 10, 1 or 2 on each rank" "$WORK/w.out" \
  && ok "the README's wt103_base command on 8 ranks: 7 or 8 columns each" || { cat "$WORK/w.out"; fail "wt103_base on 8 ranks"; }

expect_error_line "--check: more ranks than columns" "train.batch_size = 8 is fewer columns than the 16 ranks" -- \
  "$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --ranks 16 --set eval.eval_batch_size=16
expect_error_line "--check: more ranks than evaluation columns" "eval.eval_batch_size = 10 is fewer columns than the 16 ranks" -- \
  "$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --ranks 16
expect_error_line "--check: no corpus and no n_token" "data.corpus = 'data/wt2.h5' is not here; give the vocabulary size" -- \
  "$BIN/txl-train" "$SRC/configs/wt2_small.ini" --check
expect_error_line "--check: bf16 on the CPU" "run.precision = bf16 needs run.device = cuda" -- \
  "$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --set run.precision=bf16
expect_error_line "--check: fp16 on the CPU" "run.precision = fp16 needs run.device = cuda" -- \
  "$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --set run.precision=fp16
expect_error_line "--check: a bad key" "no_such_key" -- \
  "$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --set train.no_such_key=1

# The memory estimate. 1024 heads of 4096 (the issue's case): terabytes, more than any machine
# here has; refused at once, with the estimate printed first, and nothing allocated (the
# process's peak resident memory stays small).
big=(--set model.n_head=1024 --set model.d_head=4096 --set run.work_dir="$WORK/big")
expect_error_line "a model larger than the memory" "not enough memory: this run needs about [0-9.]+ GiB of host memory" -- \
  "$BIN/txl-train" "$SRC/configs/demo.ini" --set data.corpus="$WORK/demo.h5" "${big[@]}"
grep -q "^memory per rank (estimate): " "$WORK/out.txt" && ok "the estimate is printed before the refusal" \
  || fail "no estimate printed: $(head -c 300 "$WORK/out.txt")"
peak_kb=$(python3 - "$BIN/txl-train" "$SRC/configs/demo.ini" "$WORK/demo.h5" "$WORK/big" <<'PY'
import resource, subprocess, sys
b, conf, corpus, wd = sys.argv[1:]
subprocess.run([b, conf, "--set", "data.corpus=" + corpus, "--set", "model.n_head=1024", "--set", "model.d_head=4096",
                "--set", "run.work_dir=" + wd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
)
[ "$peak_kb" -lt 262144 ] && ok "refused before allocating: peak resident memory ${peak_kb} KiB" \
  || fail "peak resident memory ${peak_kb} KiB before the refusal"
$MPI -n 2 "$BIN/txl-train" "$SRC/configs/demo.ini" --set data.corpus="$WORK/demo.h5" "${big[@]}" \
  > "$WORK/out.txt" 2> "$WORK/err.txt" && fail "2 ranks: the run started" || true
[ "$(grep -c '^txl: error: .*not enough memory: the 2 ranks on' "$WORK/err.txt")" -eq 1 ] \
  && ok "2 ranks: one line for the node's ranks together" || fail "2 ranks: $(cat "$WORK/err.txt")"

# Under a cgroup's memory limit of 3 GiB (cgroup v1 or v2, where this process may make one): a
# model of about 4 GiB fits the machine but not the limit, and is refused by the limit's figure
# instead of being killed by the kernel half-way through allocating.
cg_run() { # DIR CMD...: CMD in the cgroup DIR
  local dir=$1
  shift
  bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' _ "$dir" "$@"
}
self=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
cg=""
if [ -n "$self" ] && [ -w "/sys/fs/cgroup/memory$self" ]; then
  cg=/sys/fs/cgroup/memory${self%/}/txl-test-$$
  mkdir "$cg" 2>/dev/null && echo $((3 << 30)) > "$cg/memory.limit_in_bytes" 2>/dev/null || cg=""
elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  self=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup)
  cg=/sys/fs/cgroup${self%/}/txl-test-$$
  mkdir "$cg" 2>/dev/null && echo $((3 << 30)) > "$cg/memory.max" 2>/dev/null || cg=""
fi
if [ -z "$cg" ]; then
  echo "SKIPPED: cannot make a cgroup with a memory limit here (not root, or a read-only cgroup file system)"
else
  mid=(--set model.n_layer=8 --set model.d_model=1024 --set model.n_head=16 --set model.d_head=64
       --set model.d_inner=4096 --set run.work_dir="$WORK/mid")
  expect_error_line "a model larger than a 3 GiB cgroup" "not enough memory: .* available \(the cgroup's memory limit\)" -- \
    cg_run "$cg" "$BIN/txl-train" "$SRC/configs/demo.ini" --set data.corpus="$WORK/demo.h5" "${mid[@]}"
  rmdir "$cg" 2>/dev/null || true
fi
finish
