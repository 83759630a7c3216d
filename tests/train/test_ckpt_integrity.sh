#!/usr/bin/env bash
# What a checkpoint must prove before it is used, by txl-train (--resume, run.resume = auto),
# txl-eval and txl-generate:
#  - its vocabulary is the corpus's, not only of the same size (the stored vocab_digest against
#    the corpus's); a version 1 file (no digest) is used with a one-line notice;
#  - its values: NaN or an infinity in a tensor, a negative Adam second moment, are one error
#    line naming the file and the dataset (txl-inspect --verify too);
#  - a run folder whose `latest` is missing, empty, names a missing file or a file that does not
#    open falls back to the newest ckpt-<step>.h5 that opens, with a one-line notice; a folder
#    with none is one error line.
# Every error is one "txl: error:" line and a non-zero exit, on 1 and 2 ranks.
source "$(dirname "$0")/lib.sh" "$1" "$2"
CKPT_TOOL=$BIN/test_ckpt # the checkpoint test driver: poke, set-attr
make_corpus "$WORK/c.h5" 4000 300
# another corpus with a vocabulary of the same size: every 'q' of the text is an 'X' (which the
# text does not hold), so one id means another character
d=$SRC/data/demo/tinyshakespeare
for s in train:4000 valid:300 test:300; do head -n "${s#*:}" "$d/${s%:*}.txt" | tr q X > "$WORK/x_${s%:*}.txt"; done
"$BIN/txl-prep" --mode char --quiet --train "$WORK/x_train.txt" --valid "$WORK/x_valid.txt" \
  --test "$WORK/x_test.txt" --out "$WORK/x.h5"
small_run_ini "$WORK/c.h5" train.max_step=6 train.log_interval=3 eval.max_eval_steps=2 run.checkpoint_interval=3 \
  run.keep_checkpoints=3 > "$WORK/r.ini"
$MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/run" > "$WORK/train.out" 2>&1 \
  || { cat "$WORK/train.out"; fail "training failed"; finish; }
[ -e "$WORK/run/ckpt-00000003.h5" ] && [ "$(cat "$WORK/run/latest")" = "ckpt-00000006.h5" ] \
  && ok "the run wrote ckpt-00000003.h5 and ckpt-00000006.h5 (latest)" || { ls "$WORK/run"; fail "checkpoints of the run"; finish; }
good=$WORK/run/ckpt-00000006.h5
vocab() { "$BIN/txl-inspect" "$1" | sed -n 's/^vocab digest *//p'; }

train() { # RANKS ARGS...: txl-train from r.ini
  local ranks=$1
  shift
  $MPI -n "$ranks" "$BIN/txl-train" "$WORK/r.ini" "$@"
}
# ok_with_notice NAME STREAM PATTERN CMD...: CMD exits 0 and prints exactly one line matching
# PATTERN to STREAM (out or err), none to the other
ok_with_notice() {
  local name=$1 stream=$2 pattern=$3 other=err
  shift 3
  [ "$stream" = err ] && other=out
  local rc=0
  "$@" > "$WORK/n.out" 2> "$WORK/n.err" || rc=$?
  local here there
  here=$(grep -Ec -- "$pattern" "$WORK/n.$stream" || true)
  there=$(grep -Ec -- "$pattern" "$WORK/n.$other" || true)
  if [ "$rc" -ne 0 ]; then
    fail "$name: exit status $rc: $(tail -3 "$WORK/n.err")"
  elif [ "$here" -ne 1 ] || [ "$there" -ne 0 ]; then
    fail "$name: expected one line /$pattern/ on std$stream, got $here (and $there on std$other): $(grep -v '^step' "$WORK/n.$stream" | head -5)"
  else
    ok "$name ($(grep -E -- "$pattern" "$WORK/n.$stream"))"
  fi
}

echo "== the vocabulary: same size, other tokens"
c_digest=$(vocab "$good")
n_c=$(sed -n 's/.*vocabulary \([0-9]*\),.*/\1/p' "$WORK/train.out" | head -1)
# (a vocabulary of another size would be refused as another model shape, and fail the patterns)
[ -n "$c_digest" ] && [ "$c_digest" != "(empty)" ] && ok "the checkpoint stores a vocabulary digest ($c_digest)" || fail "no digest in $good"
for P in 1 2; do
  expect_error_line "P=$P: resume on a corpus of another vocabulary of $n_c tokens" \
    "ckpt-00000006\.h5 was trained on another vocabulary than that of the corpus .*x\.h5" -- \
    train "$P" --set data.corpus="$WORK/x.h5" --set run.work_dir="$WORK/wx$P" --resume "$WORK/run"
done
expect_error_line "txl-eval on a corpus of another vocabulary" "ckpt-00000006\.h5 was trained on another vocabulary than that of the corpus .*x\.h5" -- \
  "$BIN/txl-eval" "$WORK/run" --corpus "$WORK/x.h5"
