#!/usr/bin/env bash
# dist.timeout_s: a collective that some rank does not reach ends the job with one line naming
# that rank and a non-zero exit, in bounded time, instead of leaving the others spinning for ever.
# The deadline logic on its own (test_timeout), then txl-train with one rank stopped (SIGSTOP)
# mid-training, and a run whose ranks wait for one another legitimately (rank 0's sample at the
# end) for longer than the deadline. Every mpirun runs under `timeout`, so a hang is a failure.
# With a third argument `nccl`: the stopped-rank cases only, with run.device = cuda on the
# emulator's CUDA and NCCL (txl-train-emu): the healthy ranks then wait for their GPUs, whose
# collectives wait for the stopped rank (dist/wait.h: txl_dist_wait_device).
# Usage: test_timeout.sh BIN_DIR SOURCE_DIR [nccl]
source "$2/tests/train/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
MODE=${3:-mpi}
TRAIN=txl-train
DEVICE=()
if [ "$MODE" = nccl ]; then
  [ -x "$BIN/txl-train-emu" ] || { echo "SKIPPED: no txl-train-emu in this build"; exit 77; }
  export TXL_EMU_GPUS=4 # an emulated node with a GPU for each rank
  TRAIN=txl-train-emu
  # a progress line every step: its read of the losses makes the host wait for the GPU after
  # each step's all-reduce, before the step's end's MPI collective
  DEVICE=(--set run.device=cuda --set train.log_interval=1)
fi
RUN="mpirun --oversubscribe --bind-to none"
LIMIT=60 # seconds before `timeout` ends a job that hangs
PIDS=$WORK/pids

# Each rank of the txl-train jobs records its process id (then execs txl-train), so that the
# test can stop one, and end the ranks that outlived their job (none should).
end_ranks() {
  local f p
  for f in "$PIDS"/pid.*; do
    [ -e "$f" ] || continue
    p=$(cat "$f")
    if grep -qs txl-train "/proc/$p/cmdline"; then kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; fi
  done
  rm -rf "$PIDS"
}
trap 'end_ranks; rm -rf "$WORK"' EXIT

# elapsed_since T0: whole seconds since T0 (date +%s.%N), rounded up
elapsed_since() { python3 -c "import math, sys, time; print(math.ceil(time.time() - float(sys.argv[1])))" "$1"; }

# ---- the deadline logic: test_timeout (see tests/dist/test_timeout.c) ------------------------
if [ "$MODE" = mpi ]; then

# unit_error NAME P PATTERN ARGS...: fails within 1 s (the deadline) + 9 s, one matching line
unit_error() {
  local name=$1 np=$2 pattern=$3
  shift 3
  local t0
  t0=$(date +%s.%N)
  expect_error_line "$name" "$pattern" -- timeout $LIMIT $RUN -n "$np" "$BIN/test_timeout" "$@"
  local s
  s=$(elapsed_since "$t0")
  [ "$s" -le 10 ] && ok "$name: ended after ${s} s" || fail "$name: ended after ${s} s (10 at most)"
}

for kind in sum max equal barrier reducer agree; do
  unit_error "2 ranks, rank 1 never reaches the $kind" 2 \
    "^txl: error: \[rank 0@[^]]*\] rank 1 did not reach collective #2 \(.*\) within dist.timeout_s = 1 s" \
    absent 1 "$kind"
done
unit_error "3 ranks, rank 0 never reaches the sum" 3 \
  "^txl: error: \[rank 1@[^]]*\] rank 0 did not reach collective #2 \(a sum across ranks\) within dist.timeout_s = 1 s" \
  absent 0 sum
unit_error "3 ranks, rank 1 never reaches the reducer" 3 \
  "^txl: error: \[rank 0@[^]]*\] rank 1 did not reach collective #2 \(the gradient all-reduce\)" \
  absent 1 reducer
unit_error "2 ranks, rank 1 never reaches the collective rank 0's GPU waits for" 2 \
  "^txl: error: \[rank 0@[^]]*\] rank 1 did not answer within dist.timeout_s = 1 s while rank 0 waited for its GPU \(a read to the host, after collective #1\), whose NCCL collectives need every rank" \
  absent 1 device
unit_error "3 ranks, rank 2 waits for its GPU" 3 \
  "^txl: error: \[rank 0@[^]]*\] rank 2 is waiting for its GPU \(work that never completes, after collective #1\) instead of collective #2 \(a sum across ranks\)$" \
  elsewhere 2 device
unit_error "3 ranks, rank 2 waits in another collective" 3 \
  "^txl: error: \[rank 0@[^]]*\] rank 2 is waiting in collective #3 \(a receive nobody sends\) instead of collective #2 \(a sum across ranks\)$" \
  elsewhere 2
expect_error_line "a failure on rank 1 under a deadline: its line only" "^txl: error: \[rank 1@[^]]*\] rank 1 failed on purpose$" -- \
  timeout $LIMIT $RUN -n 3 "$BIN/test_timeout" fails 1
for mode in late suspended idle; do
  if timeout $LIMIT $RUN -n 2 "$BIN/test_timeout" "$mode" > "$WORK/$mode.txt" 2>&1; then
    ok "2 ranks, $mode $(grep -v PASS "$WORK/$mode.txt" | head -n 1)"
  else
    cat "$WORK/$mode.txt"; fail "2 ranks, $mode"
  fi
