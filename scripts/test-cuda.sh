#!/usr/bin/env bash
# Runs every CUDA test and prints one table of the largest errors each check saw.
#
#   scripts/test-cuda.sh          on the GPU (ctest label "cuda"; each test prints
#                                 "SKIPPED: no CUDA device" where there is none)
#   scripts/test-cuda.sh --emu    the same tests on the CPU emulator of kernels/emu
#                                 (label "cuda-emu": the kernels' logic, not GPU results)
#
# Builds first (scripts/build.sh; CUDA parts need nvcc). Exit status: 1 when any test failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
label=cuda
suffix=""
if [ "${1:-}" = "--emu" ]; then
  label=cuda-emu
  suffix=_emu
fi
"$here/build.sh" > /dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
tests=$(ctest --test-dir "$TXL_BUILD" -N -L "^${label}\$" | sed -n 's/^ *Test *#[0-9]*: //p')
if [ -z "$tests" ]; then
  echo "no tests with label $label in $TXL_BUILD (configure with a CUDA toolkit, or TXL_CUDA_EMU=ON)"
  exit 1
fi
for t in $tests; do
  if ctest --test-dir "$TXL_BUILD" -R "^${t}\$" --output-on-failure -V > "$out/$t.log" 2>&1; then
    r=passed
  else
    r=FAILED
    status=1
  fi
  if grep -q "SKIPPED: no CUDA device" "$out/$t.log"; then r=skipped; fi
  echo "$r" > "$out/$t.result"
done
printf '\n%-24s %-8s %-58s %11s %11s %11s\n' test result check "max abs" "max rel" "err/bound"
for t in $tests; do
  r=$(cat "$out/$t.result")
  # the parity lines: "<check>  max abs A  max rel R  err/bound Q  ok|FAIL" (tests/cuda/parity.c)
  # and the step test's "<check>  rel err E  (tol T)  ok|FAIL"
  lines=$(sed -n 's/^[0-9]*: //p' "$out/$t.log" | grep -E "max abs|rel err" || true)
  if [ -z "$lines" ]; then
    printf '%-24s %-8s %s\n' "${t%$suffix}" "$r" "(no checks printed)"
    continue
  fi
  while IFS= read -r l; do
    check=$(echo "$l" | sed -E 's/ +(max abs|rel err).*//' | cut -c1-58)
    abs=$(echo "$l" | sed -nE 's/.*max abs ([^ ]+).*/\1/p')
    rel=$(echo "$l" | sed -nE 's/.*(max rel|rel err) ([^ ]+).*/\2/p')
    q=$(echo "$l" | sed -nE 's/.*err\/bound ([^ ]+).*/\1/p')
    [ -n "$q" ] || q=$(echo "$l" | grep -q "bit-identical" && echo "bits" || echo "-")
    printf '%-24s %-8s %-58s %11s %11s %11s\n' "${t%$suffix}" "$r" "$check" "${abs:--}" "${rel:--}" "$q"
  done <<< "$lines"
done
exit $status
