#!/usr/bin/env bash
# GPU binding as clusters hand it out (dist/gpu.h), on the CPU emulator of the CUDA backend
# (txl-train-emu) with the node's GPUs faked: TXL_EMU_GPUS GPUs, of which each rank sees the ones
# CUDA_VISIBLE_DEVICES lists, as SLURM's per-task binding sets it (--gpus-per-task=1 gives task i
# the variable "i" when the node's GPUs are 0..N-1). Launched by srun --mpi=pmix on a private
# one-node SLURM, and by mpirun:
#   - one GPU per task (its own): trains, each rank on the one it sees, the losses of the CPU run;
#   - every GPU visible to every task: each rank takes its node-local rank's;
#   - 3 tasks that see 2 GPUs each: refused, naming srun and its --gpus-per-task; under mpirun,
#     naming mpirun and --map-by;
#   - 2 tasks that see the same single GPU: refused (their PCI bus ids are the same);
#   - run.device=auto: cuda where every rank sees a GPU, cpu otherwise, said at start; a CPU run
#     of ranks that see GPUs warns.
# Skipped (77) without SLURM and munge, or without the emulator build.
source "$(dirname "$0")/../train/lib.sh" "$1" "$2"
[ -x "$BIN/txl-train-emu" ] || { echo "SKIPPED: no txl-train-emu (configured with TXL_CUDA_EMU=OFF)"; exit 77; }
source "$(dirname "$0")/lib.sh"
start_slurm

make_corpus "$WORK/c.h5" 2000 200
small_run_ini "$WORK/c.h5" train.max_step=4 > "$WORK/r.ini"
# what --gpus-per-task=1 does on a node of 2 GPUs: task i sees GPU i
cat > "$WORK/per_task.sh" <<'SH'
#!/usr/bin/env bash
export CUDA_VISIBLE_DEVICES=${SLURM_LOCALID:-$OMPI_COMM_WORLD_LOCAL_RANK}
exec "$@"
SH
chmod +x "$WORK/per_task.sh"
# --overcommit: 3 tasks on the 2 CPUs the private node has
SRUN=(timeout 120 srun --mpi=pmix --kill-on-bad-exit=1 -N 1 --cpus-per-task=1 --overcommit)
losses() { python3 -c '
import json, sys
print(" ".join(repr(r["loss"]) for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"))' "$1/metrics.jsonl"; }

# the reference: the same run on the CPU backend, 2 ranks
$MPI -n 2 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/cpu" > "$WORK/cpu.out" 2>&1 || fail "CPU reference run"

# one GPU per task
TXL_EMU_GPUS=2 "${SRUN[@]}" -n 2 "$WORK/per_task.sh" "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda \
  --set run.work_dir="$WORK/own" > "$WORK/own.out" 2>&1 && ok "srun, one GPU per task: trained" \
  || { tail -n 3 "$WORK/own.out"; fail "srun, one GPU per task: failed"; }
grep -q "^gpus: rank 0 sees 1 GPU: each rank uses the one GPU it sees; no two ranks of a node on one GPU" "$WORK/own.out" \
  && ok "srun, one GPU per task: the rule said at start" || fail "srun, one GPU per task: no rule line"
check_eq "srun, one GPU per task: the losses of the CPU run" "$(losses "$WORK/own")" "$(losses "$WORK/cpu")"

# every GPU to every task
TXL_EMU_GPUS=2 "${SRUN[@]}" -n 2 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/all" \
  > "$WORK/all.out" 2>&1 && grep -q "^gpus: rank 0 sees 2 GPUs: each rank uses the GPU of its node-local rank" "$WORK/all.out" \
  && ok "srun, both GPUs visible to both tasks: each takes its node-local rank's" \
  || { tail -n 3 "$WORK/all.out"; fail "srun, all GPUs visible"; }
check_eq "srun, all GPUs visible: the losses of the CPU run" "$(losses "$WORK/all")" "$(losses "$WORK/cpu")"

# refusals, one line each, naming the launcher
expect_error_line "srun, 3 tasks that see 2 GPUs each" \
  "host [^ ]+ \(srun\): 3 ranks on this node and each sees 2 GPUs, so some would share one: srun --gpus-per-task=1" -- \
  env TXL_EMU_GPUS=2 "${SRUN[@]}" -n 3 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/x"
expect_error_line "mpirun, 3 ranks that see 2 GPUs each" \
  "host [^ ]+ \(mpirun\): 3 ranks on this node and each sees 2 GPUs, so some would share one: run at most 2 ranks per node \(mpirun --map-by ppr:2:node\)" -- \
  env TXL_EMU_GPUS=2 $MPI -n 3 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/x"
expect_error_line "srun, 2 tasks that see the same single GPU" \
  "\(srun\): node-local ranks 0 and 1 would both compute on the GPU at PCI bus id 0000:11:00\.0 \(each sees 1 GPU, the same\): srun --gpus-per-task=1 \(or --gpu-bind=single:1\) gives each rank its own" -- \
  env TXL_EMU_GPUS=2 CUDA_VISIBLE_DEVICES=1 "${SRUN[@]}" -n 2 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda \
  --set run.work_dir="$WORK/x"

# run.device = auto, and the warning of a CPU run that could use GPUs
TXL_EMU_GPUS=2 "${SRUN[@]}" -n 2 "$WORK/per_task.sh" "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=auto \
  --set run.work_dir="$WORK/auto" > "$WORK/auto.out" 2>&1 \
  && grep -q "^run.device = auto: cuda (every rank sees a GPU; rank 0 sees 1)" "$WORK/auto.out" \
  && grep -q "^txl-train: 2 ranks x 1 thread on cuda:0" "$WORK/auto.out" \
  && ok "run.device = auto with a GPU per task: cuda, said at start" || { tail -n 3 "$WORK/auto.out"; fail "auto -> cuda"; }
"${SRUN[@]}" -n 2 env CUDA_VISIBLE_DEVICES= "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=auto \
  --set run.work_dir="$WORK/auto0" > "$WORK/auto0.out" 2>&1 \
  && grep -q "^run.device = auto: cpu (no GPU visible)" "$WORK/auto0.out" \
  && ok "run.device = auto without a visible GPU: cpu, said at start" || { tail -n 3 "$WORK/auto0.out"; fail "auto -> cpu"; }
TXL_EMU_GPUS=2 "${SRUN[@]}" -n 2 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.work_dir="$WORK/cpuwarn" \
  > "$WORK/cpuwarn.out" 2>&1 \
  && grep -q "^warning: rank 0 sees 2 GPUs, but run.device = cpu: this run trains on the CPU" "$WORK/cpuwarn.out" \
  && ok "run.device = cpu where the ranks see GPUs: a warning at start" || { tail -n 3 "$WORK/cpuwarn.out"; fail "no warning"; }
finish
