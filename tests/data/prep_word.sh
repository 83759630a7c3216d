#!/usr/bin/env bash
# txl-prep --mode word on small texts made here: exact ids for hand-worked cases (<eos> per line,
# frequency order with ties by first occurrence, min_freq, max_size, <unk>, lower-casing, vocab
# from train vs all, whitespace and line ends), then a generated text against the Python
# reference (tests/data/ref_prep.py: collections.Counter, as the original Transformer-XL).
#   prep_word.sh TXL_PREP CORPUS_TOOL REF_PREP_PY WORKDIR [PYTHON3]
PREP=$1 TOOL=$2 REF=$3 WORK=$4 PY=${5:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2

# prep NAME TRAIN VALID TEST [OPTIONS...]: texts given as printf formats; makes NAME.h5
prep() {
  local name=$1
  mkdir -p "$name"
  printf "$2" > "$name/train.txt"
  printf "$3" > "$name/valid.txt"
  printf "$4" > "$name/test.txt"
  shift 4
  "$PREP" --mode word --train "$name/train.txt" --valid "$name/valid.txt" --test "$name/test.txt" \
          --out "$name.h5" --quiet "$@"
}
ids() { "$TOOL" ids "$1.h5" "$2" | tr '\n' ' ' | sed 's/ $//'; }
vocab() { "$TOOL" vocab "$1.h5" | tr '\n' ' ' | sed 's/ $//'; }
info() { "$TOOL" info "$1.h5" | awk -v k="$2" '$1 == k {print $2}'; }

echo "== counts, <eos> on every line (empty ones too), frequency order, ties by first occurrence"
# counts over all splits: b 4, <eos> 5, a 2 (first at 1), c 2 (first at 3), d 1
prep A 'b a b c\n\nc b\n' 'a d\n' 'b\n'
check_eq "A: vocabulary" "$(vocab A)" "<eos> b a c d"
check_eq "A: train ids" "$(ids A train)" "1 2 1 3 0 0 3 1 0"
check_eq "A: valid ids" "$(ids A valid)" "2 4 0"
check_eq "A: test ids" "$(ids A test)" "1 0"
check_eq "A: train length" "$(info A train)" 9
check_eq "A: eos_id" "$(info A eos_id)" 0
check_eq "A: no <unk> needed" "$(info A unk_id)" -1
check_eq "A: add_eos attribute" "$("$TOOL" attr A.h5 add_eos)" 1
check_eq "A: ids stored as uint8" "$("$TOOL" dtype A.h5 train)" uint8

echo "== --vocab-from train: d (valid only) becomes <unk>, added as id 1"
prep B 'b a b c\n\nc b\n' 'a d\n' 'b\n' --vocab-from train
check_eq "B: vocabulary" "$(vocab B)" "<eos> <unk> b c a"
check_eq "B: train ids" "$(ids B train)" "2 4 2 3 0 0 3 2 0"
check_eq "B: valid ids" "$(ids B valid)" "4 1 0"
check_eq "B: unk_id" "$(info B unk_id)" 1
check_eq "B: vocab_from attribute" "$("$TOOL" attr B.h5 vocab_from)" train

echo "== --max-size (specials included)"
prep C 'b a b c\n\nc b\n' 'a d\n' 'b\n' --max-size 3
check_eq "C: max-size 3 vocabulary" "$(vocab C)" "<eos> <unk> b"
check_eq "C: train ids" "$(ids C train)" "2 1 2 1 0 0 1 2 0"
check_eq "C: valid ids" "$(ids C valid)" "1 1 0"
check_eq "C: max_size attribute" "$("$TOOL" attr C.h5 max_size)" 3
prep C5 'b a b c\n\nc b\n' 'a d\n' 'b\n' --max-size 5
check_eq "max-size 5 holds everything, no <unk>" "$(vocab C5)" "<eos> b a c d"
prep C4 'b a b c\n\nc b\n' 'a d\n' 'b\n' --max-size 4
check_eq "max-size 4: <unk> takes a place" "$(vocab C4)" "<eos> <unk> b a"
check_eq "max-size 4: train ids" "$(ids C4 train)" "2 3 2 1 0 0 1 2 0"

echo "== --min-freq"
prep D 'b a b c\n\nc b\n' 'a d\n' 'b\n' --min-freq 2
check_eq "D: min-freq 2 drops d" "$(vocab D)" "<eos> <unk> b a c"
check_eq "D: valid ids" "$(ids D valid)" "3 1 0"
prep D5 'b a b c\n\nc b\n' 'a d\n' 'b\n' --min-freq 5
check_eq "min-freq 5 keeps only <eos> and <unk>" "$(vocab D5)" "<eos> <unk>"

echo "== a <unk> word in the text is the <unk> token"
prep G 'x <unk> x\ny\n' 'z\n' 'x\n' --vocab-from train
check_eq "G: vocabulary" "$(vocab G)" "<eos> x <unk> y"
check_eq "G: unk_id is the word's id" "$(info G unk_id)" 2
check_eq "G: valid ids (z -> <unk>)" "$(ids G valid)" "2 0"

echo "== --lower (ASCII)"
prep H 'The the THE\nA a\n' 'the\n' 'a\n'
# the 2, a 2, The THE A 1 each: ties in order of first occurrence
check_eq "H: without --lower: case kept, ties by first occurrence" "$(vocab H)" "<eos> the a The THE A"
prep L 'The the THE\nA a\n' 'the\n' 'a\n' --lower
check_eq "L: --lower vocabulary" "$(vocab L)" "<eos> the a"
check_eq "L: train ids" "$(ids L train)" "1 1 1 0 2 2 0"
check_eq "L: lower attribute" "$("$TOOL" attr L.h5 lower)" 1
prep L2 'ÄB Äb\n' 'äb\n' 'x\n' --lower
check_eq "--lower leaves non-ASCII letters alone" "$(vocab L2)" "<eos> Äb äb x"

echo "== whitespace (Python's str.split()) and line ends (\\n, \\r\\n, \\r)"
# "  lead  trail  \r\n" | "x\ty\vz\r" | "q<U+00A0>r<U+3000>s<U+2028>t\n" | "" ; no final newline in valid
prep W '  lead  trail  \r\nx\ty\vz\rq\302\240r\343\200\200s\342\200\250t\n\n' 'last line  ün ïcödé' '\n\n\n'
check_eq "W: train tokens" "$(info W train)" 13
check_eq "W: train decoded" "$("$TOOL" decode W.h5 train | tr '\n' '|')" "lead trail|x y z|q r s t||"
check_eq "W: a last line without newline still gets <eos>" "$(info W valid)" 5
check_eq "W: UTF-8 words kept whole" "$("$TOOL" decode W.h5 valid)" "last line ün ïcödé"
check_eq "W: a file of empty lines is one <eos> per line" "$(ids W test)" "0 0 0"

echo "== dtype"
prep T 'a b\n' 'a\n' 'b\n' --dtype uint32
check_eq "--dtype uint32 is honoured" "$("$TOOL" dtype T.h5 train)" uint32
words=$(seq 1 300 | sed 's/^/w/' | tr '\n' ' ')
prep U "$words\n" 'w1\n' 'w2\n'
check_eq "auto dtype for 301 tokens" "$("$TOOL" dtype U.h5 train)" uint16
check_eq "vocab_size 301" "$(info U vocab_size)" 301

echo "== generated text against the Python reference"
# deterministic text: Zipf-like choice from a word list with capitals, UTF-8 words, <unk>, rare
# words r0..r399 (some only in valid or test), tabs, runs of spaces, NBSP, empty lines, CRLF and
# CR line ends
gen() {
  awk -v seed="$1" -v lines="$2" 'BEGIN {
    n = split("the The of and to a in is it that was he for on are with as I his they be at one " \
              "have this from or had by word but what some we can out other were all there when up " \
              "use your how said an each she which do their time if will way about many then them " \
              "naïve café Ärger 日本 über <unk> x9 A-B q.", w, " ")
    x = seed
    for (l = 0; l < lines; l++) {
      x = (x * 16807) % 2147483647; len = x % 12
      s = ""
      for (i = 0; i < len; i++) {
        x = (x * 16807) % 2147483647; u = (x / 2147483647)
        k = int(n * u * u * u) + 1
        x = (x * 16807) % 2147483647; rare = x % 8
        x = (x * 16807) % 2147483647; tok = rare ? w[k] : "r" (x % 400)
        x = (x * 16807) % 2147483647; sep = x % 20
        s = s (i ? (sep == 0 ? "\t" : sep == 1 ? "  " : sep == 2 ? "\302\240" : " ") : "") tok
      }
      x = (x * 16807) % 2147483647; e = x % 10
      printf "%s%s", s, (e == 0 ? "\r\n" : e == 1 ? "\r" : "\n")
    }
  }'
}
mkdir -p gen
gen 1 3000 > gen/train.txt
gen 2 300 > gen/valid.txt
gen 3 300 > gen/test.txt
if [ -n "$PY" ]; then
  i=0
  for opts in "" "--lower" "--vocab-from train" "--min-freq 3" "--max-size 50" \
              "--max-size 40 --min-freq 2 --vocab-from train --lower" "--max-size 2"; do
    i=$((i + 1))
    mkdir -p ref$i
    # shellcheck disable=SC2086
    "$PY" "$REF" word $opts gen/train.txt gen/valid.txt gen/test.txt ref$i
    # shellcheck disable=SC2086
    "$PREP" --mode word --train gen/train.txt --valid gen/valid.txt --test gen/test.txt \
            --out gen$i.h5 --quiet $opts
    "$TOOL" info gen$i.h5 > gen$i.info
    check "generated [${opts:-defaults}]: sizes == Python ($(tr '\n' ' ' < ref$i/info.txt))" \
          cmp gen$i.info ref$i/info.txt
    "$TOOL" vocab gen$i.h5 > gen$i.vocab
    check "generated [${opts:-defaults}]: vocabulary order == Python" cmp gen$i.vocab ref$i/vocab.txt
    for s in train valid test; do
      "$TOOL" ids gen$i.h5 $s > gen$i.$s
      check "generated [${opts:-defaults}]: $s ids == Python" cmp gen$i.$s ref$i/$s.ids
    done
  done
  mkdir -p refc
  "$PY" "$REF" char --max-size 20 --vocab-from train gen/train.txt gen/valid.txt gen/test.txt refc
  "$PREP" --mode char --train gen/train.txt --valid gen/valid.txt --test gen/test.txt \
          --out genc.h5 --quiet --max-size 20 --vocab-from train
  "$TOOL" vocab genc.h5 > genc.vocab
  "$TOOL" info genc.h5 > genc.info
  "$TOOL" ids genc.h5 valid > genc.valid
  check "char mode, --max-size 20 --vocab-from train: sizes == Python" cmp genc.info refc/info.txt
  check "char mode, --max-size 20 --vocab-from train: vocabulary (<unk> last) == Python" cmp genc.vocab refc/vocab.txt
  check "char mode, --max-size 20 --vocab-from train: valid ids == Python" cmp genc.valid refc/valid.ids
else
  echo "not run here: the comparison with the Python reference (no python3)"
fi
finish
