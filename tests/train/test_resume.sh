#!/usr/bin/env bash
# Checkpoints and resume: an interrupted-and-resumed run is the uninterrupted run, bit for bit,
# on 1 and 2 ranks; it continues on another rank count; a signal stops it cleanly; bad or
# mismatched checkpoints are refused; a crash or a full disk never leaves a broken "latest".
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v h5diff >/dev/null || { fail "h5diff not found (apt-get install hdf5-tools)"; finish; }
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.warmup_step=4 train.scheduler=cosine run.keep_checkpoints=2 > "$WORK/r.ini"
train() { # NAME RANKS ARGS...: run txl-train into $WORK/NAME, output in $WORK/NAME.out
  local name=$1 ranks=$2
  shift 2
  $MPI -n "$ranks" "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name" "$@" > "$WORK/$name.out" 2>&1
}
same_state() { # A B: parameters and both Adam moments bit-identical in two checkpoints
  h5diff -q "$1" "$2" /params /params && h5diff -q "$1" "$2" /adam_m /adam_m && h5diff -q "$1" "$2" /adam_v /adam_v
}

for P in 1 2; do
  train straight$P $P --dump-params "$WORK/straight$P.bin" || { cat "$WORK/straight$P.out"; fail "P=$P straight run"; continue; }
  rc=0; train split$P $P --stop-at 9 || rc=$?
  [ $rc -eq 75 ] && ok "P=$P: --stop-at 9 exits with status 75 after writing a checkpoint" || { cat "$WORK/split$P.out"; fail "P=$P: stop-at exit status $rc"; }
  train split$P $P --resume "$WORK/split$P" --dump-params "$WORK/split$P.bin" || { cat "$WORK/split$P.out"; fail "P=$P resume"; continue; }
  grep -q "resumed from .*ckpt-00000009.h5: step 9" "$WORK/split$P.out" && ok "P=$P: resumed at step 9" || fail "P=$P: no resume message"
  if [ "$(train_losses "$WORK/straight$P")" = "$(train_losses "$WORK/split$P")" ]; then
    ok "P=$P: losses and gradient norms of all 20 steps identical to the uninterrupted run"
  else
    diff <(train_losses "$WORK/straight$P") <(train_losses "$WORK/split$P") | head; fail "P=$P: losses differ"
  fi
  cmp -s "$WORK/straight$P.bin" "$WORK/split$P.bin" && ok "P=$P: final parameters bit-identical" || fail "P=$P: final parameters differ"
  same_state "$WORK/straight$P/ckpt-00000020.h5" "$WORK/split$P/ckpt-00000020.h5" \
    && ok "P=$P: final parameters and Adam moments bit-identical in the checkpoints" || fail "P=$P: final checkpoints differ"
done

# another rank count, same global batch: 2 -> 1 and 1 -> 4 continue the run (equivalence tolerance
# of tests/train/test_ranks.sh: losses 2e-5 relative)
train x21 2 --stop-at 9 || true
train x21 1 --resume "$WORK/x21" || fail "2 -> 1 resume failed"
train x14 1 --stop-at 9 || true
train x14 4 --resume "$WORK/x14" || fail "1 -> 4 resume failed"
for x in x21 x14; do
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/$x" "$WORK/straight1" 2e-5 --kinds train --train-steps 20 \
    && ok "$x: continues the run (losses within 2e-5 of the 1-rank run)" || fail "$x: losses differ"
done

# a signal: SIGUSR1 to a running job stops it after the step with status 75; resume finishes it
# with the same final parameters as the uninterrupted run
"$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/sig" --set train.max_step=400 \
  --dump-params "$WORK/sig.bin" > "$WORK/sig.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "^step  *3/" "$WORK/sig.out" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid; rc=0; wait $pid || rc=$?
[ $rc -eq 75 ] && ok "SIGUSR1: exit status 75" || { tail -3 "$WORK/sig.out"; fail "SIGUSR1: exit status $rc"; }
grep -q "stopped after step .* (SIGUSR1): checkpoint of step .* written" "$WORK/sig.out" && ok "SIGUSR1: checkpoint written" || fail "SIGUSR1: no checkpoint"

