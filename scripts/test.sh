#!/usr/bin/env bash
# The test suite: installs what is missing, builds (CUDA parts too when nvcc is present), runs
# every ctest test, then builds again with AddressSanitizer + UBSan and runs the unit tests
# (label "unit") and the CUDA kernels on the CPU emulator (label "cuda-emu") under them, then
# fuzzes each reader of untrusted input for 20 seconds (scripts/fuzz.sh; TXL_FUZZ_SECONDS).
# Run from anywhere: scripts/test.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/install-deps.sh"
"$here/build.sh"
source "$here/env.sh"
ctest --test-dir "$TXL_BUILD" --output-on-failure -j 2 --timeout 900
asan=${TXL_ROOT}/build-asan
cmake -S "$TXL_ROOT" -B "$asan" -DCMAKE_BUILD_TYPE=Debug -DTXL_CUDA=OFF -DTXL_SANITIZE=ON
cmake --build "$asan" -j "$TXL_JOBS"
# Open MPI and OpenBLAS keep allocations until exit by design: leaks are not what this run checks.
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$asan" --output-on-failure -L 'unit|cuda-emu' -j 2 --timeout 900
"$here/fuzz.sh" "${TXL_FUZZ_SECONDS:-20}"
