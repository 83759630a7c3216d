#!/usr/bin/env bash
# txl-prep --mode bpe on bad tokenizer files and options, and the reader on damaged bpe corpora:
# each case one "txl: error:" line naming the file and the problem, a non-zero exit, and no output
# or temporary file left behind. The bad files are the committed fixture (tests/data/bpe) edited.
#   prep_bpe_bad.sh TXL_PREP CORPUS_TOOL FIXTURE_DIR WORKDIR PYTHON3
PREP=$1 TOOL=$2 FIX=$3 WORK=$4 PY=${5:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK/out" && cd "$WORK" || exit 2
printf 'some text\n' > good.txt
printf 'fine line\nalso fine\nbad \303\050 here\n' > badutf8.txt   # line 3: C3 28

# tok NAME SED_SCRIPT: a copy of tokenizer.json edited by sed; voc NAME SED_SCRIPT: of vocab.json
tok() { sed "$2" "$FIX/tokenizer.json" > "$1"; }
voc() { sed "$2" "$FIX/vocab.json" > "$1"; }
# bad NAME REGEX... -- ARGS...: txl-prep --mode bpe ARGS on good texts fails as it should
bad() {
  local name=$1 patterns=()
  shift
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  expect_error "$name" "${patterns[@]}" -- "$PREP" --mode bpe --train good.txt --valid good.txt --test good.txt \
    --out out/$name.h5 --quiet "$@"
  no_leftovers "$name" out "$name"
}
T=(--bpe-tokenizer)
F=(--bpe-merges "$FIX/merges.txt" --bpe-vocab)

echo "== damaged JSON"
head -c 3000 "$FIX/tokenizer.json" > cut.json
bad cut 'cut\.json' 'not valid JSON' 'line [0-9]+, column [0-9]+' 'not closed|unexpected end' -- "${T[@]}" cut.json
tok comma.json 's/"padding": null,/"padding": null,,/'
bad comma 'comma\.json' 'line 4, column 19' "expected a key \\(a string\\) in the object" -- "${T[@]}" comma.json
tok escape.json 's/"content": "<|endoftext|>"/"content": "<|end\\qoftext|>"/'
bad escape 'escape\.json' 'line 8, column' "unknown escape" -- "${T[@]}" escape.json
tok surrogate.json 's/"content": "<|endoftext|>"/"content": "\\uD800x"/'
bad surrogate 'surrogate\.json' 'high surrogate \\uD800 not followed by a low one' -- "${T[@]}" surrogate.json
printf '{"a": "\377"}' > badutf8.json
bad badutf8json 'badutf8\.json' 'invalid UTF-8 \(byte 0xFF\)' -- "${T[@]}" badutf8.json
printf '[1, 2]' > array.json
bad array 'array\.json' 'must be a JSON object, not an array' -- "${T[@]}" array.json
: > empty.json
bad emptyjson 'empty\.json' 'is empty' -- "${T[@]}" empty.json
bad missing 'nothere\.json' 'cannot open the tokenizer file' -- "${T[@]}" nothere.json
# 100 nested arrays: the depth limit, not a stack overflow
printf '%0.s[' $(seq 100) > deep.json
bad deep 'deep\.json' 'nested more than 64 deep' -- "${T[@]}" deep.json

echo "== vocabularies and merges"
{ cat "$FIX/merges.txt"; echo "Ġzzz Ġqqq"; } > unknown.txt
bad unknown 'unknown\.txt:345:' "the merge 'Ġzzz Ġqqq' names 'Ġzzz', which is not in the vocabulary" -- \
  --bpe-vocab "$FIX/vocab.json" --bpe-merges unknown.txt
{ cat "$FIX/merges.txt"; echo "z Ġ"; } > noresult.txt
bad noresult 'noresult\.txt:345:' "the merge 'z Ġ' makes a token that is not in the vocabulary" -- \
  --bpe-vocab "$FIX/vocab.json" --bpe-merges noresult.txt
{ cat "$FIX/merges.txt"; echo "three tokens here"; } > threeparts.txt
bad threeparts 'threeparts\.txt:345:' 'not a merge: two tokens separated by one space' -- \
  --bpe-vocab "$FIX/vocab.json" --bpe-merges threeparts.txt
voc nobyte.json 's/"Ā":189,/"ĀĀ":189,/'
bad nobyte 'nobyte\.json' 'byte 0x00 is no token of the vocabulary' -- "${F[@]}" nobyte.json
voc alphabet.json 's/"Ā":189,/"€":189,/'
bad alphabet 'alphabet\.json' "token 189 \('€'\) has the character U\+20AC, which is not in GPT-2's byte alphabet" -- \
  "${F[@]}" alphabet.json
voc gap.json 's/"~":94,/"~":9400,/'
bad gap 'gap\.json' 'the ids are not 0 \.\. 599 without gaps \(id 9400' -- "${F[@]}" gap.json
voc twice.json 's/"~":94,/"~":93,/'
bad twice 'twice\.json' 'id 93 is given to two tokens' -- "${F[@]}" twice.json
voc strid.json 's/"~":94,/"~":"94",/'
bad strid 'strid\.json' "the id of token '~' is not an integer" -- "${F[@]}" strid.json
tok addedid.json 's/"id": 0,/"id": 5,/'
bad addedid 'addedid\.json' "added_tokens\[0\] \('<\|endoftext\|>'\) has id 5, which model.vocab gives to another token" -- \
  "${T[@]}" addedid.json
tok samebytes.json 's/"added_tokens": \[/"added_tokens": [{"id": 600, "content": "!", "normalized": false},/'
bad samebytes 'samebytes\.json' 'token 600 has the bytes of token 1' -- "${T[@]}" samebytes.json

echo "== tokenizer.json features txl-prep does not implement"
tok overlap.json 's/"added_tokens": \[/"added_tokens": [{"id": 600, "content": "text|><x", "normalized": true},/'
bad overlap 'overlap\.json' "added_tokens\\[0\\] and \\[1\\] differ in 'normalized' and can overlap" -- "${T[@]}" overlap.json
tok nfc.json 's/"normalizer": null/"normalizer": {"type": "NFC"}/'
bad nfc 'nfc\.json' 'normalizer NFC is not supported \(only null\)' -- "${T[@]}" nfc.json
tok wordpiece.json 's/"type": "BPE"/"type": "WordPiece"/'
bad wordpiece 'wordpiece\.json' 'model type WordPiece is not supported \(only BPE\)' -- "${T[@]}" wordpiece.json
tok fallback.json 's/"byte_fallback": false/"byte_fallback": true/'
bad fallback 'fallback\.json' 'model\.byte_fallback = true is not supported' -- "${T[@]}" fallback.json
tok dropout.json 's/"dropout": null/"dropout": 0.1/'
bad dropout 'dropout\.json' 'model\.dropout is not supported' -- "${T[@]}" dropout.json
tok prefix.json 's/"continuing_subword_prefix": null/"continuing_subword_prefix": "##"/'
bad prefix 'prefix\.json' 'model\.continuing_subword_prefix is not supported' -- "${T[@]}" prefix.json
tok ignore.json 's/"ignore_merges": false/"ignore_merges": true/'
bad ignore 'ignore\.json' 'model\.ignore_merges = true is not supported' -- "${T[@]}" ignore.json
tok pretok.json '18s/"ByteLevel"/"Whitespace"/'
bad pretok 'pretok\.json' 'pre_tokenizer type Whitespace is not supported \(only ByteLevel\)' -- "${T[@]}" pretok.json
tok post.json '24s/"ByteLevel"/"TemplateProcessing"/'
bad post 'post\.json' 'post_processor TemplateProcessing is not supported' -- "${T[@]}" post.json
tok lstrip.json 's/"lstrip": false/"lstrip": true/'
bad lstrip 'lstrip\.json' 'added_tokens\[0\]\.lstrip = true is not supported' -- "${T[@]}" lstrip.json
tok trunc.json 's/"truncation": null/"truncation": {"max_length": 8}/'
bad truncation 'trunc\.json' 'truncation is not supported' -- "${T[@]}" trunc.json

echo "== text and options"
bad utf8 'badutf8\.txt:3:' 'invalid UTF-8' '0xC3' -- "${T[@]}" "$FIX/tokenizer.json" --valid badutf8.txt
bad nomerges 'needs --bpe-tokenizer FILE' -- --bpe-vocab "$FIX/vocab.json"
bad both 'excludes --bpe-vocab' -- "${T[@]}" "$FIX/tokenizer.json" --bpe-vocab "$FIX/vocab.json"
bad lower 'do not apply to --mode bpe' -- "${T[@]}" "$FIX/tokenizer.json" --lower
expect_error "--bpe-vocab with --mode word" 'apply only to --mode bpe' -- \
  "$PREP" --mode word --train good.txt --valid good.txt --test good.txt --out out/w.h5 --bpe-vocab "$FIX/vocab.json"
no_leftovers "--bpe-vocab with --mode word" out w

echo "== the reader on damaged bpe corpora"
"$PREP" --mode bpe "${T[@]}" "$FIX/tokenizer.json" --train good.txt --valid good.txt --test good.txt --out c.h5 --quiet
cp c.h5 ps.h5 && "$TOOL" set-attr ps.h5 bpe_prefix_space 5
expect_error "bpe_prefix_space 5" 'ps\.h5' 'bpe_prefix_space = 5 is not 0 or 1' -- "$TOOL" info ps.h5
cp c.h5 unk.h5 && "$TOOL" set-attr unk.h5 unk_id 3
expect_error "a bpe corpus with unk_id" 'unk\.h5' 'a bpe corpus has no <unk>' -- "$TOOL" info unk.h5
if [ -n "$PY" ] && "$PY" -c "import h5py" 2> /dev/null; then
  # rewrite_merges FILE PYTHON_EXPR(m): /bpe_merges replaced (with its checksum) by the expression
  rewrite_merges() {
    cp c.h5 "$1" && "$PY" -c "
import h5py, numpy as np
with h5py.File('$1', 'r+') as f:
    m = f['bpe_merges'][:]
    new = np.asarray($2, dtype='<i4')
    del f['bpe_merges']
    f.create_dataset('bpe_merges', data=new, chunks=tuple(max(1, d) for d in new.shape), fletcher32=True)"
  }
  rewrite_merges range.h5 "np.vstack([m, [[1, 600]]])"
  expect_error "a merge id outside the vocabulary" 'range\.h5' 'merge 343 names token id 600, outside the vocabulary' -- \
    "$TOOL" check range.h5 1
  rewrite_merges swapped.h5 "np.vstack([m, [[m[0][1], m[0][0]]]])"
  expect_error "a merge that makes no token" 'swapped\.h5' 'merge 343 \(tokens [0-9]+ and [0-9]+\) gives no token' -- \
    "$TOOL" check swapped.h5 1
  rewrite_merges flat.h5 "m.reshape(-1)[:, None].repeat(2, 1)[:, :1]"
  expect_error "merges not [n, 2]" 'flat\.h5' "'/bpe_merges' is not two-dimensional \[n, 2\]" -- "$TOOL" info flat.h5
  cp c.h5 nobyte.h5 && "$PY" -c "
import h5py
with h5py.File('nobyte.h5', 'r+') as f:
    v = f['vocab'][:]
    o = f['vocab_offsets'][:]
    v[o[189]] = ord('x')  # byte 0's token (id 189) becomes a second 'x'
    data = v.copy()
    del f['vocab']
    f.create_dataset('vocab', data=data, chunks=(len(data),), fletcher32=True)"
  expect_error "a byte token changed" 'nobyte\.h5' 'repeats token|byte 0x00 is no token' -- "$TOOL" check nobyte.h5 1
else
  echo "     (rewritten /bpe_merges and /vocab: not run here, no h5py for ${PY:-python3})"
fi
finish
