#!/usr/bin/env bash
# GPU benchmarks, one GPU:
#  1. every CUDA kernel at the shapes of wt103_base and enwik8_base (one GPU's share of the batch
#     on 8 GPUs: 8 and 3 columns), in GB/s or TFLOP/s against the device's peaks;
#  2. whole training steps of wt103_base, enwik8_base and ref_base (the recipe "base" of the
#     best-known PyTorch re-implementation, the throughput to beat) on synthetic tokens, in fp32,
#     with TF32 GEMMs, and in bf16 and fp16 mixed precision: tokens/s, share of the measured GEMM
#     peak, MFU;
#  3. the same ref_base model in PyTorch (tests/reference/bench_ref.py --device cuda) in fp32,
#     TF32 and bf16 autocast, with $TORCH_PYTHON (default python3; the newest torch pip installs
#     is the fair comparison).
# ref_base and its PyTorch twin run first (the comparison), then wt103_base and enwik8_base. A run
# that fails is named and the others still run; the exit status is then 1.
#   scripts/bench-gpu.sh [STEPS]
# Prints "SKIPPED: no CUDA device" where there is no GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
steps=${1:-20}
py=${TORCH_PYTHON:-python3}
"$here/build.sh" > /dev/null
bench="$TXL_BUILD/bin/bench_cuda_kernels"
[ -x "$bench" ] || { echo "no $bench: configure with a CUDA toolkit (TXL_CUDA=AUTO|ON)"; exit 1; }
failed=0
out=$("$bench" wt103_base 8) || { echo "FAILED: bench_cuda_kernels wt103_base"; failed=1; }
echo "$out"
[ "$out" = "SKIPPED: no CUDA device" ] && exit 0
"$bench" enwik8_base 3 | tail -n +2 || { echo "FAILED: bench_cuda_kernels enwik8_base"; failed=1; }
steps_of() { # CONFIG: txl-train --bench at each precision
  local cfg=$1
  # synthetic tokens (no corpus needed): n_token = the recipe's vocabulary; one GPU's columns
  case $cfg in wt103_base) set -- --set data.n_token=267735 --set train.batch_size=8 ;;
               enwik8_base) set -- --set data.n_token=204 --set train.batch_size=3 ;;
               *) set -- ;; esac
  for prec in fp32 tf32 bf16 fp16; do
    echo "== txl $cfg, one GPU, run.precision = $prec, $steps steps"
    "$TXL_BUILD/bin/txl-train" "$TXL_ROOT/configs/$cfg.ini" --bench "$steps" --set data.corpus= "$@" \
      --set run.device=cuda --set run.precision=$prec | grep '^bench:' || { echo "FAILED: txl $cfg $prec"; failed=1; }
  done
}
# the comparison first (ref_base in txl, then in PyTorch), then the paper's recipes
steps_of bench/ref_base
echo "== PyTorch, ref_base, one GPU ($("$py" -c 'import torch; print(torch.__version__)'))"
for mode in "" "--tf32" "--tf32 --amp bf16"; do
  # shellcheck disable=SC2086
  "$py" "$TXL_ROOT/tests/reference/bench_ref.py" --config ref_base --device cuda --steps "$steps" $mode \
    || { echo "FAILED: PyTorch ref_base $mode"; failed=1; }
done
steps_of wt103_base
steps_of enwik8_base
exit $failed
