#!/usr/bin/env bash
# The launch and the time-limit dance, shared by txl-1node.sbatch and txl-multinode.sbatch (which
# exec it, so it keeps the batch shell's pid and receives --signal=B:USR1@N). Arguments: the
# txl-train arguments (CONFIG [--set key=value ...]); --set run.resume=auto is added, so the
# first run starts fresh and every requeued run continues from work_dir's latest checkpoint.
#
#   1. start the ranks in the background (mpirun or srun, TXL_LAUNCHER) and wait for them;
#   2. on SIGUSR1 (SLURM's warning before the time limit, scancel --signal=USR1 --batch), SIGTERM
#      or SIGINT (scancel, scancel --signal=TERM --batch, Ctrl-C of an interactive allocation)
#      send SIGUSR1 to the launcher, which passes it on to every rank at once: txl-train finishes
#      the step, writes a checkpoint and exits with status 75. Never SIGTERM or SIGINT: mpirun
#      takes either as an abort (it passes SIGTERM on only after odls_base_sigkill_timeout seconds
#      and SIGKILLs the ranks as long after that; a second one makes it exit at once), and its own
#      status is then 1 whatever the ranks did;
#   3. wait until no txl-train of this job is left (a launcher killed by scancel leaves its ranks
#      writing: SLURM would kill them the moment this script exits);
#   4. exit status 75 after SIGUSR1: scontrol requeue $SLURM_JOB_ID, the job goes back to the
#      queue and its next run resumes. After SIGTERM or SIGINT (the job is being cancelled) exit 75
#      without a requeue. Anything else: exit with the ranks' status.
# What bounds a stop by a plain scancel is SLURM's KillWait (scontrol show config | grep KillWait):
# a step plus a checkpoint write must fit in it, else stop with scancel --signal=USR1 --batch. With
# TXL_LAUNCHER=mpirun a plain scancel loses the stop's checkpoint: SLURM signals mpirun too, which
# SIGKILLs its ranks odls_base_sigkill_timeout (1) seconds after passing SIGTERM on. Raising that
# timeout is no cure: mpirun then waits about twice as long after any rank exits non-zero, a
# stop's 75 included. Use srun (the default), or scancel --signal=USR1 --batch.
set -uo pipefail

# Site settings (environment overrides; the sbatch files set most of them)
TXL_ROOT=${TXL_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}   # the txl checkout (built with scripts/build.sh)
TXL_BIN=${TXL_BIN:-$TXL_ROOT/build/bin}           # where txl-train is
TXL_LAUNCHER=${TXL_LAUNCHER:-srun}                # srun (SLURM's, with its PMIx) | mpirun (Open MPI's)
TXL_MPIRUN_ARGS=${TXL_MPIRUN_ARGS:-}              # extra mpirun arguments (e.g. --mca btl_tcp_if_include ib0)
TXL_SRUN_MPI=${TXL_SRUN_MPI:-pmix}                # srun --mpi=: the PMI your MPI was built with
TXL_REQUEUE=${TXL_REQUEUE:-1}                     # 1: requeue on status 75; 0: just exit 75 (chained jobs)
TXL_MAX_RESTARTS=${TXL_MAX_RESTARTS:-50}          # stop requeueing after this many runs of one job

log() { echo "txl-slurm: $(date '+%F %T') job ${SLURM_JOB_ID:-?} run $((${SLURM_RESTART_COUNT:-0} + 1)): $*"; }

[ $# -ge 1 ] || { log "usage: sbatch slurm/txl-1node.sbatch CONFIG [--set key=value ...]"; exit 2; }
[ -x "$TXL_BIN/txl-train" ] || { log "no $TXL_BIN/txl-train: set TXL_ROOT or TXL_BIN"; exit 2; }
if [ "$(id -u)" -eq 0 ]; then   # Open MPI refuses root unless told (containers)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

ntasks=${SLURM_NTASKS:-1}
nnodes=${SLURM_JOB_NUM_NODES:-1}
per_node=$((ntasks / nnodes))
cpus=${SLURM_CPUS_PER_TASK:-1}
export OMP_NUM_THREADS=$cpus   # each rank's OpenMP/BLAS threads: its cores

case $TXL_LAUNCHER in
  mpirun)
    # Open MPI reads the allocation from SLURM and starts its daemons on the other nodes with
    # srun itself; --bind-to none leaves the cores of each task to its threads.
    launch=(mpirun -n "$ntasks" --map-by "ppr:$per_node:node" --bind-to none -x OMP_NUM_THREADS
            $TXL_MPIRUN_ARGS) ;;
  srun)
    # The MPI must share a PMI with SLURM (srun --mpi=list): Debian's Open MPI 4.1 and SLURM both
    # use PMIx (--mpi=pmix, tested). The default: when SLURM signals the job (scancel), its step
    # daemons keep serving the ranks until KillWait, so they finish the step, write the
    # checkpoint, print their last lines and exit 75; mpirun, signalled too, aborts (see above).
    # --cpus-per-task is passed again: srun of SLURM 22.11+ does not inherit it from sbatch.
    launch=(srun --mpi="$TXL_SRUN_MPI" --kill-on-bad-exit=1 --ntasks="$ntasks"
            --ntasks-per-node="$per_node" --cpus-per-task="$cpus") ;;
  *) log "TXL_LAUNCHER must be mpirun or srun, not '$TXL_LAUNCHER'"; exit 2 ;;
