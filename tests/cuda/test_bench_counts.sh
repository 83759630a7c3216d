#!/usr/bin/env bash
# txl-train-emu --bench prints "per step: N kernel launches, M host synchronisations, G graph
# launches" (counted by the CUDA emulator, kernels/emu/README.md "Counts"), the same in every
# timed step of these configs (synthetic tokens, fixed tgt_len): N > 0 and G = 0 uncaptured, N = 0
# and G = 1 replayed (run.cuda_graph), and M as the step now synchronises. The
# inputs (tokens, targets, position rows, the adaptive grouping) go up through the upload op
# (page-locked staging, cudaMemcpyAsync), and the step's loss stays on the device until a progress
# line (ops loss_sum, txl_trainer_losses; --bench reads it after the timed steps), so neither
# synchronises; nor does the gradient norm: it and the clip factor stay on the device in the
# optimizer's record (ops grad_clip, kernels/common/clip.h), which the fused Adam / SGD pass reads
# there, and the host reads it with the losses (txl_trainer_look). What remains:
#   fp32, bf16, adaptive, batch_chunk, attn_type 1, SGD    nothing                             0
#   run.precision = fp16    dynamic loss scaling (its default) decides on the host whether each
#                           step's update is skipped or the run stops: the record and the
#                           loss read after every step (a non-finite loss stops the run,
#                           a non-finite gradient alone is skipped)                          2
# (LAMB takes its per-tensor trust ratios on the host: it waits for the device, not counted here.)
# Then the device memory the bench reports its buffers hold: between the parameter state and the
# estimate of the GPU share.
# usage: test_bench_counts.sh BIN_DIR
set -euo pipefail
BIN=$1
source "$(dirname "$0")/../lib/checks.sh" # small_model_shape (its fail is replaced below)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
small_cuda_bench_ini "$WORK/small.ini"

check() { # NAME EXPECTED_SYNCS [--set ...]: uncaptured steps (run.cuda_graph = off), but "graph..."
  local name=$1 want=$2 want_graphs=0 warmup=1
  shift 2
  local args=(--set run.cuda_graph=off "$@")
  case $name in graph*) want_graphs=1 warmup=3 args=("$@") ;; esac # captured and replayed
  local out line n m g
  out=$("$BIN/txl-train-emu" "$WORK/small.ini" --bench 3 --bench-warmup "$warmup" "${args[@]}" 2>&1) ||
    fail "$name: txl-train-emu --bench exited with status $?: $(tail -n 3 <<< "$out")"
  line=$(grep -E '^bench: per step: ' <<< "$out") || fail "$name: no 'per step' line in: $out"
  [[ $line =~ ^bench:\ per\ step:\ ([0-9]+)\ kernel\ launches,\ ([0-9]+)\ host\ synchronisations,\ ([0-9]+)\ graph\ launches\ \(the\ same\ in\ each\ of\ the\ 3\ timed\ steps ]] ||
    fail "$name: the counts vary or the line does not parse: $line"
  n=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} g=${BASH_REMATCH[3]}
  if (( want_graphs )); then
    (( n == 0 && g == 1 )) || fail "$name: $n kernel launches and $g graph launches per step, expected 0 and 1 ($line)"
  else
    (( n > 0 && g == 0 )) || fail "$name: $n kernel launches and $g graph launches per step ($line)"
  fi
  (( m == want )) || fail "$name: $m host synchronisations per step, expected $want ($line)"
  echo "ok: $name: $n kernel launches, $m host synchronisations, $g graph launches per step"
}

check "fp32" 0
check "bf16" 0 --set run.precision=bf16
check "adaptive" 0 --set model.cutoffs=100,300 --set model.div_val=2
check "batch_chunk 2" 0 --set train.batch_chunk=2
check "attn_type 1" 0 --set model.attn_type=1
check "sgd" 0 --set train.optim=sgd
check "fp16, dynamic loss scaling" 2 --set run.precision=fp16
# run.cuda_graph (auto: on here): after 3 warm-up steps (the memory filling, the first step of the
# full shape, the capture) each step is one graph launch, no kernel launch of the host's
check "graph, fp32" 0
check "graph, bf16" 0 --set run.precision=bf16
check "graph, batch_chunk 2" 0 --set train.batch_chunk=2
# the wt103 recipe's shape: adaptive input and softmax (div_val 2), two column groups
check "graph, wt103-shaped" 0 --set model.cutoffs=100,300 --set model.div_val=2 --set train.batch_chunk=2

# The device memory txl's buffers hold in the timed steps (txl_cuda_memory_held): at least the
# parameters, gradients and moments, at most the estimate of the whole GPU share (which adds an
# evaluation run that --bench does not allocate). Sizes as txl_format_bytes prints them.
bytes() { # "12.5 MiB" -> bytes
  awk -v n="$1" -v u="$2" 'BEGIN { f = 1; if (u == "KiB") f = 1024; if (u == "MiB") f = 1048576;
    if (u == "GiB") f = 1073741824; printf "%.0f\n", n * f }'
}
for prec in fp32 bf16; do
  out=$("$BIN/txl-train-emu" "$WORK/small.ini" --bench 2 --bench-warmup 1 --set run.precision=$prec 2>&1) ||
    fail "memory, $prec: txl-train-emu --bench exited with status $?"
  est=$(grep -m 1 '^memory per rank (estimate): ' <<< "$out") || fail "memory, $prec: no estimate line"
  [[ $est =~ estimate\):\ ([0-9.]+)\ ([KMG]?i?B)\ on\ the\ GPU:\ ([0-9.]+)\ ([KMG]?i?B)\ parameters ]] ||
    fail "memory, $prec: the estimate does not parse: $est"
  total=$(bytes "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}") state=$(bytes "${BASH_REMATCH[3]}" "${BASH_REMATCH[4]}")
  line=$(grep -m 1 '^bench: device memory of rank 0: ' <<< "$out") || fail "memory, $prec: no device memory line"
  [[ $line =~ rank\ 0:\ ([0-9.]+)\ MiB\ in\ txl ]] || fail "memory, $prec: the line does not parse: $line"
  held=$(bytes "${BASH_REMATCH[1]}" MiB)
  # each figure printed to 0.1 of its unit: a margin of 0.05 MiB either way
  (( held + 52429 >= state && held <= total + 52429 )) ||
    fail "memory, $prec: $held bytes held, outside [$state, $total] (parameter state, estimate)"
  echo "ok: memory, $prec: $held bytes held in the timed steps, within [$state, $total]"
done
echo "PASS"
