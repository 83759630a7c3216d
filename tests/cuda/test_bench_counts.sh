#!/usr/bin/env bash
# txl-train-emu --bench prints "per step: N kernel launches, M host synchronisations" (counted by
# the CUDA emulator, tests/cuda/emu/README.md "Counts"), the same in every timed step of these
# configs (synthetic tokens, fixed tgt_len), N > 0 and M as the step now synchronises. The
# inputs (tokens, targets, position rows, the adaptive grouping) go up through the upload op
# (page-locked staging, cudaMemcpyAsync), and the step's loss stays on the device until a progress
# line (ops loss_sum, txl_trainer_losses; --bench reads it after the timed steps), so neither
# synchronises. What remains:
#   fp32, one softmax, attn_type 0   the gradient norm down (the optimizer takes its clipping
#                                    factor on the host; the fused optimizer moves it)          1
#   adaptive input and softmax       the same                                                   1
#   train.batch_chunk = 2            the same                                                   1
#   attn_type 1                      the same                                                   1
#   run.precision = fp16             + the loss down: dynamic loss scaling (its default) needs
#                                    the loss of each step at once to stop on a non-finite one  2
# usage: test_bench_counts.sh BIN_DIR
set -euo pipefail
BIN=$1
source "$(dirname "$0")/../lib/checks.sh" # small_model_shape (its fail is replaced below)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$WORK/small.ini" <<INI
[data]
n_token = 500
[model]
$(small_model_shape)
dropout = 0.1
dropatt = 0.1
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
[run]
device = cuda
threads = 1
INI

check() { # NAME EXPECTED_SYNCS [--set ...]
  local name=$1 want=$2
  shift 2
  local out line n m
  out=$("$BIN/txl-train-emu" "$WORK/small.ini" --bench 3 --bench-warmup 1 "$@" 2>&1) ||
    fail "$name: txl-train-emu --bench exited with status $?: $(tail -n 3 <<< "$out")"
  line=$(grep -E '^bench: per step: ' <<< "$out") || fail "$name: no 'per step' line in: $out"
  [[ $line =~ ^bench:\ per\ step:\ ([0-9]+)\ kernel\ launches,\ ([0-9]+)\ host\ synchronisations\ \(the\ same\ in\ each\ of\ the\ 3\ timed\ steps ]] ||
    fail "$name: the counts vary or the line does not parse: $line"
  n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]}
  (( n > 0 )) || fail "$name: $n kernel launches per step"
  (( m == want )) || fail "$name: $m host synchronisations per step, expected $want ($line)"
  echo "ok: $name: $n kernel launches, $m host synchronisations per step"
}

check "fp32" 1
check "adaptive" 1 --set model.cutoffs=100,300 --set model.div_val=2
check "batch_chunk 2" 1 --set train.batch_chunk=2
check "attn_type 1" 1 --set model.attn_type=1
check "fp16, dynamic loss scaling" 2 --set run.precision=fp16
echo "PASS"
