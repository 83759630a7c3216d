#!/usr/bin/env bash
# Makes the seed inputs of the fuzz harnesses in OUT/<harness>/, each from the project's own files
# and tools, so that they follow the present formats:
#   config      every configs/*.ini (byte 0: the rank count and INI marks; see fuzz_config.c),
#               one of them with --set assignments after it, and a line over 4 KiB
#   prep        tests/fuzz/text/{train,valid,test}.txt behind fuzz_prep.c's header, in every mode,
#               and three lines over 4 KiB
#   corpus      txl-prep's corpora of those texts (word, char, byte; word with <unk> and --lower),
#               a bpe corpus of the fixture's tokenizer, and the described corpus of a zero byte
#               (fuzz_corpus.c: a valid one)
#   bpe         the byte-level BPE fixture's tokenizer.json (tests/data/bpe), and a small JSON text
#               with escapes, surrogate pairs and numbers
#   checkpoint  a checkpoint of ckpt_model.h's model (fuzz_make_ckpt_seed), and the described
#               checkpoint of a zero byte (fuzz_checkpoint.c: a valid one)
# usage: seeds.sh OUT TXL_PREP MAKE_CKPT_SEED [HARNESS...]   (default: all five)
set -euo pipefail
out=$1 prep=$2 make_ckpt=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
text=$here/text
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(config prep corpus checkpoint bpe)

# fuzz_prep's header: flags, min-freq, max-size, then where valid and test start (b / 256 of
# the rest): the split points of the three texts, rounded up so each byte lands where it was.
prep_input() { # FLAGS MIN_FREQ MAX_SIZE OUT
  local a b c n
  a=$(stat -c %s "$text/train.txt") b=$(stat -c %s "$text/valid.txt") c=$(stat -c %s "$text/test.txt")
  n=$((a + b + c))
  local f1=$(((256 * a + n - 1) / n)) rest=$((n - a))
  local f2=$(((256 * b + rest - 1) / rest))
  printf "\\x$(printf %02x "$1")\\x$(printf %02x "$2")\\x$(printf %02x "$3")\\x$(printf %02x $f1)\\x$(printf %02x $f2)" > "$4"
  cat "$text/train.txt" "$text/valid.txt" "$text/test.txt" >> "$4"
}

for h in "${harnesses[@]}"; do
  mkdir -p "$out/$h"
  case $h in
    config)
      world=0
      for ini in "$root"/configs/*.ini "$root"/configs/*/*.ini; do
        name=$(basename "$(dirname "$ini")")_$(basename "$ini" .ini)
        { printf "\\x$(printf %02x $((world % 16)))"; cat "$ini"; } > "$out/$h/$name"
        world=$((world + 1))
      done
      { printf '\x09'; cat "$root/configs/demo.ini"
        printf '\0model.d_model=8\0train.lr = 0.5\0model.cutoffs=2,3\0data.corpus=x.h5'; } > "$out/$h/demo_set"
      # a line longer than the parser's 4 KiB line buffer
      { printf '\x00[data]\ncorpus = '; head -c 5000 /dev/zero | tr '\0' x; printf '\n'; } > "$out/$h/long_line"
      ;;
    prep)
      prep_input 0 0 0 "$out/$h/word"
      prep_input 1 0 0 "$out/$h/char"
      prep_input 2 0 0 "$out/$h/byte"
      prep_input $((4 | 8)) 2 5 "$out/$h/word_lower_unk"
      prep_input $((1 | 16)) 0 6 "$out/$h/char_uint8_max"
      # a line longer than txl-prep's first 4 KiB line buffer, in every split
      { printf '\x00\x00\x00\x55\x80'; for k in 1 2 3; do head -c 6000 /dev/zero | tr '\0' 'a'; printf ' b\n'; done; } \
        > "$out/$h/word_long_lines"
      ;;
    corpus)
      args=(--train "$text/train.txt" --valid "$text/valid.txt" --test "$text/test.txt" --quiet)
      "$prep" --mode word "${args[@]}" --out "$out/$h/word.h5"
      "$prep" --mode char "${args[@]}" --out "$out/$h/char.h5"
      "$prep" --mode byte "${args[@]}" --out "$out/$h/byte.h5"
      "$prep" --mode word --lower --min-freq 2 "${args[@]}" --out "$out/$h/word_unk.h5"
      "$prep" --mode bpe --bpe-tokenizer "$root/tests/data/bpe/tokenizer.json" "${args[@]}" --out "$out/$h/bpe.h5"
      printf '\0' > "$out/$h/described"
      ;;
    bpe)
      cp "$root/tests/data/bpe/tokenizer.json" "$out/$h/tokenizer.json"
      printf '{"a": [1, -2.5e3, 0, "\\u00e9\\ud83d\\ude00\\n\\"", true, false, null, {}, []], "b": {"c": 1}}' \
        > "$out/$h/small.json"
      ;;
    checkpoint)
      "$make_ckpt" "$out/$h/seed.h5"
      printf '\0' > "$out/$h/described"
      ;;
    *) echo "seeds.sh: unknown harness '$h'" >&2; exit 2 ;;
  esac
done
