#!/usr/bin/env bash
# ctest: every seed (seeds.sh) and every input of a defect found (regressions/NAME) through the
# harness once; it fails on a crash, a sanitizer report or a leak (see fuzz.h).
# usage: replay.sh HARNESS NAME WORK TXL_PREP MAKE_CKPT_SEED
set -euo pipefail
harness=$1 name=$2 work=$3 prep=$4 make_ckpt=$5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/tmp"
bash "$here/seeds.sh" "$work/seeds" "$prep" "$make_ckpt" "$name"
inputs=("$work/seeds/$name"/*)
for f in "$here/regressions/$name"/*; do
  [ -f "$f" ] && inputs+=("$f")
done
TXL_FUZZ_TMP=$work/tmp "$harness" "${inputs[@]}"
