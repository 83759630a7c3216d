#!/usr/bin/env bash
# txl-prep --mode bpe against Hugging Face tokenizers itself, where it is installed for the Python
# given (exit 77, skipped, elsewhere): tokenizers trained here on the bundled demo training text
# (with a few added tokens), and every id of all three splits, each file encoded whole as
# tokenizers encodes open(f, encoding="utf-8").read(), compared; for add_prefix_space off and on,
# use_regex off, the merges written as [a, b] pairs and as "a b" strings, and vocab.json +
# merges.txt; and python/txl/bpe.py's ids of the test split (where h5py is installed). The Python is
# $TXL_PYTHON where set (scripts/test.sh: build/py, which has tokenizers), else PYTHON3.
#   prep_bpe_tokenizers.sh TXL_PREP CORPUS_TOOL DEMO_DIR WORKDIR PYTHON3 PYTHON_DIR
PREP=$1 TOOL=$2 DEMO=$3 WORK=$4 PY=${TXL_PYTHON:-${5:-}} PYDIR=${6:-}
. "$(dirname "$0")/lib.sh"
if [ -z "$PY" ] || ! "$PY" -c "import tokenizers" 2> /dev/null; then
  echo "SKIPPED: Hugging Face tokenizers is not installed for ${PY:-python3} (pip install tokenizers)"
  exit 77
fi
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
# a test split with the added tokens, non-ASCII text, digits and runs of whitespace
{ head -c 3000 "$DEMO/test.txt"; printf '<|endoftext|>Zwölf 12 ½ Ⅻ\t\t x  \n<pad>  <|endoftext|><pad>\n  '; } > test.txt
"$PY" - "$DEMO/train.txt" <<'PYEOF' || { fail "training the tokenizers"; finish; }
import json, sys
from tokenizers import ByteLevelBPETokenizer, Tokenizer, pre_tokenizers
for name, prefix in (("plain", False), ("prefix", True)):
    tok = ByteLevelBPETokenizer(add_prefix_space=prefix)
    tok.train([sys.argv[1]], vocab_size=1000, min_frequency=2, special_tokens=["<|endoftext|>", "<pad>"],
              show_progress=False)
    tok.save(f"{name}.json")
    if name == "plain":
        tok.save_model(".")
t = Tokenizer.from_file("plain.json")
t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
t.save("noregex.json")
j = json.load(open("plain.json"))  # the other way of writing the merges
m = j["model"]["merges"]
j["model"]["merges"] = [" ".join(x) for x in m] if isinstance(m[0], list) else [x.split(" ") for x in m]
json.dump(j, open("othermerges.json", "w"))
PYEOF
# expect NAME TOKENIZER_FILE ARGS...: tokenizers' ids of the three files against txl-prep's
expect() {
  local name=$1 tok=$2
  shift 2
  if ! "$PREP" --mode bpe "$@" --train "$DEMO/train.txt" --valid "$DEMO/valid.txt" --test test.txt \
      --out $name.h5 --quiet; then
    fail "$name: txl-prep failed"
    return
  fi
  local s file
  for s in train valid test; do
    case $s in train) file=$DEMO/train.txt ;; valid) file=$DEMO/valid.txt ;; test) file=test.txt ;; esac
    "$PY" -c "
import sys
from tokenizers import Tokenizer, ByteLevelBPETokenizer
t = Tokenizer.from_file('$tok') if '$tok' else ByteLevelBPETokenizer('vocab.json', 'merges.txt')
sys.stdout.write(''.join(f'{i}\n' for i in t.encode(open('$file', encoding='utf-8').read()).ids))" > $name.$s.ref
    "$TOOL" ids $name.h5 $s > $name.$s.ids
    check "$name: $s: txl-prep's $(wc -l < $name.$s.ids) ids are tokenizers' $(wc -l < $name.$s.ref)" \
      cmp $name.$s.ids $name.$s.ref
  done
  if "$PY" -c "import h5py" 2> /dev/null; then # python/txl/bpe.py from the corpus's tables, on test
    "$PY" -c "
import sys, h5py
sys.path.insert(0, '$PYDIR')
from txl import bpe
with h5py.File('$name.h5', 'r') as f:
    v, o = f['vocab'][:].tobytes(), f['vocab_offsets'][:]
    vocab = [v[o[i]:o[i + 1]] for i in range(len(o) - 1)]
    ids = bpe.encode(open('test.txt', encoding='utf-8').read(), vocab, [tuple(m) for m in f['bpe_merges'][:].tolist()],
                     f['bpe_special'][:].tolist(), bool(f.attrs['bpe_prefix_space']), bool(f.attrs['bpe_use_regex']))
sys.stdout.write(''.join(f'{i}\\n' for i in ids))" > $name.test.py
    check "$name: test: python/txl/bpe.py's ids are tokenizers'" cmp $name.test.py $name.test.ref
  fi
}
expect plain plain.json --bpe-tokenizer plain.json
expect prefix prefix.json --bpe-tokenizer prefix.json
check_eq "prefix: bpe_prefix_space" "$("$TOOL" attr prefix.h5 bpe_prefix_space)" 1
expect noregex noregex.json --bpe-tokenizer noregex.json
check_eq "noregex: bpe_use_regex" "$("$TOOL" attr noregex.h5 bpe_use_regex)" 0
expect othermerges othermerges.json --bpe-tokenizer othermerges.json
check "the merges as pairs or as strings give the same file" cmp plain.h5 othermerges.h5
expect files "" --bpe-vocab vocab.json --bpe-merges merges.txt
finish