# refusals: one error line, non-zero exit, nothing overwritten
good=$WORK/straight1/ckpt-00000020.h5
sum_before=$(md5sum "$good" | cut -c1-32)
expect_error_line "another model shape" "made by a model of another shape; differing keys .*model.d_model 32 -> 48" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.d_model=48 --set run.work_dir="$WORK/shape" --resume "$good"
expect_error_line "another batch size" "train.batch_size 4 -> 8" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set train.batch_size=8 --set run.work_dir="$WORK/shape" --resume "$good"
head -c 20000 "$good" > "$WORK/trunc.h5"
expect_error_line "truncated checkpoint" "trunc.h5" -- "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad" --resume "$WORK/trunc.h5"
expect_error_line "missing checkpoint" "nothere.h5" -- "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad" --resume "$WORK/nothere.h5"
expect_error_line "directory without checkpoints" "no checkpoint to resume from" -- "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad" --resume "$WORK"
[ "$(md5sum "$good" | cut -c1-32)" = "$sum_before" ] && ok "the good checkpoint was not touched" || fail "good checkpoint changed"
train notice 1 --resume "$WORK/straight1" --set train.max_step=22 --set train.lr=0.002 \
  && grep -q "resume: these keys differ from the checkpoint's and take their new values: .*train.max_step 20 -> 22" "$WORK/notice.out" \
  && ok "changed training keys are allowed, with a notice" || { cat "$WORK/notice.out"; fail "notice on changed keys"; }

# a crash in the middle of writing a checkpoint: the previous one stays "latest" and resumes
train crash 1 --set run.checkpoint_interval=5 --stop-at 5 || true
rc=0; TXL_CKPT_FAULT=after_params train crash 1 --set run.checkpoint_interval=5 --resume "$WORK/crash" || rc=$?
[ $rc -ne 0 ] && ok "injected crash mid-write kills the run (status $rc)" || fail "no crash"
[ "$(cat "$WORK/crash/latest")" = "ckpt-00000005.h5" ] && [ ! -e "$WORK/crash/ckpt-00000010.h5" ] \
  && ok "after the crash latest still names step 5 and no step-10 file exists" || fail "latest moved after a crash"
train crash 1 --resume "$WORK/crash" --dump-params "$WORK/crash.bin" && cmp -s "$WORK/crash.bin" "$WORK/straight1.bin" \
  && ok "resume after the crash reproduces the uninterrupted run bit for bit" || fail "resume after crash"

# a full disk (file-size limit): an error, the previous checkpoint intact and still latest. The
# limit (8 MiB: MPI's start-up needs a few MiB of shared-memory files) is below the size of a
# checkpoint of this wider model (about 20 MiB) and above everything else the run writes.
wide=(--set model.d_model=256 --set model.n_head=4 --set model.d_head=64 --set model.d_inner=1024)
train full 1 "${wide[@]}" --set run.checkpoint_interval=5 --stop-at 5 || true
rc=0
( trap '' XFSZ; ulimit -f 8192; exec "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/full" "${wide[@]}" \
    --set run.checkpoint_interval=5 --resume "$WORK/full" ) > "$WORK/full2.out" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "checkpoint not written (the previous one is intact)" "$WORK/full2.out" \
  && ok "file-size limit: a clear error (status $rc)" || { cat "$WORK/full2.out" | tail -3; fail "file-size limit"; }
[ "$(cat "$WORK/full/latest")" = "ckpt-00000005.h5" ] && ! ls "$WORK/full" | grep -q "tmp" \
  && ok "file-size limit: latest still step 5, no temporary left" || { ls "$WORK/full"; fail "file-size limit left junk"; }
train full 1 "${wide[@]}" --resume "$WORK/full" && ok "file-size limit: resume works afterwards" || fail "resume after full disk"

# resume = auto: a fresh start in an empty work_dir, a continuation where a checkpoint is
train auto 1 --set run.resume=auto --stop-at 4 || true
grep -q "resume = auto: no checkpoint in .*auto, starting fresh" "$WORK/auto.out" && ok "resume=auto starts fresh in an empty work_dir" || fail "resume=auto fresh"
train auto 1 --set run.resume=auto --dump-params "$WORK/auto.bin" || fail "resume=auto continuation failed"
grep -q "resumed from .*auto/ckpt-00000004.h5: step 4" "$WORK/auto.out" && cmp -s "$WORK/auto.bin" "$WORK/straight1.bin" \
  && ok "resume=auto continues from work_dir's latest checkpoint, to the same final parameters" || fail "resume=auto continuation"

# keep the newest 2 plus the best
train keep 1 --set run.checkpoint_interval=2 --set train.eval_interval=5 --set train.max_step=12 || fail "keep run"
ls "$WORK/keep" | grep -c '^ckpt-.*\.h5$' > "$WORK/keep.count"
best=$(cat "$WORK/keep/best")
[ -e "$WORK/keep/$best" ] && [ -e "$WORK/keep/ckpt-00000012.h5" ] && [ -e "$WORK/keep/ckpt-00000010.h5" ] \
  && [ "$(cat "$WORK/keep.count")" -le 3 ] && ok "keeps the newest 2 and the best ($best)" || { ls "$WORK/keep"; fail "rotation"; }
finish
