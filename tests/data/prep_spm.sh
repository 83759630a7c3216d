#!/usr/bin/env bash
# txl-prep --mode spm on the bundled demo corpus (data/demo/tinyshakespeare): unigram and bpe
# models of 500 pieces trained on the training split; vocab_size, </s> as <eos>, ids by
# descending training count (as the adaptive softmax's cutoffs need), two runs byte-identical, every split decodes back to its file
# (no normalization, every space kept), --lower, a given model (--spm-model) giving the same
# file; bad options, models and damaged /spm_model datasets as one-line errors; then a short
# txl-train with the adaptive softmax (cutoffs inside the vocabulary) and txl-generate printing
# decoded text.
#   prep_spm.sh TXL_PREP CORPUS_TOOL DEMO_DIR WORKDIR BIN_DIR
PREP=$1 TOOL=$2 DEMO=$3 WORK=$4 BIN=$5
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK/out" && cd "$WORK" || exit 2
ARGS=(--train "$DEMO/train.txt" --valid "$DEMO/valid.txt" --test "$DEMO/test.txt")
info() { "$TOOL" info "$1" | awk -v k="$2" '$1 == k {print $2}'; }

for type in unigram bpe; do
  echo "== $type, 500 pieces"
  t0=$(date +%s%N)
  check "$type: txl-prep --mode spm --spm-type $type --spm-vocab 500 runs" \
    "$PREP" --mode spm --spm-type $type --spm-vocab 500 "${ARGS[@]}" --out $type.h5 --quiet
  echo "     ($type: trained and written in $((($(date +%s%N) - t0) / 1000000)) ms, $(stat -c %s $type.h5) bytes)"
  check_eq "$type: vocab_size attribute" "$("$TOOL" attr $type.h5 vocab_size)" 500
  check_eq "$type: mode attribute" "$("$TOOL" attr $type.h5 mode)" spm
  check_eq "$type: add_eos attribute" "$("$TOOL" attr $type.h5 add_eos)" 1
  check_eq "$type: vocab_from attribute" "$("$TOOL" attr $type.h5 vocab_from)" train
  check_eq "$type: eos_id is the model's </s>" "$(info $type.h5 eos_id)" "$("$TOOL" tokid $type.h5 '</s>')"
  check_eq "$type: unk_id is the model's <unk>" "$(info $type.h5 unk_id)" "$("$TOOL" tokid $type.h5 '<unk>')"
  check_eq "$type: ids stored as uint16" "$("$TOOL" dtype $type.h5 train)" uint16
  check_eq "$type: 500 distinct tokens in the vocabulary" "$("$TOOL" vocab $type.h5 | sort -u | wc -l)" 500
  # one <eos> per line of the file
  check_eq "$type: one <eos> per line of train.txt" \
    "$("$TOOL" ids $type.h5 train | grep -cx "$(info $type.h5 eos_id)")" "$(wc -l < "$DEMO/train.txt")"
  # ids by descending count in the training split: the count of id i+1 is never above id i's
  "$TOOL" ids $type.h5 train | sort -n | uniq -c | awk '{c[$2] = $1} END {for (i = 0; i < 500; i++) print c[i] + 0}' \
    > counts.txt
  check "$type: id 0 most frequent, counts never increase with the id" \
    awk 'NR > 1 && $1 > prev {exit 1} {prev = $1}' counts.txt
  for s in train valid test; do
    "$TOOL" decode $type.h5 $s > $s.decoded
    check "$type: $s decodes back to $s.txt byte for byte" cmp $s.decoded "$DEMO/$s.txt"
  done
  check "$type: a second run gives a byte-identical file" \
    "$PREP" --mode spm --spm-type $type --spm-vocab 500 "${ARGS[@]}" --out $type.2.h5 --quiet
  check "$type: cmp of the two runs" cmp $type.h5 $type.2.h5
  "$TOOL" spm-model $type.h5 $type.model
  check "$type: --spm-model with the stored model runs" \
    "$PREP" --mode spm --spm-model $type.model "${ARGS[@]}" --out $type.given.h5 --quiet
  check "$type: the given model gives the same file (same ids, same vocabulary)" cmp $type.h5 $type.given.h5
done
check "unigram and bpe give different ids" bash -c "! cmp -s <('$TOOL' ids unigram.h5 train) <('$TOOL' ids bpe.h5 train)"

