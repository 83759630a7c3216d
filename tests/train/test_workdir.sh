#!/usr/bin/env bash
# The run directory belongs to one run: a fresh run refuses a work_dir holding checkpoints and
# changes nothing in it; rotation deletes only the run's own checkpoints, and another run's file
# is never overwritten; a second txl-train on a busy work_dir is refused, naming the holder, and
# the lock goes with the process (also when it is killed); --stop-at at or below the resumed step
# is refused; temporaries that killed runs left are removed at start. 1 and 2 ranks.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.log_interval=5 run.checkpoint_interval=5 run.keep_checkpoints=2 > "$WORK/r.ini"
train() { # NAME RANKS ARGS...: txl-train into $WORK/NAME, output in $WORK/NAME.out
  local name=$1 ranks=$2
  shift 2
  $MPI -n "$ranks" "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name" "$@" > "$WORK/$name.out" 2>&1
}
listing() { # DIR: every file with its checksum, but the lock (each run writes its pid there)
  (cd "$1" && for f in *; do [ "$f" = txl-train.lock ] || echo "$f $(md5sum < "$f")"; done)
}

# ---- a fresh run over another run's checkpoints -------------------------------------------------
train old 1 || { cat "$WORK/old.out"; fail "the first run failed"; }
before=$(listing "$WORK/old")
for P in 1 2; do
  expect_error_line "P=$P: a fresh run in a work_dir holding checkpoints is refused" \
    "old holds 2 checkpoints of an earlier run \(the newest ckpt-00000020.h5\), which a new run would overwrite: continue that run with --resume .*/old \(or run.resume = auto\), or give this one another run.work_dir" -- \
    $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/old"
  [ "$(listing "$WORK/old")" = "$before" ] && ok "P=$P: nothing in that work_dir changed" \
    || { diff <(echo "$before") <(listing "$WORK/old") || true; fail "P=$P: the refused run changed the work_dir"; }
done

# ---- rotation keeps another run's checkpoints ---------------------------------------------------
# Run x stops at step 4 in its own folder, then continues (--resume FILE) in old, which holds
# old's steps 15 and 20: x's checkpoints 6 to 12 are x's to rotate (the newest 2 stay), old's are
# not, whatever their steps.
train x 1 --set run.checkpoint_interval=2 --stop-at 4 || true
train old 1 --resume "$WORK/x/ckpt-00000004.h5" --set run.checkpoint_interval=2 --set train.max_step=12 \
  || { cat "$WORK/old.out"; fail "x continued in old failed"; }
after=$(listing "$WORK/old")
if grep -q "ckpt-00000015.h5 $(echo "$before" | sed -n 's/^ckpt-00000015.h5 //p')" <<< "$after" &&
   grep -q "ckpt-00000020.h5 $(echo "$before" | sed -n 's/^ckpt-00000020.h5 //p')" <<< "$after"; then
  ok "rotation left the other run's ckpt-00000015.h5 and ckpt-00000020.h5 as they were"
else
  ls -l "$WORK/old"; fail "rotation deleted or changed the other run's checkpoints"
fi
[ -e "$WORK/old/ckpt-00000010.h5" ] && [ -e "$WORK/old/ckpt-00000012.h5" ] && [ ! -e "$WORK/old/ckpt-00000008.h5" ] \
  && [ "$(cat "$WORK/old/latest")" = "ckpt-00000012.h5" ] \
  && ok "the run kept its newest 2 (steps 10, 12), deleted its step 8, latest names step 12" \
  || { ls "$WORK/old"; grep MiB "$WORK/old.out" || true; fail "rotation of the run's own checkpoints"; }

# another run's file of the same name is not overwritten: y stops at step 4 and continues where
# old holds a step-6 checkpoint of another lineage (x's)
train y 1 --set run.checkpoint_interval=2 --stop-at 4 || true
mkdir -p "$WORK/mixed" && cp "$WORK/x/ckpt-00000004.h5" "$WORK/mixed/ckpt-00000006.h5"
sum6=$(md5sum < "$WORK/mixed/ckpt-00000006.h5")
expect_error_line "another run's checkpoint of the same name is not overwritten" \
  "mixed/ckpt-00000006.h5 belongs to another run \(run_id [0-9a-f]+; this run's is [0-9a-f]+\): not overwritten" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/mixed" --set run.checkpoint_interval=2 \
  --resume "$WORK/y/ckpt-00000004.h5"
[ "$(md5sum < "$WORK/mixed/ckpt-00000006.h5")" = "$sum6" ] && ok "that file is unchanged" || fail "overwritten"