esac

pid=""
got_usr1=0
got_term=0
interrupted=0
forward() { # SIGNAL: a stop request; the launcher passes SIGUSR1 on to every rank at once
  interrupted=1
  log "SIG$1 received, sending SIGUSR1 to the ranks (they finish the step, write a checkpoint and exit 75)"
  [ -n "$pid" ] && kill -s USR1 "$pid" 2>/dev/null
}
trap 'got_usr1=1; forward USR1' USR1
trap 'got_term=1; forward TERM' TERM
trap 'got_term=1; forward INT' INT
# the txl-train processes of this job still running on this node (their parent, the launcher, may
# be gone): those whose environment holds this job's id (and SLURM_CONF: two private clusters of
# the tests both have a job 1)
ranks_left() {
  [ -n "${SLURM_JOB_ID:-}" ] || return 1
  local p want=(-e "SLURM_JOB_ID=$SLURM_JOB_ID")
  [ -n "${SLURM_CONF:-}" ] && want+=(-e "SLURM_CONF=$SLURM_CONF")
  for p in $(pgrep -x txl-train); do
    [ "$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -cx "${want[@]}")" -eq $((${#want[@]} / 2)) ] && return 0
  done
  return 1
}

# GPUs allocated: train on them (run.device=auto, right after the config: a --set of the
# command line still wins); txl-train says at start what auto chose
device=()
if [ "${SLURM_GPUS_ON_NODE:-0}" -gt 0 ] 2>/dev/null || [ -n "${SLURM_JOB_GPUS:-}" ]; then
  device=(--set run.device=auto)
  log "GPUs allocated (${SLURM_GPUS_ON_NODE:-?} on this node): run.device=auto"
fi

log "$ntasks ranks on $nnodes node(s) (${SLURM_JOB_NODELIST:-?}), $cpus cores each, launcher $TXL_LAUNCHER"
"${launch[@]}" "$TXL_BIN/txl-train" "$1" "${device[@]}" "${@:2}" --set run.resume=auto &
pid=$!
# wait returns early (status > 128) when a trapped signal arrives: wait again until the launcher ends
while :; do
  interrupted=0
  wait "$pid"
  rc=$?
  [ "$interrupted" -eq 1 ] || break
  kill -0 "$pid" 2>/dev/null && continue        # still running (or not yet reaped): wait again
  wait "$pid" 2>/dev/null; r=$?                 # ended meanwhile: its status, if bash kept it
  [ "$r" -ne 127 ] && rc=$r
  break
done
if ranks_left; then
  log "the launcher ended (status $rc) before every txl-train did: waiting for them to finish writing"
  while ranks_left; do sleep 0.2; done
fi
log "txl-train exited with status $rc"

if [ "$rc" -eq 75 ] && [ "$got_usr1" -eq 1 ] && [ "$got_term" -eq 0 ] && [ "$TXL_REQUEUE" = 1 ] \
   && [ -n "${SLURM_JOB_ID:-}" ]; then
  if [ "${SLURM_RESTART_COUNT:-0}" -ge "$TXL_MAX_RESTARTS" ]; then
    log "already restarted $TXL_MAX_RESTARTS times (TXL_MAX_RESTARTS), not requeueing"
    exit 75
  fi
  log "checkpoint written; requeueing job $SLURM_JOB_ID, the next run resumes from it"
  scontrol requeue "$SLURM_JOB_ID" && exit 0
  log "scontrol requeue failed; resubmit the same command, it resumes (run.resume=auto)"
fi
exit "$rc"