expect_error_line "txl-generate on a corpus of another vocabulary" "ckpt-00000006\.h5 was trained on another vocabulary than that of the corpus .*x\.h5" -- \
  "$BIN/txl-generate" "$WORK/run" --corpus "$WORK/x.h5" --length 5
# a version 1 file has no digest: used, with a notice that only the size could be checked
cp "$good" "$WORK/v1.h5" && "$CKPT_TOOL" set-attr "$WORK/v1.h5" format_version 1
v1_notice=".*/v1\.h5 is a version 1 checkpoint without a vocabulary digest: only the vocabulary size could be checked against .*c\.h5"
ok_with_notice "resume from a version 1 checkpoint" out "^resume: $v1_notice" \
  train 1 --set run.work_dir="$WORK/wv1" --resume "$WORK/v1.h5"
ok_with_notice "txl-eval of a version 1 checkpoint" out "^checkpoint: $v1_notice" "$BIN/txl-eval" "$WORK/v1.h5"
ok_with_notice "txl-generate of a version 1 checkpoint (the notice on stderr: stdout is the text)" err \
  "^checkpoint: $v1_notice" "$BIN/txl-generate" "$WORK/v1.h5" --length 5
"$BIN/txl-eval" "$WORK/run" > "$WORK/e.out" 2>&1 && ! grep -q "^checkpoint:" "$WORK/e.out" \
  && ok "txl-eval on its own corpus: no notice" || fail "txl-eval on its own corpus: $(tail -2 "$WORK/e.out")"

echo "== values no checkpoint may hold (written with a matching checksum)"
# mem_rows is 24 (6 steps of 16 rows, mem_len 24): every row of /mems is valid
poke() { # NAME DATASET INDEX VALUE: a copy of the good checkpoint with one value changed
  cp "$good" "$WORK/$1.h5" && "$CKPT_TOOL" poke "$WORK/$1.h5" "$2" "$3" "$4"
}
poke p_nan /params/word_emb 40 nan
for P in 1 2; do
  expect_error_line "P=$P: resume from NaN in a parameter" "p_nan\.h5: dataset '/params/word_emb' holds NaN at element 40: the checkpoint is unusable" -- \
    train "$P" --set run.work_dir="$WORK/wn$P" --resume "$WORK/p_nan.h5"
done
expect_error_line "txl-eval of NaN in a parameter" "p_nan\.h5: dataset '/params/word_emb' holds NaN" -- "$BIN/txl-eval" "$WORK/p_nan.h5"
expect_error_line "txl-generate of NaN in a parameter" "p_nan\.h5: dataset '/params/word_emb' holds NaN" -- "$BIN/txl-generate" "$WORK/p_nan.h5" --length 5
expect_error_line "txl-inspect --verify of NaN in a parameter" "p_nan\.h5: dataset '/params/word_emb' holds NaN" -- "$BIN/txl-inspect" --verify "$WORK/p_nan.h5"
poke p_inf /params/layers.1.w_ff2 3 -inf
expect_error_line "txl-eval of -Inf in a parameter" "p_inf\.h5: dataset '/params/layers\.1\.w_ff2' holds -Inf at element 3" -- "$BIN/txl-eval" "$WORK/p_inf.h5"
expect_error_line "txl-generate of -Inf in a parameter" "p_inf\.h5: dataset '/params/layers\.1\.w_ff2' holds -Inf" -- "$BIN/txl-generate" "$WORK/p_inf.h5" --length 5
poke v_inf /adam_v/layers.0.w_qkv 100 inf
poke v_neg /adam_v/out_bias 2 -0.5
poke m_nan /adam_m/r_w_bias 1 nan
poke mem_nan /mems 5 nan
for P in 1 2; do
  expect_error_line "P=$P: resume from +Inf in adam_v" "v_inf\.h5: dataset '/adam_v/layers\.0\.w_qkv' holds \+Inf at element 100" -- \
    train "$P" --set run.work_dir="$WORK/wvi$P" --resume "$WORK/v_inf.h5"
  expect_error_line "P=$P: resume from a negative second moment" "v_neg\.h5: dataset '/adam_v/out_bias' holds -0\.5 at element 2, a negative second moment" -- \
    train "$P" --set run.work_dir="$WORK/wvn$P" --resume "$WORK/v_neg.h5"
  expect_error_line "P=$P: resume from NaN in adam_m" "m_nan\.h5: dataset '/adam_m/r_w_bias' holds NaN" -- \
    train "$P" --set run.work_dir="$WORK/wmn$P" --resume "$WORK/m_nan.h5"
  expect_error_line "P=$P: resume from NaN in the memory" "mem_nan\.h5: dataset '/mems' holds NaN at element 5" -- \
    train "$P" --set run.work_dir="$WORK/wmem$P" --resume "$WORK/mem_nan.h5"
