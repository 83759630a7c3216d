#!/usr/bin/env bash
# Stops the way users make them, at a real size (a 160 MiB checkpoint, a step of about a second,
# tests/train/lib.sh's big_run_ini): each ends with a complete checkpoint of the last finished step
# (txl-inspect --verify), a line saying so and exit status 75, or leaves the previous checkpoint
# and `latest` intact.
#   - Ctrl-C at a terminal: SIGINT to the process group of a single txl-train;
#   - Ctrl-C twice: the second, during the checkpoint's write, aborts at once (status 130);
#   - SIGUSR1 80 ms after the start, before anything is set up;
#   - Ctrl-C to mpirun's process group (mpirun -n 2): Open MPI passes it on as SIGTERM after
#     odls_base_sigkill_timeout seconds and SIGKILLs the ranks as long after that, so the run
#     sets it (as docs/cluster.md says, for Ctrl-C); mpirun's own status is 1 (its abort);
#   - SIGUSR1 to mpirun (passed on at once): mpirun's status 75;
#   - SIGTERM to one rank only: every rank stops at the same step;
#   - and the warning txl-train prints under mpirun when the kill timeout is too short.
source "$(dirname "$0")/lib.sh" "$1" "$2"

make_corpus "$WORK/c.h5" 4000 300
big_run_ini "$WORK/c.h5" > "$WORK/big.ini"
big_run_ini "$WORK/c.h5" run.checkpoint_interval=2 > "$WORK/every2.ini"

# starts txl-train (or mpirun) as the leader of a process group of its own, as a shell starts a
# foreground job; its pid in $job
start() { # OUT COMMAND...
  local out=$1
  shift
  setsid "$@" > "$out" 2>&1 &
  job=$!
}
finish_job() { rc=0; wait "$job" || rc=$?; }

# ---- one process ----------------------------------------------------------------------------------
start "$WORK/int.out" "$BIN/txl-train" "$WORK/big.ini" --set run.work_dir="$WORK/int"
wait_line "$WORK/int.out" "^step +2/" 120 || fail "Ctrl-C: no step 2 in 120 s"
kill -INT -- -"$job"
finish_job
check_eq "Ctrl-C: exit status" "$rc" 75
grep -q "^txl: SIGINT received: stopping after this step with a checkpoint, then exit status 75 (Ctrl-C again aborts at once)$" \
  "$WORK/int.out" && ok "Ctrl-C: acknowledged at once" || fail "Ctrl-C: no acknowledgement"
check_stopped_run "Ctrl-C" "$WORK/int" "$WORK/int.out" SIGINT

# Ctrl-C, then Ctrl-C again while that checkpoint is written: the one of step 2 stays latest
start "$WORK/twice.out" "$BIN/txl-train" "$WORK/every2.ini" --set run.work_dir="$WORK/twice"
wait_line "$WORK/twice.out" "^checkpoint .*ckpt-00000002.h5" 120 || fail "twice: no checkpoint of step 2"
wait_line "$WORK/twice.out" "^step +3/" 60 || fail "twice: no step 3"
kill -INT -- -"$job"
for _ in $(seq 600); do ls "$WORK/twice"/ckpt-*.h5.tmp > /dev/null 2>&1 && break; sleep 0.05; done
tmp=$(ls "$WORK/twice"/ckpt-*.h5.tmp 2>/dev/null || true)
kill -INT -- -"$job"
finish_job
check_eq "Ctrl-C twice: the second aborts at once (killed by SIGINT)" "$rc" 130
[ -n "$tmp" ] && ok "Ctrl-C twice: the second came during the write of ${tmp##*/}" || fail "Ctrl-C twice: no write seen"
grep -q "Ctrl-C again: aborting now" "$WORK/twice.out" && ok "Ctrl-C twice: says so" || fail "Ctrl-C twice: no line"
[ "$(cat "$WORK/twice/latest")" = ckpt-00000002.h5 ] && "$BIN/txl-inspect" --verify "$WORK/twice/ckpt-00000002.h5" > /dev/null 2>&1 \
  && ok "Ctrl-C twice: latest still names ckpt-00000002.h5, which verifies" \
  || fail "Ctrl-C twice: latest '$(cat "$WORK/twice/latest")'"
