#!/usr/bin/env bash
# GPU benchmarks: every CUDA kernel at the shapes of wt103_base and enwik8_base (one GPU's share
# of the batch: 8 and 3 columns, as on 8 GPUs), then whole training steps of both recipes on one
# GPU (tokens/s, share of the measured GEMM peak, MFU), in fp32 and TF32 GEMMs.
#   scripts/bench-gpu.sh [STEPS]
# Prints "SKIPPED: no CUDA device" where there is no GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
steps=${1:-20}
"$here/build.sh" > /dev/null
bench="$TXL_BUILD/bin/bench_cuda_kernels"
[ -x "$bench" ] || { echo "no $bench: configure with a CUDA toolkit (TXL_CUDA=AUTO|ON)"; exit 1; }
"$bench" wt103_base 8
"$bench" enwik8_base 3 | tail -n +2
for cfg in wt103_base enwik8_base; do
  for prec in fp32 tf32; do
    echo "== $cfg, one GPU, $prec GEMMs, $steps steps"
    # synthetic tokens (no corpus needed): n_token = the recipe's vocabulary
    case $cfg in wt103_base) V=267735 B=8 ;; enwik8_base) V=204 B=3 ;; esac
    "$TXL_BUILD/bin/txl-train" "$TXL_ROOT/configs/$cfg.ini" --bench "$steps" --set data.corpus= \
      --set data.n_token=$V --set run.device=cuda --set run.precision=$prec --set train.batch_size=$B |
      grep '^bench:'
  done
done