echo "== the summary line and the default type"
"$PREP" --mode spm --spm-vocab 300 "${ARGS[@]}" --out def.h5 > summary.txt 2> progress.txt
grep -Eq "SentencePiece unigram model of 300 pieces \([0-9]+ bytes\) trained on .*train\.txt in [0-9.]+ s" summary.txt &&
  ok "default type unigram, training time in the summary: $(grep -o 'trained on.*' summary.txt)" ||
  fail "summary: $(cat summary.txt)"
check_eq "--spm-vocab 300: vocab_size" "$("$TOOL" attr def.h5 vocab_size)" 300

echo "== --lower; characters the model does not know"
check "--lower runs" "$PREP" --mode spm --spm-type bpe --spm-vocab 400 --lower "${ARGS[@]}" --out lower.h5 --quiet
"$TOOL" decode lower.h5 train > lower.decoded
check "--lower: train decodes to the lower-cased text" cmp lower.decoded <(tr A-Z a-z < "$DEMO/train.txt")
check_eq "--lower: no upper-case piece" "$("$TOOL" vocab lower.h5 | grep -c '[A-Z]')" 0
printf 'Zounds, \303\251t\303\251!\n\n  two  spaces\n' > odd.txt   # é is not in the model
"$PREP" --mode spm --spm-model bpe.model --train "$DEMO/train.txt" --valid odd.txt --test "$DEMO/test.txt" \
  --out odd.h5 > odd.summary
check_eq "an unknown character is <unk> (two in valid)" \
  "$(grep -E '^  valid' odd.summary | grep -Eo '\([0-9]+ mapped' | tr -d '(')" "2 mapped"
"$TOOL" decode odd.h5 valid > odd.decoded
check_eq "each unknown character decodes as SentencePiece's unknown surface" "$(grep -o $'\342\201\207' odd.decoded | wc -l)" 2
check_eq "the empty line and the doubled spaces are kept" "$(sed -n '2,3p' odd.decoded)" $'\n  two  spaces'

echo "== bad input: one line naming the file, nothing left behind"
printf 'good line\nbad \303\050 here\n' > badutf8.txt
echo "not a model" > garbage.model
: > empty.model
expect_error "--mode spm without --spm-vocab or --spm-model" '--mode spm needs --spm-vocab N' -- \
  "$PREP" --mode spm "${ARGS[@]}" --out out/a.h5
expect_error "--spm-vocab larger than the text yields" "$(re_quote "$DEMO/train.txt")" 'Vocabulary size too high \(60000\)' -- \
  "$PREP" --mode spm --spm-vocab 60000 "${ARGS[@]}" --out out/b.h5 --quiet
expect_error "--spm-vocab smaller than the characters" "$(re_quote "$DEMO/train.txt")" '--spm-vocab 20 is too small' \
  'needs 67 pieces' -- "$PREP" --mode spm --spm-vocab 20 "${ARGS[@]}" --out out/c.h5 --quiet
expect_error "--spm-vocab 0" '--spm-vocab: 0 is outside' -- "$PREP" --mode spm --spm-vocab 0 "${ARGS[@]}" --out out/d.h5
expect_error "a garbage --spm-model" 'garbage\.model: not a SentencePiece model' -- \
  "$PREP" --mode spm --spm-model garbage.model "${ARGS[@]}" --out out/e.h5
expect_error "an empty --spm-model" 'empty\.model: not a SentencePiece model: the file is empty' -- \
  "$PREP" --mode spm --spm-model empty.model "${ARGS[@]}" --out out/f.h5
expect_error "a missing --spm-model" 'nothere\.model: cannot open the SentencePiece model' -- \
  "$PREP" --mode spm --spm-model nothere.model "${ARGS[@]}" --out out/g.h5
expect_error "--spm-model with --spm-vocab" 'do not go with --spm-model bpe\.model' -- \
  "$PREP" --mode spm --spm-model bpe.model --spm-vocab 500 "${ARGS[@]}" --out out/h.h5
expect_error "--spm-type with --spm-model" 'do not go with --spm-model' -- \
  "$PREP" --mode spm --spm-model bpe.model --spm-type bpe "${ARGS[@]}" --out out/i.h5
expect_error "--spm-type other than unigram|bpe" "--spm-type: 'char' is not one of unigram, bpe" -- \
  "$PREP" --mode spm --spm-vocab 500 --spm-type char "${ARGS[@]}" --out out/j.h5
expect_error "--spm-vocab in word mode" 'apply only to --mode spm' -- \
  "$PREP" --mode word --spm-vocab 500 "${ARGS[@]}" --out out/k.h5
