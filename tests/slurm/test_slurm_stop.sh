#!/usr/bin/env bash
# slurm/: stops of a real-size job (tests/train/lib.sh's big_run_ini: a 160 MiB checkpoint, a
# step of about a second) on a private one-node SLURM, through the sbatch script and its default
# launcher, srun --mpi=pmix:
#   - scancel (SLURM signals every process of the job, then SIGKILLs them KillWait = 60 s later);
#   - scancel --signal=TERM --batch (SIGTERM to the batch script alone, which passes the stop on);
# each ends with a complete checkpoint of the last finished step written by both ranks
# (txl-inspect --verify), the ranks' line, and exit status 75 (not requeued: the job was cancelled
# or told to stop). A resubmitted job resumes it. Skipped (77) without SLURM and munge.
source "$(dirname "$0")/../train/lib.sh" "$1" "$2"
source "$(dirname "$0")/lib.sh"
start_slurm KillWait=60

make_corpus "$WORK/c.h5" 4000 300
big_run_ini "$WORK/c.h5" > "$WORK/big.ini"

submit() { # NAME: the job's id in $job; its output in $WORK/NAME.out, its run folder $WORK/NAME
  job=$(cd "$WORK" && TXL_ROOT=$SRC TXL_BIN=$BIN sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 \
    --gpus-per-node=0 --time=10 --output="$WORK/$1.out" "$SRC/slurm/txl-1node.sbatch" "$WORK/big.ini" \
    --set run.work_dir="$WORK/$1" 2> "$WORK/sbatch.err") || die "sbatch failed: $(cat "$WORK/sbatch.err")"
  job=${job%%;*}
}
exit_code() { scontrol show job "$1" | grep -o 'ExitCode=[0-9:]*' | cut -d= -f2; }

# ---- scancel ----------------------------------------------------------------------------------------
submit cancel
wait_line "$WORK/cancel.out" "^step +2/" 180 || { cat "$WORK/cancel.out"; die "job $job: no step 2"; }
grep -q "launcher srun" "$WORK/cancel.out" && ok "the sbatch script's default launcher is srun" \
  || fail "launcher: $(grep -o 'launcher [a-z]*' "$WORK/cancel.out")"
t0=$(date +%s)
scancel "$job"
state=$(wait_job_end "$job" 120)
check_eq "scancel: job state" "$state" CANCELLED
for _ in $(seq 100); do [ -n "$(exit_code "$job")" ] && break; sleep 0.2; done
check_eq "scancel: the job's exit code (the batch script's)" "$(exit_code "$job")" 75:0
secs=$(( $(date +%s) - t0 ))
[ "$secs" -lt 60 ] && ok "scancel: done in $secs s, before SLURM's KillWait (60 s)" || fail "scancel: took $secs s (KillWait reached?)"
# scancel signals the ranks and the batch script at once; the script passes SIGUSR1 on, so a rank
# names whichever of the two reached it first (both stop it the same way)
check_stopped_run "scancel" "$WORK/cancel" "$WORK/cancel.out" 'SIGTERM|SIGUSR1'
grep -q "txl-train exited with status 75" "$WORK/cancel.out" && ! grep -q "requeueing job" "$WORK/cancel.out" \
  && ok "scancel: the ranks exited 75, the job was not requeued" || fail "scancel: $(grep 'txl-slurm' "$WORK/cancel.out" | tail -n 2)"

# ---- SIGTERM to the batch script alone ------------------------------------------------------------------
submit term
wait_line "$WORK/term.out" "^step +2/" 180 || { cat "$WORK/term.out"; die "job $job: no step 2"; }
scancel --signal=TERM --batch "$job"
state=$(wait_job_end "$job" 120)
check_eq "SIGTERM to the batch script: job state (status 75, not requeued)" "$state" FAILED
check_eq "SIGTERM to the batch script: the job's exit code" "$(exit_code "$job")" 75:0
check_stopped_run "SIGTERM to the batch script" "$WORK/term" "$WORK/term.out" SIGUSR1
grep -q "SIGTERM received, sending SIGUSR1 to the ranks" "$WORK/term.out" \
  && ok "SIGTERM to the batch script: passed on as SIGUSR1 (srun and mpirun abort on SIGTERM)" || fail "no forwarding line"

# a job submitted again continues the cancelled one
last=$(sed -n 's/^stopped after step \([0-9]*\) .*/\1/p' "$WORK/cancel.out")
job=$(cd "$WORK" && TXL_ROOT=$SRC TXL_BIN=$BIN sbatch --parsable --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
  --time=10 --output="$WORK/again.out" "$SRC/slurm/txl-1node.sbatch" "$WORK/big.ini" --set run.work_dir="$WORK/cancel" \
  --set train.max_step=$((last + 1)) --set eval.max_eval_steps=1)
job=${job%%;*}
state=$(wait_job_end "$job" 240)
check_eq "resubmitted: job state" "$state" COMPLETED
grep -q "resumed from .*ckpt-$(printf %08d "$last").h5: step $last" "$WORK/again.out" \
  && ok "resubmitted: resumed from the scancel's checkpoint (step $last) and finished step $((last + 1))" \
  || { tail -n 5 "$WORK/again.out"; fail "resubmitted: no resume"; }
finish
