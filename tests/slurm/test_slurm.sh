#!/usr/bin/env bash
# slurm/: a private one-node SLURM on localhost (its own munged, slurmctld, slurmd, all state in a
# temporary folder) runs slurm/txl-1node.sbatch on 2 CPU ranks; SIGUSR1 mid-run makes txl-train
# checkpoint and exit 75, the script requeues the job, the next run resumes and finishes with the
# parameters of an uninterrupted mpirun run, bit for bit. Skipped (77) without SLURM and munge.
source "$(dirname "$0")/../train/lib.sh" "$1" "$2"
source "$(dirname "$0")/lib.sh"
start_slurm

make_corpus "$WORK/c.h5" 4000 300
cat > "$WORK/r.ini" <<INI
[data]
corpus = $WORK/c.h5
[model]
n_layer = 3
d_model = 128
n_head = 4
d_head = 32
d_inner = 512
dropout = 0.1
dropatt = 0.1
[train]
tgt_len = 64
mem_len = 64
batch_size = 4
max_step = 200
lr = 0.003
warmup_step = 10
scheduler = cosine
log_interval = 5
eval_interval = 0
[eval]
eval_tgt_len = 64
eval_batch_size = 4
max_eval_steps = 5
[run]
checkpoint_interval = 0
keep_checkpoints = 2
threads = 1
INI

# the job: the sbatch file's GPU directive is overridden (--gpus-per-node=0: this is a CPU run)
job=$(cd "$WORK" && TXL_ROOT=$SRC TXL_BIN=$BIN TXL_LAUNCHER=mpirun sbatch --parsable \
  --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --time=10 --output="$WORK/job.out" \
  "$SRC/slurm/txl-1node.sbatch" "$WORK/r.ini" --set run.work_dir="$WORK/job" 2> "$WORK/sbatch.err") \
  || die "sbatch failed: $(cat "$WORK/sbatch.err")"
job=${job%%;*}
ok "submitted job $job"
for _ in $(seq 600); do grep -q "^step  *[1-9][0-9]/200" "$WORK/job.out" 2>/dev/null && break; sleep 0.1; done
grep -q "^step  *[1-9][0-9]/200" "$WORK/job.out" 2>/dev/null || { cat "$WORK/job.out" 2>/dev/null; die "job did not reach step 10 in 60 s"; }
scancel --signal=USR1 --batch "$job" || die "scancel --signal=USR1 --batch failed"
jstate=""
for _ in $(seq 880); do   # a requeued job waits about 3 minutes before it may start again
  jstate=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  case $jstate in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
restarts=$(scontrol show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
[ "$jstate" = COMPLETED ] && ok "job $job completed" || { cat "$WORK/job.out"; die "job state '$jstate'"; }
grep -q "txl-train exited with status 75" "$WORK/job.out" && grep -q "requeueing job $job" "$WORK/job.out" \
  && [ "${restarts:-0}" -ge 1 ] \
  && ok "SIGUSR1: checkpoint, exit status 75, job requeued (Restarts=$restarts)" \
  || { cat "$WORK/job.out"; fail "no requeue (Restarts=$restarts)"; }
stopped=$(grep -o "stopped after step [0-9]*" "$WORK/job.out" | head -1)
grep -q "resumed from .*ckpt-.*: step" "$WORK/job.out" \
  && ok "the requeued run resumed ($stopped; $(grep -o 'resumed from .*: step [0-9]*' "$WORK/job.out" | sed "s|$WORK/||"))" \
  || { cat "$WORK/job.out"; fail "no 'resumed from' in the job's output"; }
last=$(python3 -c 'import json,sys; print(max(r["step"] for r in map(json.loads, open(sys.argv[1])) if r["kind"]=="train"))' "$WORK/job/metrics.jsonl" 2>/dev/null)
[ "$last" = 200 ] && ok "metrics reach step 200" || fail "last step in metrics: '$last'"

# the same run uninterrupted, under mpirun directly; compare final parameters
timeout 300 mpirun -n 2 --oversubscribe --bind-to none "$BIN/txl-train" "$WORK/r.ini" \
  --set run.work_dir="$WORK/straight" > "$WORK/straight.out" 2>&1 || { tail "$WORK/straight.out"; fail "uninterrupted run"; }
if command -v h5diff >/dev/null; then
  h5diff -q "$WORK/straight/ckpt-00000200.h5" "$WORK/job/ckpt-00000200.h5" /params /params \
    && h5diff -q "$WORK/straight/ckpt-00000200.h5" "$WORK/job/ckpt-00000200.h5" /adam_m /adam_m \
    && h5diff -q "$WORK/straight/ckpt-00000200.h5" "$WORK/job/ckpt-00000200.h5" /adam_v /adam_v \
    && ok "final parameters and Adam moments bit-identical to the uninterrupted run" \
    || fail "final checkpoints differ from the uninterrupted run"
fi
a=$(grep -o "test at step 200 | loss [0-9.]*" "$WORK/straight.out")
b=$(grep -o "test at step 200 | loss [0-9.]*" "$WORK/job.out")
[ -n "$a" ] && [ "$a" = "$b" ] && ok "final test loss identical ($a)" || fail "test loss: '$a' vs '$b'"
finish
