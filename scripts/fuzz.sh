#!/usr/bin/env bash
# Fuzzes the readers of untrusted input with the libFuzzer harnesses of tests/fuzz: builds them
# with clang, libFuzzer, AddressSanitizer and UBSan (TXL_FUZZ=ON, in build-fuzz or
# $TXL_FUZZ_BUILD), then runs each harness for SECONDS seconds from its seeds (tests/fuzz/seeds.sh
# and tests/fuzz/regressions/<harness>, copied to a scratch corpus: nothing is written into the
# repository) and prints one line per harness: its executions and crashes, and where a crash's
# input was saved (build-fuzz/crashes/<harness>/). A crash is a sanitizer report, a signal, an
# abort of the harness's checks (a leak, a broken promise: tests/fuzz/fuzz.h), a run longer than
# 10 s or one over 2 GiB. Exit status 1 when any harness crashed.
# usage: scripts/fuzz.sh SECONDS [HARNESS...]   (harnesses: config prep corpus checkpoint bpe)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh SECONDS [HARNESS...]   (harnesses: config prep corpus checkpoint bpe)" >&2
  exit 2
fi
seconds=$1
shift
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(config prep corpus checkpoint bpe)
build=${TXL_FUZZ_BUILD:-$TXL_ROOT/build-fuzz}

mkdir -p "$build"
CC=${TXL_FUZZ_CC:-clang} CXX=${TXL_FUZZ_CXX:-clang++} cmake -S "$TXL_ROOT" -B "$build" -DTXL_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTXL_CUDA=OFF -DTXL_CUDA_EMU=OFF > "$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
targets=(txl-prep fuzz_make_ckpt_seed)
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$build" -j "$TXL_JOBS" --target "${targets[@]}" > "$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log" >&2; exit 1; }

scratch=$(mktemp -d "${TMPDIR:-/tmp}/txl-fuzz.XXXXXX")
# the harnesses write each input to a file: in memory where there is /dev/shm
files=$(mktemp -d "$([ -w /dev/shm ] && echo /dev/shm || echo "$scratch")/txl-fuzz-files.XXXXXX")
trap 'rm -rf "$scratch" "$files"' EXIT
# (the seed tools are sanitized too; Open MPI's allocations kept until exit are no finding)
ASAN_OPTIONS=detect_leaks=0 bash "$TXL_ROOT/tests/fuzz/seeds.sh" "$scratch/seeds" "$build/bin/txl-prep" "$build/bin/fuzz_make_ckpt_seed" \
  "${harnesses[@]}"

# The config keys and sections of config.def as a dictionary: mutations then make known keys.
awk -F'[(,]' '/^X\(/ { gsub(/ /, "", $2); gsub(/ /, "", $3);
                       printf "\"[%s]\"\n\"%s\"\n\"%s.%s=\"\n", $2, $3, $2, $3 }' \
  "$TXL_ROOT/src/config/config.def" | sort -u > "$scratch/config.dict"

status=0
for h in "${harnesses[@]}"; do
  corpus=$scratch/corpus/$h artifacts=$build/crashes/$h log=$build/fuzz_$h.log
  mkdir -p "$corpus" "$artifacts"
  cp "$scratch/seeds/$h"/* "$corpus/"
  for f in "$TXL_ROOT/tests/fuzz/regressions/$h"/*; do
    [ -f "$f" ] && cp "$f" "$corpus/"
  done
  # what libFuzzer saves: crash-*, leak-*, timeout-*, oom-* (not the slow-unit-* notes)
  saved() { ls -t "$artifacts" | grep -E '^(crash|leak|timeout|oom)-' || true; }
  before=$(saved | wc -l)
  # config: known keys from the dictionary
  flags=()
  [ "$h" = config ] && flags=(-dict="$scratch/config.dict")
  # LeakSanitizer's stop-the-world crashes on Open MPI's threads (the checkpoint harness): there
  # the harness's own accounting (tests/fuzz/fuzz.h) is the leak check.
  leaks=1
  [ "$h" = checkpoint ] && leaks=0
  # allocator_may_return_null: an allocation too large for the machine gets NULL as from the C
  # library, which the code under test must handle (txl_malloc: its one-line error). libFuzzer
  # stops at the first crash: a harness has 0 or 1.
  rc=0
  TXL_FUZZ_TMP=$files \
  ASAN_OPTIONS=detect_leaks=$leaks:allocator_may_return_null=1 \
  LSAN_OPTIONS=suppressions=$TXL_ROOT/tests/fuzz/lsan.supp \
  OMPI_MCA_mca_base_component_disable_dlclose=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/bin/fuzz_$h" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "${flags[@]}" "$corpus" > "$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$execs" ] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  if [ "$(saved | wc -l)" -gt "$before" ]; then
    echo "fuzz_$h: ${execs:-0} executions, 1 crash: $artifacts/$(saved | head -1) (log: $log)"
    status=1
  elif [ "$rc" -ne 0 ]; then
    echo "fuzz_$h: ${execs:-0} executions, 1 crash: no input saved, exit status $rc (log: $log)"
    status=1
  else
    echo "fuzz_$h: ${execs:-0} executions, 0 crashes"
  fi
done
exit $status