done
fi

# ---- txl-train with a stopped rank ----------------------------------------------------------

make_corpus "$WORK/c.h5" 4000 300
{ small_model_ini "$WORK/c.h5"; cat <<INI; } > "$WORK/long.ini"
[train]
tgt_len = 16
mem_len = 16
batch_size = 6
max_step = 1000000
log_interval = 10
eval_interval = 0
[eval]
eval_batch_size = 6
[run]
threads = 1
checkpoint_interval = 0
INI

# stopped P RANK: P ranks train with dist.timeout_s = 3; RANK is stopped after step 20. The job
# must end within 3 + 10 s with one line naming RANK and a non-zero status, and leave no rank.
stopped() {
  local np=$1 victim=$2
  local name="$np ranks, rank $victim stopped mid-training" out=$WORK/stop-$1-$2
  mkdir -p "$PIDS"
  ( rc=0
    timeout $LIMIT $RUN -n "$np" sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec "$@"' "$PIDS" \
      "$BIN/$TRAIN" "$WORK/long.ini" "${DEVICE[@]}" --set run.work_dir="$out" --set dist.timeout_s=3 \
      > "$out.out" 2> "$out.err" || rc=$?
    echo "$rc" > "$out.rc" ) &
  local job=$! i
  for i in $(seq 600); do
    grep -Eq '^step +20/' "$out.out" 2>/dev/null && break
    kill -0 "$job" 2>/dev/null || break # the job ended before
    sleep 0.1
  done
  if ! grep -Eq '^step +20/' "$out.out" 2>/dev/null || [ ! -s "$PIDS/pid.$victim" ]; then
    wait "$job" || true
    cat "$out.out" "$out.err"; fail "$name: the run did not reach step 20"
    return
  fi
  local pid t0 s rc lines
  pid=$(cat "$PIDS/pid.$victim")
  kill -STOP "$pid"
  t0=$(date +%s.%N)
  wait "$job" || true
  s=$(elapsed_since "$t0")
  rc=$(cat "$out.rc")
  if [ "$rc" -eq 124 ]; then
    fail "$name: still waiting after $LIMIT s (timeout ended it)"
  elif [ "$rc" -eq 0 ]; then
    fail "$name: exit status 0"
  else
    ok "$name: exit status $rc"
  fi
  [ "$s" -le 13 ] && ok "$name: ended ${s} s after the stop" || fail "$name: ended ${s} s after the stop (13 at most)"
  lines=$(grep -c '^txl: error:' "$out.err" || true)
  if [ "$lines" -ne 1 ]; then
    fail "$name: expected one 'txl: error:' line, got $lines: $(head -c 600 "$out.err")"
  elif grep -Eq "^txl: error: \[rank [0-9]+@[^]]*\] rank $victim did not ($reached) within dist.timeout_s = 3 s" "$out.err"; then
    ok "$name: $(grep '^txl: error:' "$out.err")"
  else
    fail "$name: the line does not name rank $victim: $(grep '^txl: error:' "$out.err")"
  fi
  local left=""
  for i in $(seq 0 $((np - 1))); do
    grep -qs txl-train "/proc/$(cat "$PIDS/pid.$i")/cmdline" && left="$left $i"
  done
  [ -z "$left" ] && ok "$name: no rank left behind" || fail "$name: ranks left behind:$left"
  end_ranks
}

# how the line says where the others waited: in an MPI collective, or (NCCL) for their GPUs
reached='reach collective #[0-9]+ \(.*, step [0-9]+\)'
[ "$MODE" = nccl ] && reached="$reached|answer"

if [ "$MODE" = nccl ]; then # the rank that stops matters not to NCCL's path: two cases
  stopped 2 1
  stopped 4 2
  finish
fi
stopped 2 1
stopped 2 0
stopped 3 1
stopped 3 0

# ---- legitimate long waits do not trip it ---------------------------------------------------

# 2 ranks with dist.timeout_s = 1 through training, validation, checkpoints and the test split,
# then rank 0 samples for longer than 1 s while rank 1 waits (the deadline is suspended there):
# 300000 characters take about 4.5 s on a 2-core AMD EPYC (1.5 s for 100000).
{ small_model_ini "$WORK/c.h5"; cat <<INI; } > "$WORK/short.ini"
[train]
tgt_len = 16
mem_len = 16
batch_size = 6
max_step = 40
log_interval = 10
eval_interval = 20
[eval]
eval_tgt_len = 16
eval_batch_size = 6
[run]
threads = 1
checkpoint_interval = 20
sample_tokens = 300000
INI
if timeout $LIMIT $RUN -n 2 "$BIN/txl-train" "$WORK/short.ini" --set run.work_dir="$WORK/short" \
     --set dist.timeout_s=1 > "$WORK/short.out" 2> "$WORK/short.err"; then
  ok "2 ranks, dist.timeout_s = 1: a run with checkpoints and a long sample at the end completes"
else
  cat "$WORK/short.out" "$WORK/short.err"; fail "2 ranks, dist.timeout_s = 1: the run failed"
fi
finish
