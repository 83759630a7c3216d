#!/usr/bin/env bash
# scripts/gpu-acceptance.sh where there is no GPU: it must say so, skip every step with the
# reason, write its summary, build nothing, and exit 0. (With a GPU the script itself is the
# test: this one then says SKIPPED.)
# usage: test_gpu_acceptance.sh SOURCE_DIR
source "$1/tests/lib/checks.sh"
if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q '^GPU'; then
  echo "SKIPPED: a GPU is here (run scripts/gpu-acceptance.sh itself; this test checks the path without one)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
out=$(TXL_BUILD="$work/never-built" "$1/scripts/gpu-acceptance.sh" "$work/report" 2>&1) || rc=$?
check_eq "exit status without a GPU" "$rc" 0
grep -q '^SKIPPED: no CUDA device' <<< "$out" && ok "it says there is no CUDA device" \
  || { printf '%s\n' "$out"; fail "no 'SKIPPED: no CUDA device' line"; }
for step in device build profile cuda-tests bench sanitizers nsys; do
  grep -Eq "^\| $step \| skipped \| no CUDA device" "$work/report/summary.md" 2> /dev/null \
    && ok "summary: $step skipped, with the reason" || fail "summary: no skipped row for $step"
done
[ ! -e "$work/never-built" ] && ok "nothing was built" || fail "it built without a GPU"
finish
