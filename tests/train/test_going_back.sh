#!/usr/bin/env bash
# Going back never destroys the future: a copy of a finished run (best and latest at step 40)
# resumed from its step-30 checkpoint with another learning rate is refused on 1 and 2 ranks,
# naming the newer checkpoint, best and latest and both ways out, and changes nothing; branching
# off into a new work_dir works and leaves the copy as it was; run.discard_newer=true removes the
# run's checkpoints after step 30, moves best and latest to what is left (a crash before the first
# new checkpoint then resumes at step 30), cuts metrics.jsonl back to step 30, and the run goes
# on; resuming the newest checkpoint (run.resume = auto) is unchanged.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=40 train.log_interval=10 train.eval_interval=10 \
  run.checkpoint_interval=10 > "$WORK/r.ini"
listing() { # DIR: every file with its checksum, but the lock (each run writes its pid there)
  (cd "$1" && for f in *; do [ "$f" = txl-train.lock ] || echo "$f $(md5sum < "$f")"; done)
}
steps() { python3 -c '
import json, sys
print(" ".join("%s:%s" % (r["kind"], r.get("step", "-")) for r in map(json.loads, open(sys.argv[1]))))' "$1/metrics.jsonl"; }

train_into run0 "$WORK/r.ini" 1 || { cat "$WORK/run0.out"; fail "the first run failed"; finish; }
[ "$(cat "$WORK/run0/best")" = ckpt-00000040.h5 ] && [ "$(cat "$WORK/run0/latest")" = ckpt-00000040.h5 ] \
  && [ -e "$WORK/run0/ckpt-00000030.h5" ] && ok "run0: best and latest name step 40, step 30 is kept" \
  || { ls "$WORK/run0"; cat "$WORK/run0/best"; fail "run0 is not the scenario's"; finish; }
cp -r "$WORK/run0" "$WORK/rb"
before=$(listing "$WORK/rb")

# ---- the scenario: refused, nothing changes --------------------------------------------------
for P in 1 2; do
  expect_error_line "P=$P: resuming step 30 of a folder holding step 40 is refused" \
    "^txl: error: .*rb/ckpt-00000030.h5 is step 30 of a run that went on: .*rb holds 1 newer checkpoint of it \(the newest ckpt-00000040.h5; best names ckpt-00000040.h5; latest names ckpt-00000040.h5\), which continuing from step 30 would overwrite: branch off into another run.work_dir, or discard them with --set run.discard_newer=true$" -- \
    $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/rb" --resume "$WORK/rb/ckpt-00000030.h5" \
    --set train.lr=10 --set train.max_step=50
  [ "$(listing "$WORK/rb")" = "$before" ] && ok "P=$P: nothing in rb changed (ckpt-00000040.h5, best, latest, metrics.jsonl)" \
    || { diff <(echo "$before") <(listing "$WORK/rb") || true; fail "P=$P: the refused run changed rb"; }
done
expect_error_line "resuming run0's step 30 into its copy rb is refused too (the same run)" \
  "ckpt-00000030.h5 is step 30 of a run that went on" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/rb" --resume "$WORK/run0/ckpt-00000030.h5"

# ---- branching off: a new work_dir ---------------------------------------------------------------
train_into branch "$WORK/r.ini" 2 --resume "$WORK/rb/ckpt-00000030.h5" --set train.lr=10 --set train.max_step=50 \
  && grep -q "resumed from .*rb/ckpt-00000030.h5: step 30" "$WORK/branch.out" && [ -e "$WORK/branch/ckpt-00000050.h5" ] \
  && ok "branching off into a new work_dir (2 ranks) trains on from step 30" || { tail -5 "$WORK/branch.out"; fail "branch"; }
check_eq "the branch's metrics.jsonl starts at its resume" "$(steps "$WORK/branch")" \
  "unigram:- train:40 valid:40 train:50 valid:50 test:50"
[ "$(listing "$WORK/rb")" = "$before" ] && ok "rb is as it was" || fail "branching off changed rb"

# ---- discarding explicitly -----------------------------------------------------------------------
# the first checkpoint after the discard (step 31) crashes: what the discard left must resume
rc=0; TXL_CKPT_FAULT=after_params train_into rb "$WORK/r.ini" 1 --resume "$WORK/rb/ckpt-00000030.h5" \
  --set train.lr=10 --set train.max_step=50 --set run.discard_newer=true --stop-at 31 || rc=$?
grep -Eq "^resume: run.discard_newer: removed 1 checkpoint of this run after step 30 from .*rb \(the newest ckpt-00000040.h5\); latest now names ckpt-00000030.h5; best now names ckpt-00000030.h5$" "$WORK/rb.out" \
  && ok "run.discard_newer=true says what it removed and where best and latest point" || { cat "$WORK/rb.out"; fail "no discard notice"; }
[ $rc -ne 0 ] && [ ! -e "$WORK/rb/ckpt-00000040.h5" ] && [ "$(cat "$WORK/rb/best")" = ckpt-00000030.h5 ] \
  && [ "$(cat "$WORK/rb/latest")" = ckpt-00000030.h5 ] \
  && ok "step 40 is gone, best and latest name step 30 (the crash at step 31 left them so)" \
  || { ls "$WORK/rb"; fail "discard: status $rc, best $(cat "$WORK/rb/best"), latest $(cat "$WORK/rb/latest")"; }
check_eq "metrics.jsonl is cut back to step 30" "$(steps "$WORK/rb")" \
  "unigram:- train:10 valid:10 train:20 valid:20 train:30 valid:30"
[ "$(head -n 7 "$WORK/rb/metrics.jsonl")" = "$(head -n 7 "$WORK/run0/metrics.jsonl")" ] \
  && ok "the lines it kept are run0's" || fail "kept lines changed"
train_into rb "$WORK/r.ini" 1 --set run.resume=auto --set train.lr=10 --set train.max_step=50 \
  && grep -q "resumed from .*rb/ckpt-00000030.h5: step 30" "$WORK/rb.out" \
  || { tail -5 "$WORK/rb.out"; fail "the requeue after the discard"; }
[ "$(cat "$WORK/rb/latest")" = ckpt-00000050.h5 ] && [ "$(cat "$WORK/rb/best")" = ckpt-00000030.h5 ] \
  && ok "the requeue resumed at step 30 and trained to 50; best stays step 30 (lr 10 diverged)" \
  || fail "after the requeue: best $(cat "$WORK/rb/best"), latest $(cat "$WORK/rb/latest")"
check_eq "metrics.jsonl: one history" "$(steps "$WORK/rb")" \
  "unigram:- train:10 valid:10 train:20 valid:20 train:30 valid:30 train:40 valid:40 train:50 valid:50 test:50"

# ---- the newest checkpoint resumes as before -----------------------------------------------------
train_into run0 "$WORK/r.ini" 2 --set run.resume=auto --set train.max_step=50 \
  && grep -q "resumed from .*run0/ckpt-00000040.h5: step 40" "$WORK/run0.out" && [ "$(cat "$WORK/run0/latest")" = ckpt-00000050.h5 ] \
  && ok "run.resume = auto from the newest checkpoint trains on (2 ranks)" || { tail -5 "$WORK/run0.out"; fail "auto resume"; }
finish
