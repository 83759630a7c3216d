#!/usr/bin/env bash
# Messages that must say what is wrong: a corpus attribute there with the wrong type is not
# "missing"; a prompt's control byte is shown as \xHH, not sent raw to the terminal; a first
# checkpoint that cannot be written does not claim a previous one is intact; a relative corpus
# path that names nothing says what it was taken relative to.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 2000 200

# vocab_size stored as a float64: there, with the wrong type
cp "$WORK/c.h5" "$WORK/vf.h5"
"$BIN/txl_test_corpus_tool" set-attr-f64 "$WORK/vf.h5" vocab_size 65
small_run_ini "$WORK/vf.h5" > "$WORK/vf.ini"
expect_error_line "vocab_size of the wrong type" "vf\.h5: not a valid txl corpus: attribute 'vocab_size' is not one integer" -- \
  "$BIN/txl-train" "$WORK/vf.ini" --check
grep -q "is missing" "$WORK/err.txt" && fail "the message still says 'missing': $(cat "$WORK/err.txt")" \
  || ok "the message does not say 'missing'"

# a prompt with a control byte (0x01: not in the vocabulary of the demo text)
small_run_ini "$WORK/c.h5" train.max_step=2 > "$WORK/r.ini"
train_into run "$WORK/r.ini" 1 || { cat "$WORK/run.out"; fail "training failed"; finish; }
expect_error_line "a control byte in the prompt" "prompt: character '\\\\x01' is not in the vocabulary of" -- \
  "$BIN/txl-generate" "$WORK/run" --prompt "$(printf 'ab\001c')" --length 4
LC_ALL=C grep -q "$(printf '\001')" "$WORK/err.txt" && fail "the control byte reached stderr raw" \
  || ok "no raw control byte on stderr"

# the run's first checkpoint cannot be written (a folder where its temporary file goes): no
# "previous one" to be intact
mkdir -p "$WORK/first/ckpt-00000002.h5.tmp/x"
expect_error_line "the first checkpoint fails" "ckpt-00000002\.h5" "checkpoint not written \(this run has written none yet\)" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/first"
grep -q "previous one is intact" "$WORK/err.txt" && fail "it claims a previous checkpoint: $(cat "$WORK/err.txt")" \
  || ok "no claim of a previous checkpoint"

# a relative data.corpus that names nothing: relative to the current directory, said so
small_run_ini "data/none.h5" > "$WORK/rel.ini"
mkdir -p "$WORK/here"
expect_error_line "a relative corpus path" "data/none\.h5: cannot open corpus file: No such file or directory \(a relative path, taken from the current directory $(re_quote "$WORK/here")\)" -- \
  bash -c "bin=\$(cd '$BIN' && pwd) && cd '$WORK/here' && exec \"\$bin/txl-train\" '$WORK/rel.ini'"
expect_error_line "--check of a relative corpus path" "data\.corpus = 'data/none\.h5' is not here; .* \(a relative path, taken from the current directory $(re_quote "$WORK/here")\)" -- \
  bash -c "bin=\$(cd '$BIN' && pwd) && cd '$WORK/here' && exec \"\$bin/txl-train\" '$WORK/rel.ini' --check"
expect_error_line "an absolute corpus path: no such remark" "$(re_quote "$WORK/none.h5"): cannot open corpus file: No such file or directory$" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set data.corpus="$WORK/none.h5"
finish
