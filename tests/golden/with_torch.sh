#!/usr/bin/env bash
# Runs a Python script of the reference with /usr/bin/python3 when it has PyTorch, NumPy and
# h5py (Debian: python3-torch, python3-h5py); where they are missing it says so and exits 77 (skipped),
# as the C tests do not depend on them.
#   with_torch.sh SCRIPT [ARGS...]
set -euo pipefail
py=/usr/bin/python3
# OpenBLAS (torch's BLAS here) picks its kernels by CPU: an AVX-512 Xeon gets SkylakeX's, whose
# summation order differs from the Haswell kernels an AVX2 machine runs (golden.h5 was made with
# those). Adam divides each element's step by that element's own gradient size, so an element
# whose gradient nearly cancels (1e5 times below its tensor's largest) carries that order's
# rounding into its step: measured, 3.6e-7 on a parameter of 3.2e-2 after 10 steps, over the
# 1e-5 relative bound, against 3.7e-9 with the Haswell kernels. So the reference runs the Haswell
# kernels wherever the CPU has them (every x86-64 CPU with AVX2 and FMA), as the file's maker did.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  export OPENBLAS_CORETYPE=Haswell
fi
if ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch/h5py not installed for $py (apt-get install python3-torch python3-h5py)"
  exit 77
fi
exec "$py" "$@"
