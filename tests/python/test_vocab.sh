#!/usr/bin/env bash
# txl.Vocab (a loaded model's .vocab) against the ids txl-prep wrote: encode(valid text) and
# encode(test text) are the stored ids and decode gives the text back, in word (with <unk>,
# and --lower), char, byte and spm mode (spm's encode needs the sentencepiece package: without it
# encode must be a TxlError that names it, and decode is checked alone).
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/char.h5" 1000 200
make_word_corpus "$WORK/word.h5"
prep() { # MODE OUT ARGS...
  local mode=$1 out=$2
  shift 2
  "$BIN/txl-prep" --mode "$mode" --quiet --train "$WORK/train.txt" --valid "$WORK/valid.txt" --test "$WORK/test.txt" \
    --out "$out" "$@"
}
prep word "$WORK/lower.h5" --lower --min-freq 3
prep byte "$WORK/byte.h5"
prep char "$WORK/charunk.h5" --vocab-from train --min-freq 2
for c in char charunk word lower byte; do py_checks vocab "$WORK/$c.h5" "$WORK"; done
# spm: the model trained on all three texts, so that every character is a piece and decoding
# gives each line back byte for byte (FORMAT.md: identity normalisation)
cat "$WORK/train.txt" "$WORK/valid.txt" "$WORK/test.txt" > "$WORK/all.txt"
if "$BIN/txl-prep" --mode spm --quiet --train "$WORK/all.txt" --valid "$WORK/valid.txt" --test "$WORK/test.txt" \
     --out "$WORK/spm.h5" --spm-vocab 200 2> "$WORK/spm.err"; then
  py_checks vocab "$WORK/spm.h5" "$WORK"
else
  echo "not run here: spm mode (txl-prep: $(head -c 200 "$WORK/spm.err"))"
fi
finish