done
expect_error_line "txl-inspect --verify of +Inf in adam_v" "v_inf\.h5: dataset '/adam_v/layers\.0\.w_qkv' holds \+Inf" -- "$BIN/txl-inspect" --verify "$WORK/v_inf.h5"
# txl-eval and txl-generate read only the parameters: the moments do not matter to them
"$BIN/txl-eval" "$WORK/v_inf.h5" > "$WORK/e.out" 2>&1 && ok "txl-eval does not read adam_v" || fail "txl-eval of v_inf.h5: $(tail -1 "$WORK/e.out")"

echo "== a damaged 'latest': the newest checkpoint that opens"
# copy DIR: a copy of the run folder
copy() { rm -rf "$WORK/$1" && cp -r "$WORK/run" "$WORK/$1"; }
truncate_half() { head -c $(($(stat -c %s "$1") / 2)) "$1" > "$1.part" && mv "$1.part" "$1"; }
copy trunc && truncate_half "$WORK/trunc/ckpt-00000006.h5"
fallback="'latest' names .*trunc/ckpt-00000006\.h5, which cannot be used \(the checkpoint is truncated: .*\); using .*trunc/ckpt-00000003\.h5, the newest checkpoint there that opens"
for P in 1 2; do
  ok_with_notice "P=$P: --resume DIR whose latest file is truncated" out "^resume: .*trunc: $fallback" \
    train "$P" --set run.work_dir="$WORK/wt$P" --resume "$WORK/trunc"
  grep -q "resumed from .*trunc/ckpt-00000003.h5: step 3" "$WORK/n.out" && ok "P=$P: resumed from step 3" || fail "P=$P: did not resume from step 3"
done
ok_with_notice "txl-eval of a folder whose latest file is truncated" out "^checkpoint: .*trunc: $fallback" "$BIN/txl-eval" "$WORK/trunc"
ok_with_notice "txl-generate of a folder whose latest file is truncated" err "^checkpoint: .*trunc: $fallback" \
  "$BIN/txl-generate" "$WORK/trunc" --length 5
copy auto && truncate_half "$WORK/auto/ckpt-00000006.h5"
ok_with_notice "run.resume = auto whose latest file is truncated" out "^resume: .*auto: 'latest' names .*auto/ckpt-00000006\.h5, which cannot be used .*; using .*auto/ckpt-00000003\.h5" \
  train 2 --set run.work_dir="$WORK/auto" --set run.resume=auto
grep -q "resumed from .*auto/ckpt-00000003.h5: step 3" "$WORK/n.out" && ok "auto: resumed from step 3" || fail "auto: did not resume from step 3"
copy nowhere && echo "ckpt-00000099.h5" > "$WORK/nowhere/latest"
ok_with_notice "--resume DIR whose latest names a missing file" out \
  "^resume: .*nowhere: 'latest' names .*nowhere/ckpt-00000099\.h5, which does not exist; using .*nowhere/ckpt-00000006\.h5" \
  train 2 --set run.work_dir="$WORK/wnw" --resume "$WORK/nowhere"
copy nolatest && rm "$WORK/nolatest/latest"
ok_with_notice "txl-eval of a folder without latest" out \
  "^checkpoint: .*nolatest: there is no 'latest' pointer; using .*nolatest/ckpt-00000006\.h5" "$BIN/txl-eval" "$WORK/nolatest"
copy emptylatest && : > "$WORK/emptylatest/latest"
ok_with_notice "--resume DIR whose latest is empty" out \
  "^resume: .*emptylatest: 'latest' is empty; using .*emptylatest/ckpt-00000006\.h5" \
  train 1 --set run.work_dir="$WORK/wel" --resume "$WORK/emptylatest"
# nothing usable at all: one error line
copy none && truncate_half "$WORK/none/ckpt-00000006.h5" && truncate_half "$WORK/none/ckpt-00000003.h5"
for P in 1 2; do
  expect_error_line "P=$P: --resume DIR without a checkpoint that opens" \
    "none: no usable checkpoint: 'latest' names .*ckpt-00000006\.h5, which cannot be used \(the checkpoint is truncated.*\); 1 more cannot be used either" -- \
    train "$P" --set run.work_dir="$WORK/wno$P" --resume "$WORK/none"
done
expect_error_line "txl-eval of a folder without a checkpoint that opens" "none: no usable checkpoint" -- "$BIN/txl-eval" "$WORK/none"
expect_error_line "run.resume = auto without a checkpoint that opens" "none: no usable checkpoint" -- \
  train 1 --set run.work_dir="$WORK/none" --set run.resume=auto
mkdir -p "$WORK/empty"
expect_error_line "--resume DIR of an empty folder" "empty: no checkpoint to resume from \(there is no 'latest' pointer, and no ckpt-<step>\.h5 file\)" -- \
  train 1 --set run.work_dir="$WORK/wem" --resume "$WORK/empty"
finish
