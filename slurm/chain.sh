#!/usr/bin/env bash
# Chained jobs instead of requeueing: submits N runs of one sbatch script, each starting after the
# previous one ended however it ended (--dependency=afterany), each resuming from work_dir's latest
# checkpoint (run.resume=auto; a run that finds the training finished only evaluates). Useful where
# a site forbids requeueing or caps one job's time. From the txl checkout:
#   slurm/chain.sh 5 slurm/txl-1node.sbatch configs/wt103_base.ini --set run.work_dir=run/wt103
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 N SBATCH_SCRIPT CONFIG [--set key=value ...]" >&2; exit 2; }
n=$1 script=$2
shift 2
prev=""
for i in $(seq "$n"); do
  # TXL_REQUEUE=0: a run stopped before its time limit exits 75 instead of requeueing itself;
  # the next job of the chain continues it. --kill-on-invalid-dep: drop the chain if one is removed.
  dep=()
  [ -n "$prev" ] && dep=(--dependency="afterany:$prev" --kill-on-invalid-dep=yes)
  prev=$(sbatch --parsable --export=ALL,TXL_REQUEUE=0 "${dep[@]}" "$script" "$@")
  prev=${prev%%;*}
  echo "chain: run $i/$n is job $prev"
done
