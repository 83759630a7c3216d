#!/usr/bin/env bash
# The test suite: installs what is missing (install-deps.sh --with test, then the tests' Python
# packages: scripts/test-python.sh, whose python the tests get as TXL_PYTHON), builds (CUDA parts too when nvcc is present), runs
# every ctest test, then builds again with AddressSanitizer + UBSan and runs the unit tests
# (label "unit") and the CUDA kernels on the CPU emulator (label "cuda-emu", but the reverse thread
# order's twins, the multi-rank training test and the graph test) under them, then
# fuzzes each reader of untrusted input for 20 seconds (scripts/fuzz.sh; TXL_FUZZ_SECONDS).
# Prints the time of each stage as it ends, and all of them at the end (the whole must stay under
# 45 minutes on a 2-core machine: docs/testing.md).
# Run from anywhere: scripts/test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
times=()
# stage NAME CMD...: runs CMD, prints how long it took; a failing stage ends the suite (set -e)
# after printing the times so far
stage() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "== test.sh: $name"
  "$@" || rc=$?
  local dt=$((SECONDS - t0))
  times+=("$(printf '%-28s %4d:%02d' "$name" $((dt / 60)) $((dt % 60)))")
  if [ "$rc" -ne 0 ]; then
    echo "== test.sh: $name failed (exit $rc) after $((dt / 60)):$(printf %02d $((dt % 60)))"
    summary
    exit "$rc"
  fi
  echo "== test.sh: $name took $((dt / 60)):$(printf %02d $((dt % 60)))"
}
summary() {
  echo "== test.sh: stage times (m:ss)"
  printf '   %s\n' "${times[@]}"
  printf '   %-28s %4d:%02d\n' total $((SECONDS / 60)) $((SECONDS % 60))
}
stage "install-deps" "$here/install-deps.sh" --with test
stage "build" "$here/build.sh"
source "$here/env.sh"
stage "python packages" bash -c '"$1" > "$2"' _ "$here/test-python.sh" "$TXL_BUILD/.test-python"
export TXL_PYTHON=$(tail -n 1 "$TXL_BUILD/.test-python")
stage "ctest" ctest --test-dir "$TXL_BUILD" --output-on-failure -j 2 --timeout 900
asan=${TXL_ROOT}/build-asan
stage "build (ASan+UBSan)" bash -c 'cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Debug -DTXL_CUDA=OFF -DTXL_SANITIZE=ON &&
  cmake --build "$2" -j "$3"' _ "$TXL_ROOT" "$asan" "$TXL_JOBS"
# Open MPI and OpenBLAS keep allocations until exit by design: leaks are not what this run checks.
# Left out there, to keep the whole under 45 minutes: the parity tests' reverse-thread-order twins
# (*_emu_reverse) and cuda_rel_attn_emu_warps, which look for a missing barrier (the first ctest
# stage does) and touch the same memory as their forward twins; and cuda_nccl_train_emu (5.5
# minutes under ASan), whose kernels cuda_train_emu runs under ASan and whose NCCL path
# (dist/nccl.c, kernels/emu/emu_nccl.cpp) dist_nccl_emu_np2..4 and dist_timeout_nccl_emu run there; and cuda_graph_emu (4 minutes under
# ASan), whose capture and replay cuda_emu_selftest_capture and cuda_bench_counts_emu's graph
# cases run there; and cuda_rel_attn_emu_sm_80/_sm_86, which differ from cuda_rel_attn_emu only in
# the shared-memory limit the fused kernel is checked against (the same code, the same memory).
stage "ctest unit|cuda-emu (ASan)" env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$asan" --output-on-failure -L 'unit|cuda-emu' \
  -E '_emu_reverse$|_emu_warps$|^cuda_nccl_train_emu$|^cuda_graph_emu$|^cuda_rel_attn_emu_sm_8' -j 2 --timeout 900
stage "fuzz" "$here/fuzz.sh" "${TXL_FUZZ_SECONDS:-20}"
summary
