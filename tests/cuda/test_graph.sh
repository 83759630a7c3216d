#!/usr/bin/env bash
# run.cuda_graph (src/train/graph_step.h): the training step captured once its shapes repeat and
# replayed gives the numbers of the uncaptured step, bit for bit: every progress line's loss and
# gradient norm, every validation, the parameters at the end, across evaluations, checkpoints
# and three epoch boundaries (the memory reset: uncaptured steps, then the same graph again); in
# fp32, bf16, with SGD, with two column groups (train.batch_chunk = 2: each group's tokens
# uploaded before the launch) and in the wt103 recipe's shape (adaptive input and softmax, div_val
# 2, two column groups: the clusters grouped on the device into slots of fixed capacity); a run stopped and resumed in graph mode ends as the straight one.
# run.cuda_graph = on where the run does not qualify is one error line naming why.
# usage: test_graph.sh BIN_DIR SOURCE_DIR [emu]: with "emu", txl-train-emu (the kernels' CPU
# emulator) takes txl-train's place. Prints "SKIPPED: no CUDA device" and exits 77 (skipped) without a GPU.
source "$2/tests/train/lib.sh" "$1" "$2"
EMU=${3:-}
TRAIN=$BIN/txl-train${EMU:+-emu}
probe=$("$BIN/test_cuda_parity${EMU:+_emu}" 2>&1 || true)
if [ "$(head -n 1 <<< "$probe")" = "SKIPPED: no CUDA device" ]; then
  echo "SKIPPED: no CUDA device"
  exit 77
fi
# 40 lines of text: 4 columns of 16 segments of 16 rows an epoch, so 50 steps cross three epoch
# boundaries
make_corpus "$WORK/c.h5" 40 20
small_run_ini "$WORK/c.h5" train.mem_len=16 train.max_step=50 train.warmup_step=5 train.log_interval=5 \
  train.eval_interval=20 run.device=cuda run.checkpoint_interval=15 > "$WORK/g.ini"
run() { # NAME ARGS...
  local name=$1
  shift
  if "$TRAIN" "$WORK/g.ini" --set run.work_dir="$WORK/$name" --dump-params "$WORK/$name.bin" "$@" \
       > "$WORK/$name.txt" 2>&1; then
    ok "$name: trained"
  else
    tail -n 5 "$WORK/$name.txt"
    fail "$name: the run failed"
  fi
}
evals() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "eval": print(r["split"], r["step"], repr(r["loss"]))' "$1/metrics.jsonl"; }
same_run() { # A B WHAT
  [ "$(train_losses "$WORK/$1")" = "$(train_losses "$WORK/$2")" ] && [ "$(evals "$WORK/$1")" = "$(evals "$WORK/$2")" ] \
    && ok "$3: every progress line's loss and gradient norm and every evaluation the same" \
    || { diff <(train_losses "$WORK/$1"; evals "$WORK/$1") <(train_losses "$WORK/$2"; evals "$WORK/$2") | head || true; fail "$3: the logs differ"; }
  cmp -s "$WORK/$1.bin" "$WORK/$2.bin" && ok "$3: the parameters the same, bit for bit" \
    || fail "$3: the parameters differ"
}
for v in "fp32" "bf16 --set run.precision=bf16" "sgd --set train.optim=sgd --set train.lr=0.05" \
         "chunk2 --set train.batch_chunk=2" \
         "adaptive --set model.cutoffs=20,40 --set model.div_val=2 --set train.batch_chunk=2"; do
  name=${v%% *} args=${v#"$name"}
  # shellcheck disable=SC2086
  run "$name-off" --set run.cuda_graph=off $args
  # shellcheck disable=SC2086
  run "$name-on" --set run.cuda_graph=on $args
  grep -q '^cuda graph: on' "$WORK/$name-on.txt" && ok "$name: the run says the graph is on" \
    || fail "$name: no 'cuda graph: on' line"
  same_run "$name-off" "$name-on" "$name: replayed against uncaptured"
done
[ "$(train_losses "$WORK/fp32-on" | wc -l)" = 10 ] && ok "fp32: 10 progress lines (50 steps)" || fail "fp32: progress lines"
# the replays happened: 16 segments an epoch here, each epoch's first two steps uncaptured (the
# memory filling, then the first step of the full shape), the last, shorter segment and the step
# after it too: at least 30 of the 50 steps replayed
line=$(grep -E '^cuda graph: [0-9]+ steps replayed, [0-9]+ captured' "$WORK/fp32-on.txt" || true)
n=$(sed -E 's/^cuda graph: ([0-9]+) steps replayed.*/\1/' <<< "$line")
[ -n "$line" ] && [ "$n" -ge 30 ] && ok "fp32: $line" || fail "fp32: too few replays: '$line'"
grep -q 'steps replayed' "$WORK/fp32-off.txt" && fail "fp32 off: replays reported" || ok "fp32 off: nothing replayed"
# stopped after step 27 (a graph captured and replayed before), resumed: the straight run's end
if "$TRAIN" "$WORK/g.ini" --set run.work_dir="$WORK/stop" --set run.cuda_graph=on --stop-at 27 > "$WORK/stop.txt" 2>&1; then
  fail "--stop-at 27: exit status 0, expected the requeue status"
else
  grep -q 'stopped after step 27' "$WORK/stop.txt" && ok "--stop-at 27: stopped" || fail "--stop-at 27: $(tail -n 2 "$WORK/stop.txt")"
fi
run resumed --set run.cuda_graph=on --resume "$WORK/stop"
cmp -s "$WORK/resumed.bin" "$WORK/fp32-on.bin" && ok "stopped at 27 and resumed: the straight run's parameters" \
  || fail "stopped at 27 and resumed: the parameters differ from the straight run"
# on, where the run does not qualify
expect_error_line "run.cuda_graph = on with train.varlen" \
  "run.cuda_graph = on, but train.varlen is on" -- \
  "$TRAIN" "$WORK/g.ini" --set run.work_dir="$WORK/vl" --set run.cuda_graph=on --set train.varlen=true
finish