# ---- a second txl-train on a busy work_dir ------------------------------------------------------
"$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/busy" --set train.max_step=1000000 \
  --set train.log_interval=1 --set run.checkpoint_interval=0 > "$WORK/busy.out" 2>&1 &
holder=$!
for _ in $(seq 1200); do grep -q "^step" "$WORK/busy.out" 2>/dev/null && break; sleep 0.1; done
host=$(sed -n 's/^[0-9]* //p' "$WORK/busy/txl-train.lock" 2>/dev/null || true)
for P in 1 2; do
  expect_error_line "P=$P: a second txl-train on a busy work_dir is refused, naming the holder" \
    "busy is in use by another txl-train \(pid $holder on $host, holding .*busy/txl-train.lock\): wait for it to end or give this run another run.work_dir" -- \
    $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/busy" --set run.resume=auto
done
kill -USR1 $holder
rc=0; wait $holder || rc=$?
[ $rc -eq 75 ] && ok "the holder was not disturbed (stopped by SIGUSR1 with status 75)" || { tail -3 "$WORK/busy.out"; fail "holder status $rc"; }
stopped=$(sed -n 's/^stopped after step \([0-9]*\) .*/\1/p' "$WORK/busy.out")
train busy 2 --set run.resume=auto --set train.max_step=$((stopped + 2)) \
  && ok "after the holder's exit the lock is free: resumed at step $stopped on 2 ranks" || { cat "$WORK/busy.out"; fail "lock not released"; }
# killed: the kernel releases the lock with the process
"$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/killed" --set train.max_step=1000000 \
  --set train.log_interval=1 --set run.checkpoint_interval=0 > "$WORK/killed.out" 2>&1 &
holder=$!
for _ in $(seq 1200); do grep -q "^step" "$WORK/killed.out" 2>/dev/null && break; sleep 0.1; done
kill -KILL $holder; wait $holder || true
# (it logged lines and wrote no checkpoint: a fresh run would be refused, run.resume = auto starts it over)
train killed 1 --set train.max_step=3 --set run.resume=auto && ok "after kill -9 of the holder a new run starts" || { cat "$WORK/killed.out"; fail "lock of a killed run"; }

# ---- --stop-at at or below the resumed step -----------------------------------------------------
train stop 1 --stop-at 6 || true
for P in 1 2; do
  for at in 6 3; do
    expect_error_line "P=$P: --stop-at $at after resuming at step 6 is refused" \
      "^txl: error: --stop-at $at: the run resumed at step 6, so it would never stop there; give a later step" -- \
      $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/stop" --resume "$WORK/stop" --stop-at $at
  done
done
rc=0; train stop 2 --resume "$WORK/stop" --stop-at 7 || rc=$?
[ $rc -eq 75 ] && [ "$(cat "$WORK/stop/latest")" = "ckpt-00000007.h5" ] && ok "--stop-at 7 after step 6 stops at 7" \
  || { cat "$WORK/stop.out"; fail "--stop-at 7: status $rc"; }

# ---- temporaries of killed runs -----------------------------------------------------------------
train tmp 1 --stop-at 5 || true
rc=0; TXL_CKPT_FAULT=after_params train tmp 1 --resume "$WORK/tmp" || rc=$?
[ $rc -ne 0 ] && [ -e "$WORK/tmp/ckpt-00000010.h5.tmp" ] && ok "a run killed while writing left ckpt-00000010.h5.tmp" \
  || { ls "$WORK/tmp"; fail "the injected crash left no temporary (status $rc)"; }
sleep 0 & dead=$!
wait $dead
echo "ckpt-00000005.h5" > "$WORK/tmp/latest.tmp-$dead"
sleep 300 & alive=$!
echo "ckpt-00000005.h5" > "$WORK/tmp/best.tmp-$alive"
train tmp 1 --resume "$WORK/tmp" || { cat "$WORK/tmp.out"; fail "resume after the crash"; }
grep -Eq "^work_dir .*/tmp: removed 2 temporaries left by a run killed while writing: (ckpt-00000010.h5.tmp, latest.tmp-$dead|latest.tmp-$dead, ckpt-00000010.h5.tmp)$" "$WORK/tmp.out" \
  && [ ! -e "$WORK/tmp/ckpt-00000010.h5.tmp" ] && [ ! -e "$WORK/tmp/latest.tmp-$dead" ] \
  && ok "the stale temporaries were removed, with a notice" || { ls "$WORK/tmp"; grep temporar "$WORK/tmp.out" || true; fail "stale temporaries"; }
[ -e "$WORK/tmp/best.tmp-$alive" ] && ok "the temporary of a process that still runs stays" || fail "removed a live process's temporary"
kill $alive
finish
