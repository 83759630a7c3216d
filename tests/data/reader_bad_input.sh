#!/usr/bin/env bash
# The corpus reader (data/corpus.c) on bad files and bad reads: one "txl: error:" line naming the
# file and the problem, non-zero exit.
#   reader_bad_input.sh TXL_PREP CORPUS_TOOL WORKDIR [PYTHON3]
PREP=$1 TOOL=$2 WORK=$3 PY=${4:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

# a good corpus made by txl-prep: char mode, the alphabet in keyboard order, 26 ids 0..25
for _ in $(seq 1 400); do echo qwertyuiopasdfghjklzxcvbnm; done | tr -d '\n' > t.txt
printf 'abc' > v.txt
"$PREP" --mode char --train t.txt --valid v.txt --test v.txt --out good.h5 --quiet
check "good corpus opens" "$TOOL" info good.h5
check_eq "good corpus: first ids" "$("$TOOL" block good.h5 train 26 0 2 0 3 | tr '\n' ' ')" "16 16 22 22 4 4 "

echo "== files that are no corpus"
expect_error "missing file" "$(re_quote "$WORK")/missing\.h5" 'cannot open corpus file' 'No such file' -- "$TOOL" info "$WORK/missing.h5"
expect_error "a text file" 't\.txt' 'not a txl corpus file' -- "$TOOL" info t.txt
: > empty.h5
expect_error "an empty file" 'empty\.h5' 'not a txl corpus file' -- "$TOOL" info empty.h5
"$TOOL" make-foreign foreign.h5
expect_error "an HDF5 file that is no corpus" 'foreign\.h5' 'not a txl corpus file' 'format' -- "$TOOL" info foreign.h5
size=$(wc -c < good.h5)
head -c $((size / 2)) good.h5 > half.h5
expect_error "a corpus truncated to half" 'half\.h5' 'not a txl corpus file' -- "$TOOL" info half.h5
head -c $((size - 100)) good.h5 > short.h5
expect_error "a corpus missing its last 100 bytes" 'short\.h5' -- "$TOOL" info short.h5
head -c 1000 good.h5 > head.h5
expect_error "the first 1000 bytes of a corpus" 'head\.h5' -- "$TOOL" info head.h5

echo "== inconsistent corpus files"
cp good.h5 v2.h5 && "$TOOL" set-attr v2.h5 format_version 2
expect_error "format_version 2" 'v2\.h5' 'version 2 is not supported' -- "$TOOL" info v2.h5
cp good.h5 vs.h5 && "$TOOL" set-attr vs.h5 vocab_size 5
expect_error "vocab_size not matching the vocabulary" 'vs\.h5' 'vocab_size = 5' 'vocab_offsets' -- "$TOOL" info vs.h5
cp good.h5 eos.h5 && "$TOOL" set-attr eos.h5 eos_id 26
expect_error "eos_id outside the vocabulary" 'eos\.h5' 'eos_id = 26' -- "$TOOL" info eos.h5

for dset in train vocab vocab_offsets; do
  cp good.h5 "nf_$dset.h5" && "$TOOL" no-fletcher "nf_$dset.h5" "$dset"
  expect_error "'/$dset' without Fletcher32" "nf_$dset\.h5" "dataset '/$dset' has no Fletcher32 checksum" -- \
    "$TOOL" info "nf_$dset.h5"
done

echo "== sizes from the file checked before they size an allocation"
"$TOOL" make-big-vocab v31.h5 2147483648
expect_error "vocab_size 2^31 (no int: n_token would overflow)" \
  'v31\.h5' 'vocab_size = 2147483648 is out of range \[1, 2147483647\]' -- "$TOOL" info v31.h5
"$TOOL" make-big-vocab v30.h5 2147483647
expect_error "vocab_size 2^31 - 1 with offsets never stored" \
  'v30\.h5' "'/vocab_offsets' stores 524292 bytes, fewer than its 2147483648 elements of 8 bytes need" -- \
  "$TOOL" vocab v30.h5

echo "== token id >= vocab_size (hand-made file, train[777] = vocab_size)"
"$TOOL" make badid.h5 1000 50 777
check "reading around the bad id works" "$TOOL" block badid.h5 train 100 0 7 0 77
expect_error "read_block over the bad id" 'badid\.h5' "'train'" 'position 777' '>= vocab_size 50' -- \
  "$TOOL" block badid.h5 train 100 5 3 70 10
expect_error "unigram entropy over the bad id" 'badid\.h5' "'train'" 'position 777' -- "$TOOL" entropy badid.h5 train

echo "== reads out of range"
"$TOOL" make ok.h5 1000 50
check "the last full column" "$TOOL" block ok.h5 train 100 9 1 0 100
expect_error "columns beyond the split" 'ok\.h5' "split 'train' \(1000 tokens\)" 'out of range' -- \
  "$TOOL" block ok.h5 train 100 9 2 0 10
expect_error "rows beyond the column" 'ok\.h5' 'rows \[95, 105\)' 'out of range' -- "$TOOL" block ok.h5 train 100 0 2 95 10
expect_error "negative offset" 'ok\.h5' 'out of range' -- "$TOOL" block ok.h5 valid 10 0 1 -1 2
expect_error "zero rows" 'ok\.h5' 'out of range' -- "$TOOL" block ok.h5 test 10 0 1 0 0
expect_error "unknown split" 'ok\.h5' "unknown split 'dev'" -- "$TOOL" block ok.h5 dev 10 0 1 0 1

echo "== damaged data (Fletcher32 checksum)"
if [ -n "$PY" ]; then
  cp good.h5 flip.h5
  # the stored ids of "qwertyuiopasdfghjklzxcvbnm" are the letters' alphabet positions
  "$PY" - flip.h5 <<'PYEOF'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
pattern = bytes(ord(c) - ord("a") for c in "qwertyuiopasdfghjklzxcvbnm" * 2)
at = data.find(pattern)
assert at >= 0, "ids not found in the file"
data[at + 30] ^= 0x01  # a valid id (25 -> 24, say): only the checksum can tell
open(path, "wb").write(bytes(data))
PYEOF
  check "the damaged file still opens (the damage is in the data)" "$TOOL" info flip.h5
  expect_error "reading a damaged chunk" 'flip\.h5' "reading split 'train' failed" -- "$TOOL" ids flip.h5 train
else
  echo "SKIPPED: damaged-chunk case (no python3 to locate the bytes)"
fi
finish
