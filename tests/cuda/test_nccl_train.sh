#!/usr/bin/env bash
# Several ranks of run.device = cuda through the real NCCL path (dist/nccl.c, the bucketed
# reducer's device transport, the embedding rows' all-gather) on the emulator's CUDA and NCCL
# (kernels/emu): txl-train-emu on 2 and 3 ranks, with uneven shards (5 columns), trains as the
# CPU backend does on the same rank count, repeats itself bit for bit, and its benchmark says
# the all-reduce went through NCCL. Usage: test_nccl_train.sh BIN_DIR SOURCE_DIR
source "$2/tests/train/lib.sh" "$1" "$2"
command -v mpirun > /dev/null || { echo "SKIPPED: mpirun not found"; exit 77; }
[ -x "$BIN/txl-train-emu" ] || { echo "SKIPPED: no txl-train-emu in this build"; exit 77; }
export TXL_EMU_GPUS=4 # an emulated node with a GPU for each rank

make_corpus "$WORK/c.h5" 3000 300
small_run_ini "$WORK/c.h5" train.batch_size=5 train.max_step=12 run.threads=1 > "$WORK/r.ini"

emu() { # NAME RANKS ARGS...: txl-train-emu, run.device = cuda
  local name=$1 p=$2
  shift 2
  $MPI -n "$p" "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/$name" "$@" \
    > "$WORK/$name.out" 2>&1
}

for p in 2 3; do
  train_into cpu$p "$WORK/r.ini" "$p" --set run.device=cpu || { cat "$WORK/cpu$p.out"; fail "$p ranks: the CPU run failed"; continue; }
  emu gpu$p "$p" || { cat "$WORK/gpu$p.out"; fail "$p ranks: the emulated CUDA run failed"; continue; }
  # the tolerance of tests/cuda/test_train.sh's GPU = CPU comparison (3e-3 relative per loss over
  # 30 Adam steps, derived there; these are 12, and the all-reduce sums the same shards' gradients)
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/gpu$p" "$WORK/cpu$p" 3e-3 --kinds train,valid,test --train-steps 12 \
    && ok "$p ranks, 5 columns: the emulated GPUs through NCCL train as the CPU (losses within 3e-3)" \
    || fail "$p ranks: the emulated NCCL run's losses differ from the CPU's"
done

# the same run again: the same numbers, bit for bit (the emulated collectives sum in a fixed order)
emu gpu3b 3 || { cat "$WORK/gpu3b.out"; fail "3 ranks: the repeat failed"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/gpu3b" "$WORK/gpu3" 0 --kinds train,valid,test --train-steps 12 \
  && ok "3 ranks: a repeat logs the same losses bit for bit" || fail "3 ranks: a repeat differs"

# the benchmark names the path the gradients took
out=$($MPI -n 2 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/bench" \
  --bench 2 --bench-warmup 1 2>&1) || { printf '%s\n' "$out"; fail "2 ranks: --bench failed"; }
printf '%s\n' "$out" | grep -q "gradient all-reduce of .* through NCCL on its own stream" \
  && ok "2 ranks: --bench reports the all-reduce through NCCL" \
  || { printf '%s\n' "$out" | grep -i "all-reduce"; fail "2 ranks: --bench does not report NCCL"; }
finish
