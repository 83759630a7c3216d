#!/usr/bin/env bash
# ctest: every seed (seeds.sh) and every input of a defect found (regressions/NAME) through the
# harness once; it fails on a crash, a sanitizer report or a leak (see fuzz.h). With a seed's
# name as FLIPS, that seed alone is run with each of its first FLIP_BYTES bytes (default: all)
# inverted in turn instead (single-byte damage of the file: each must give an error or the data,
# never a crash); with BITS "bits", each single bit of those bytes flipped in turn.
# usage: replay.sh HARNESS NAME WORK TXL_PREP MAKE_CKPT_SEED [FLIPS [FLIP_BYTES [BITS]]]
set -euo pipefail
harness=$1 name=$2 work=$3 prep=$4 make_ckpt=$5 flips=${6:-} flip_bytes=${7:-} bits=${8:-}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/tmp"
bash "$here/seeds.sh" "$work/seeds" "$prep" "$make_ckpt" "$name"
if [ -n "$flips" ]; then
  TXL_FUZZ_TMP=$work/tmp "$harness" "-${bits:+bit}flips${flip_bytes:+=$flip_bytes}" "$work/seeds/$name/$flips"
  exit
fi
inputs=("$work/seeds/$name"/*)
for f in "$here/regressions/$name"/*; do
  [ -f "$f" ] && inputs+=("$f")
done
TXL_FUZZ_TMP=$work/tmp "$harness" "${inputs[@]}"