expect_error "--vocab-from all in spm mode" '--vocab-from all does not apply to --mode spm' -- \
  "$PREP" --mode spm --spm-vocab 500 --vocab-from all "${ARGS[@]}" --out out/l.h5
expect_error "--max-size in spm mode" 'do not apply to --mode spm' -- \
  "$PREP" --mode spm --spm-vocab 500 --max-size 100 "${ARGS[@]}" --out out/m.h5
expect_error "invalid UTF-8 in the training split" 'badutf8\.txt:2:' 'invalid UTF-8' -- \
  "$PREP" --mode spm --spm-vocab 500 --train badutf8.txt --valid "$DEMO/valid.txt" --test "$DEMO/test.txt" \
  --out out/n.h5 --quiet
expect_error "invalid UTF-8 in the test split" 'badutf8\.txt:2:' 'invalid UTF-8' -- \
  "$PREP" --mode spm --spm-model bpe.model --train "$DEMO/train.txt" --valid "$DEMO/valid.txt" --test badutf8.txt \
  --out out/o.h5 --quiet
no_leftovers "bad input" out ""

echo "== a damaged /spm_model: one line naming the corpus"
cp bpe.h5 content.h5
"$TOOL" poke content.h5 spm_model 0 255   # an invalid protobuf tag, checksums still valid
expect_error "a stored model that does not parse" 'content\.h5' "'/spm_model' is no SentencePiece model" -- \
  "$TOOL" info content.h5
cp bpe.h5 flipped.h5
addr=$("$TOOL" chunk-addr flipped.h5 spm_model) || fail "chunk-addr of '/spm_model'"
printf '\377' | dd of=flipped.h5 bs=1 seek=$((addr + 100)) conv=notrunc status=none
expect_error "a stored byte damaged (Fletcher32)" 'flipped\.h5' "reading '/spm_model' failed" -- \
  "$TOOL" info flipped.h5
cp bpe.h5 swapped.h5
"$TOOL" put-spm-model swapped.h5 unigram.model   # 500 pieces, but not the vocabulary's
expect_error "another model of as many pieces" 'swapped\.h5' "token [0-9]+ \('.*'\) is no piece of '/spm_model'" -- \
  "$TOOL" vocab swapped.h5
"$TOOL" spm-model def.h5 def.model
cp bpe.h5 fewer.h5
"$TOOL" put-spm-model fewer.h5 def.model
expect_error "a model of another size" 'fewer\.h5' "'/spm_model' has 300 pieces but vocab_size = 500" -- \
  "$TOOL" info fewer.h5
cp bpe.h5 noeos.h5
"$TOOL" set-attr noeos.h5 eos_id -1
expect_error "an spm corpus without eos_id" 'noeos\.h5' 'without eos_id' -- "$TOOL" info noeos.h5

echo "== txl-train with the adaptive softmax, then txl-generate"
short_run_and_sample "$WORK/unigram.h5" "on the spm corpus with cutoffs 50,200" "cutoffs = 50,200" "div_val = 2"
grep -q "corpus: .*unigram.h5 (spm level, vocabulary 500" "$WORK/train.out" && ok "txl-train reads an spm corpus" ||
  fail "txl-train's corpus line: $(grep '^corpus:' "$WORK/train.out")"
gen --prompt "ROMEO: I" > a.txt
gen --prompt "ROMEO: I" > b.txt
head -c 300 a.txt; echo
check_eq "txl-generate prints text starting with the prompt" "$(head -c 8 a.txt)" "ROMEO: I"
check "the text goes on after the prompt" test "$(tr -d '\n' < a.txt | wc -c)" -gt 20
check_eq "decoded: no SentencePiece space symbol left" "$(grep -c $'\342\226\201' a.txt)" 0
check "decoded: spaces restored" grep -q ' ' <(tail -c +9 a.txt)
check "same seed, same text" cmp a.txt b.txt
gen --prompt $'First Citizen:\nBefore we' > c.txt
check_eq "a prompt of two lines is printed as it is" "$(head -c 24 c.txt)" $'First Citizen:\nBefore we'
gen --prompt "" > d.txt
check "no prompt: the start of a line, text follows" test "$(tr -d '\n' < d.txt | wc -c)" -gt 0
"$BIN/txl-generate" --help | grep -q -- "--prompt TEXT" && ok "txl-generate --help" || fail "txl-generate --help"
finish
