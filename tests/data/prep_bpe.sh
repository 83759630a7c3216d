#!/usr/bin/env bash
# txl-prep --mode bpe against the committed fixture (tests/data/bpe, made once with Hugging Face
# tokenizers by make_fixture.py): the ids of fixture.txt from the tokenizer.json and from the
# vocab.json + merges.txt are the ids tokenizers gave; the reader's encoder (txl-generate's
# prompts) and python/txl/bpe.py give them too; decoding gives the text back; the attributes;
# two runs byte-identical; then a short txl-train and txl-generate printing text.
#   prep_bpe.sh TXL_PREP CORPUS_TOOL FIXTURE_DIR DEMO_DIR WORKDIR BIN_DIR PYTHON3 PYTHON_DIR
PREP=$1 TOOL=$2 FIX=$3 DEMO=$4 WORK=$5 BIN=$6 PY=${7:-} PYDIR=$8
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
info() { "$TOOL" info "$1" | awk -v k="$2" '$1 == k {print $2}'; }
# fixture.txt as Python's text mode reads it (its \r\n become \n): the text tokenizers encoded
tr -d '\r' < "$FIX/fixture.txt" > fixture.read.txt
HAVE_H5PY=0
[ -n "$PY" ] && "$PY" -c "import h5py" 2> /dev/null && HAVE_H5PY=1

for form in tokenizer files; do
  echo "== the $form form"
  if [ $form == tokenizer ]; then SRC=(--bpe-tokenizer "$FIX/tokenizer.json")
  else SRC=(--bpe-vocab "$FIX/vocab.json" --bpe-merges "$FIX/merges.txt"); fi
  check "$form: txl-prep --mode bpe runs" "$PREP" --mode bpe "${SRC[@]}" --train "$FIX/fixture.txt" \
    --valid "$FIX/sample.txt" --test "$FIX/fixture.txt" --out $form.h5 --quiet
  for s in train test; do
    "$TOOL" ids $form.h5 $s > $form.$s.ids
    check "$form: the $s ids are tokenizers' ($(wc -l < "$FIX/expected_$form.ids") ids)" \
      cmp $form.$s.ids "$FIX/expected_$form.ids"
  done
  "$TOOL" bpe-encode $form.h5 fixture.read.txt > $form.reader.ids
  check "$form: the reader's encoder (txl-generate's prompts) gives them too" cmp $form.reader.ids "$FIX/expected_$form.ids"
  "$TOOL" decode $form.h5 train > $form.decoded
  check "$form: train decodes to the text's bytes" cmp $form.decoded fixture.read.txt
  "$TOOL" decode $form.h5 valid > $form.valid.decoded
  check "$form: valid decodes to sample.txt" cmp $form.valid.decoded "$FIX/sample.txt"
  check_eq "$form: mode" "$("$TOOL" attr $form.h5 mode)" bpe
  check_eq "$form: vocab_size" "$("$TOOL" attr $form.h5 vocab_size)" 600
  check_eq "$form: bpe_prefix_space" "$("$TOOL" attr $form.h5 bpe_prefix_space)" 0
  check_eq "$form: eos_id is <|endoftext|>" "$(info $form.h5 eos_id)" "$("$TOOL" tokid $form.h5 '<|endoftext|>')"
  check_eq "$form: unk_id" "$(info $form.h5 unk_id)" -1
  check_eq "$form: add_eos" "$("$TOOL" attr $form.h5 add_eos)" 0
  check_eq "$form: ids stored as uint16" "$("$TOOL" dtype $form.h5 train)" uint16
  check "$form: the whole file checks (merges, bytes, ids)" "$TOOL" check $form.h5 1
  check "$form: a second run gives a byte-identical file" "$PREP" --mode bpe "${SRC[@]}" --train "$FIX/fixture.txt" \
    --valid "$FIX/sample.txt" --test "$FIX/fixture.txt" --out $form.2.h5 --quiet
  check "$form: cmp of the two runs" cmp $form.h5 $form.2.h5
  if [ $HAVE_H5PY == 1 ]; then
    check "$form: python/txl/bpe.py gives the same ids and decodes to the text" "$PY" - $form.h5 fixture.read.txt \
      "$FIX/expected_$form.ids" "$PYDIR" <<'PYEOF'
