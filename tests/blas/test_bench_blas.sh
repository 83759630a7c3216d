#!/usr/bin/env bash
# scripts/bench-blas.sh on tiny: one step's GEMM calls recorded on 2 ranks and replayed against
# every BLAS installed, each library's products within the bound of float summation; and
# bench_blas's refusals (records that are not one step apart, a damaged line).
# Usage: test_bench_blas.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
source "$SRC/tests/lib/checks.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

rc=0
TXL_BUILD=$BUILD TXL_BLAS_RECORDS=$WORK "$SRC/scripts/bench-blas.sh" "$SRC/configs/bench/tiny.ini" 2 1 \
  > "$WORK/bench.txt" 2>&1 || rc=$?
sed 's/^/     | /' "$WORK/bench.txt"
check_eq "bench-blas exits 0 (every library's products within the bound)" "$rc" 0
calls=$(sed -n 's/^one training step: \([0-9]*\) sgemm calls.*/\1/p' "$WORK/bench.txt")
if [ -n "$calls" ] && [ "$calls" -gt 0 ]; then ok "one step's calls found ($calls)"; else fail "no step's calls in the replay"; fi
check "the linked BLAS replayed and checked" grep -Eq '^linked +[0-9.]+ ms +[0-9.]+ +[0-9.e+-]+ +ok ' "$WORK/bench.txt"
check "no library with wrong results" bash -c "! grep -q 'WRONG RESULTS' '$WORK/bench.txt'"

# The records the script kept: both ranks of the 2-rank runs make the same calls (their shards
# are the same shape), and the run of 2 steps makes more calls than the one of 1.
check "rank 0 and rank 1 record the same calls" cmp <(sort "$WORK/steps2.rec.0") <(sort "$WORK/steps2.rec.1")
n1=$(wc -l < "$WORK/steps1.rec.0") n2=$(wc -l < "$WORK/steps2.rec.0")
if [ "$n2" -gt "$n1" ]; then ok "2 steps record more calls than 1 ($n2 > $n1)"; else fail "2 steps: $n2 calls, 1 step: $n1"; fi

# bench_blas refuses what is not one step apart, and a damaged record
refused() { # DESCRIPTION REGEX -- ARGS...
  local what=$1 re=$2 out rc=0
  shift 3
  out=$("$BUILD/bin/bench_blas" "$@" 2>&1) || rc=$?
  if [ $rc -ne 0 ] && printf '%s' "$out" | grep -Eq -- "$re"; then ok "$what -> $out"; else fail "$what: exit $rc, '$out'"; fi
}
refused "the same record twice" 'record the same calls: no step between them' -- "$WORK/steps2.rec.0" "$WORK/steps2.rec.0" 1
refused "the records swapped" 'fewer times than .*not one step more' -- "$WORK/steps2.rec.0" "$WORK/steps1.rec.0" 1
{ head -n 3 "$WORK/steps2.rec.0"; echo "101 111 111 4 4 x"; } > "$WORK/bad.rec"
refused "a damaged line" 'bad\.rec:4: a line that is not a recorded call' -- "$WORK/steps1.rec.0" "$WORK/bad.rec" 1
echo "101 111 113 4 4 4 4 4 4 1 0" > "$WORK/odd.rec"
refused "an unknown transpose" 'odd\.rec:1: not a row-major call' -- "$WORK/steps1.rec.0" "$WORK/odd.rec" 1
refused "a missing record" 'cannot open the record' -- "$WORK/none.rec" "$WORK/steps1.rec.0" 1
refused "REPEATS not a positive count" 'REPEATS must be a positive count' -- "$WORK/steps1.rec.0" "$WORK/steps2.rec.0" 0
finish