"$BIN/txl-train" "$WORK/every2.ini" --set run.work_dir="$WORK/twice" --set run.resume=auto --set train.max_step=3 \
  > "$WORK/twice2.out" 2>&1 && grep -q "resumed from .*ckpt-00000002.h5: step 2" "$WORK/twice2.out" \
  && ok "Ctrl-C twice: the folder resumes from step 2 (the aborted write's temporary does not stand in the way)" \
  || { tail -n 3 "$WORK/twice2.out"; fail "Ctrl-C twice: no resume"; }

# a request before anything is set up (MPI, the corpus, the model)
start "$WORK/early.out" "$BIN/txl-train" "$WORK/big.ini" --set run.work_dir="$WORK/early"
sleep 0.08
kill -USR1 "$job"
finish_job
check_eq "SIGUSR1 80 ms after the start: exit status" "$rc" 75
grep -q "^stopped before the first step (SIGUSR1): nothing trained, nothing saved; exit status 75 (requeue)$" "$WORK/early.out" \
  && ok "SIGUSR1 80 ms after the start: kept until the loop, which stops before its first step" \
  || { tail -n 3 "$WORK/early.out"; fail "early SIGUSR1: no stop line"; }

# ---- mpirun -n 2 ------------------------------------------------------------------------------------
MPIRUN=(mpirun --oversubscribe --bind-to none -n 2)
# Ctrl-C at mpirun's terminal. 20 s: more than a step and the write at the slowest rate seen here
# (26 MiB/s); the ranks get SIGTERM 20 s after mpirun gets the Ctrl-C
OMPI_MCA_odls_base_sigkill_timeout=20 start "$WORK/mint.out" "${MPIRUN[@]}" "$BIN/txl-train" "$WORK/big.ini" \
  --set run.work_dir="$WORK/mint"
wait_line "$WORK/mint.out" "^step +2/" 120 || fail "mpirun Ctrl-C: no step 2"
kill -INT -- -"$job"
finish_job
check_eq "mpirun Ctrl-C: mpirun's status (its abort: Open MPI's own)" "$rc" 1
check_stopped_run "mpirun Ctrl-C (SIGTERM from mpirun)" "$WORK/mint" "$WORK/mint.out" SIGTERM
grep -q "warning: mpirun passes Ctrl-C" "$WORK/mint.out" && fail "mpirun: a warning although the kill timeout is 20 s" \
  || ok "mpirun with a kill timeout of 20 s: no warning"

# SIGUSR1 to mpirun, which passes it on at once; the default kill timeout: the warning
start "$WORK/musr.out" "${MPIRUN[@]}" "$BIN/txl-train" "$WORK/big.ini" --set run.work_dir="$WORK/musr"
wait_line "$WORK/musr.out" "^step +2/" 120 || fail "mpirun SIGUSR1: no step 2"
kill -USR1 "$job"
finish_job
check_eq "SIGUSR1 to mpirun: mpirun's status" "$rc" 75
check_stopped_run "SIGUSR1 to mpirun" "$WORK/musr" "$WORK/musr.out" SIGUSR1
grep -q "^warning: mpirun passes Ctrl-C and SIGTERM on to the ranks as SIGTERM and SIGKILLs them 1 s later (odls_base_sigkill_timeout), too soon .*: stop the run with kill -USR1 <mpirun pid>, which mpirun passes on at once, or export OMPI_MCA_odls_base_sigkill_timeout=60 before mpirun" \
  "$WORK/musr.out" && ok "mpirun with the default kill timeout (1 s): the warning says what to set" \
  || fail "mpirun with the default kill timeout: no warning"

# SIGTERM to one rank: the ranks agree on it after the step
start "$WORK/rank.out" "${MPIRUN[@]}" "$BIN/txl-train" "$WORK/big.ini" --set run.work_dir="$WORK/rank"
wait_line "$WORK/rank.out" "^step +2/" 120 || fail "one rank: no step 2"
rank1=$(pgrep -P "$job" -x txl-train | tail -n 1)
kill -TERM "$rank1"
finish_job
check_eq "SIGTERM to one rank: mpirun's status (the ranks')" "$rc" 75
check_stopped_run "SIGTERM to one rank" "$WORK/rank" "$WORK/rank.out" SIGTERM
finish