import sys
import h5py
sys.path.insert(0, sys.argv[4])
from txl import bpe
with h5py.File(sys.argv[1], "r") as f:
    v, o = f["vocab"][:].tobytes(), f["vocab_offsets"][:]
    vocab = [v[o[i]:o[i + 1]] for i in range(len(o) - 1)]
    merges = [tuple(m) for m in f["bpe_merges"][:].tolist()]
    special = f["bpe_special"][:].tolist()
    prefix = bool(f.attrs["bpe_prefix_space"])
text = open(sys.argv[2], encoding="utf-8").read()
ids = bpe.encode(text, vocab, merges, special, prefix)
want = [int(x) for x in open(sys.argv[3])]
if ids != want or bpe.decode(ids, vocab) != text.encode():
    sys.exit(f"python ids differ: {len(ids)} vs {len(want)}, first at "
             f"{next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))}")
PYEOF
  else
    echo "     (python/txl/bpe.py: not run here, no h5py for ${PY:-python3})"
  fi
done
check "the forms differ: only tokenizer.json splits <|endoftext|> out" \
  bash -c "! cmp -s tokenizer.train.ids files.train.ids"
check_eq "tokenizer form: each <|endoftext|> of fixture.txt one id" "$(grep -cx 0 tokenizer.train.ids)" \
  "$(grep -o "<|endoftext|>" fixture.read.txt | wc -l)"

echo "== --bpe-prefix-space"
check "--bpe-prefix-space runs" "$PREP" --mode bpe --bpe-vocab "$FIX/vocab.json" --bpe-merges "$FIX/merges.txt" \
  --bpe-prefix-space --train "$FIX/fixture.txt" --valid "$FIX/sample.txt" --test "$FIX/fixture.txt" --out ps.h5 --quiet
check_eq "bpe_prefix_space attribute" "$("$TOOL" attr ps.h5 bpe_prefix_space)" 1
"$TOOL" decode ps.h5 train > ps.decoded
check "with the prefix space, train decodes to ' ' + the text" cmp ps.decoded <(printf ' '; cat fixture.read.txt)

echo "== the summary line"
"$PREP" --mode bpe --bpe-tokenizer "$FIX/tokenizer.json" --train "$FIX/fixture.txt" --valid "$FIX/sample.txt" \
  --test "$FIX/fixture.txt" --out sum.h5 > summary.txt 2> /dev/null
grep -q "byte-level BPE of 600 tokens, 343 merges, 1 added tokens, add_prefix_space 0" summary.txt &&
  ok "summary: $(grep -o 'byte-level BPE.*tokens,' summary.txt)" || fail "summary: $(cat summary.txt)"

echo "== txl-train on a bpe corpus, then txl-generate"
check "txl-prep of the demo text" "$PREP" --mode bpe --bpe-tokenizer "$FIX/tokenizer.json" --train "$DEMO/train.txt" \
  --valid "$DEMO/valid.txt" --test "$DEMO/test.txt" --out demo.h5 --quiet
short_run_and_sample "$WORK/demo.h5" "on the bpe corpus"
gen --prompt "ROMEO: I'll" > a.txt
gen --prompt "ROMEO: I'll" > b.txt
head -c 300 a.txt; echo
check_eq "txl-generate prints text starting with the prompt" "$(head -c 11 a.txt)" "ROMEO: I'll"
check "the text goes on after the prompt" test "$(tr -d '\n' < a.txt | wc -c)" -gt 30
check_eq "decoded: no byte-alphabet space symbol (U+0120) left" "$(grep -c $'\304\240' a.txt)" 0
check "same seed, same text" cmp a.txt b.txt
gen --prompt "" > d.txt
check "no prompt: starts from <|endoftext|>, text follows" test "$(tr -d '\n' < d.txt | wc -c)" -gt 0
finish
