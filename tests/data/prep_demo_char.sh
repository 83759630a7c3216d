#!/usr/bin/env bash
# txl-prep --mode char (and byte) on the bundled demo corpus (data/demo/tinyshakespeare):
# token counts = character counts of the files, 65-character vocabulary sorted by code point,
# two runs byte-identical, every split decodes back to its file, attributes and checksums.
#   prep_demo_char.sh TXL_PREP CORPUS_TOOL DEMO_DIR WORKDIR [PYTHON3]
PREP=$1 TOOL=$2 DEMO=$3 WORK=$4 PY=${5:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
ARGS=(--train "$DEMO/train.txt" --valid "$DEMO/valid.txt" --test "$DEMO/test.txt")

echo "== char mode"
check "txl-prep --mode char runs" "$PREP" --mode char "${ARGS[@]}" --out a.h5 --quiet
"$TOOL" info a.h5 > info.txt
check_eq "vocabulary size" "$(awk '$1 == "vocab_size" {print $2}' info.txt)" 65
check_eq "no <eos> in char mode" "$(awk '$1 == "eos_id" {print $2}' info.txt)" -1
check_eq "no <unk> needed" "$(awk '$1 == "unk_id" {print $2}' info.txt)" -1
for s in train valid test; do
  # characters of the file, counted by wc -m under a UTF-8 locale (the demo text is ASCII, so
  # this also equals the byte count)
  chars=$(LC_ALL=C.UTF-8 wc -m < "$DEMO/$s.txt" | tr -d ' ')
  check_eq "$s: tokens == characters of $s.txt" "$(awk -v s=$s '$1 == s {print $2}' info.txt)" "$chars"
  "$TOOL" decode a.h5 $s > $s.decoded
  check "$s: decoding all ids gives back $s.txt byte for byte" cmp $s.decoded "$DEMO/$s.txt"
  check_eq "$s: ${s}_source attribute" "$("$TOOL" attr a.h5 ${s}_source)" "$s.txt"
  check_eq "$s: ${s}_sha256 == sha256sum" "$("$TOOL" attr a.h5 ${s}_sha256)" \
           "$(sha256sum < "$DEMO/$s.txt" | cut -d' ' -f1)"
  check_eq "$s: ids stored as uint8" "$("$TOOL" dtype a.h5 $s)" uint8
done
check_eq "attribute format" "$("$TOOL" attr a.h5 format)" txl-corpus
check_eq "attribute format_version" "$("$TOOL" attr a.h5 format_version)" 1
check_eq "attribute mode" "$("$TOOL" attr a.h5 mode)" char
check_eq "attribute add_eos" "$("$TOOL" attr a.h5 add_eos)" 0
check_eq "attribute vocab_from" "$("$TOOL" attr a.h5 vocab_from)" all
"$TOOL" vocab a.h5 > vocab.txt
check_eq "token 0 is the newline" "$(sed -n 1p vocab.txt)" '\n'
check_eq "token 1 is the space" "$(sed -n 2p vocab.txt)" ' '
check_eq "last token is z" "$(sed -n 65p vocab.txt)" z
check_eq "token id of 'a'" "$("$TOOL" tokid a.h5 a)" "$(grep -n -x a vocab.txt | cut -d: -f1 | awk '{print $1 - 1}')"
# vocabulary in code point order: every line sorts after the previous (C locale = byte order)
check "vocabulary sorted by code point" bash -c "tail -n +3 '$WORK/vocab.txt' | LC_ALL=C sort -c"

check "second run" "$PREP" --mode char "${ARGS[@]}" --out b.h5 --quiet
check "two runs give byte-identical files (cmp)" cmp a.h5 b.h5
out=$("$PREP" --mode char "${ARGS[@]}" --out c.h5 2>/dev/null)
case "$out" in *"wrote c.h5"*"vocabulary 65 tokens"*) ok "summary printed without --quiet" ;;
  *) fail "summary without --quiet: '$out'" ;; esac
check "a run that prints its summary still gives the same file" cmp a.h5 c.h5

if [ -n "$PY" ]; then
  mkdir -p ref
  "$PY" "$(dirname "$0")/ref_prep.py" char "$DEMO/train.txt" "$DEMO/valid.txt" "$DEMO/test.txt" ref
  check "vocabulary == Python sorted(set(text))" cmp vocab.txt ref/vocab.txt
  for s in train valid test; do
    "$TOOL" ids a.h5 $s > $s.ids
    check "$s: ids == Python reference" cmp $s.ids ref/$s.ids
  done
else
  echo "not run here: the comparison with the Python reference (no python3)"
fi

echo "== char mode, --lower and --vocab-from train"
check "txl-prep --lower" "$PREP" --mode char "${ARGS[@]}" --out lower.h5 --lower --vocab-from train --quiet
check_eq "lower-cased vocabulary: 65 - 26 capitals" "$("$TOOL" info lower.h5 | awk '$1 == "vocab_size" {print $2}')" 39
check_eq "no capital letter left" "$("$TOOL" vocab lower.h5 | grep -c '^[A-Z]$')" 0
"$TOOL" decode lower.h5 valid > valid.lower
check "valid decodes to tr A-Z a-z of valid.txt" bash -c "tr A-Z a-z < '$DEMO/valid.txt' | cmp - '$WORK/valid.lower'"

echo "== byte mode"
check "txl-prep --mode byte" "$PREP" --mode byte "${ARGS[@]}" --out byte.h5 --quiet
"$TOOL" info byte.h5 > binfo.txt
check_eq "byte vocabulary is always 256" "$(awk '$1 == "vocab_size" {print $2}' binfo.txt)" 256
for s in train valid test; do
  check_eq "$s: tokens == bytes" "$(awk -v s=$s '$1 == s {print $2}' binfo.txt)" "$(wc -c < "$DEMO/$s.txt" | tr -d ' ')"
  "$TOOL" decode byte.h5 $s > $s.bdecoded
  check "$s: byte ids decode to the file" cmp $s.bdecoded "$DEMO/$s.txt"
done
check_eq "first byte id == byte value of F (First Citizen)" "$("$TOOL" ids byte.h5 train | head -1)" 70
finish
