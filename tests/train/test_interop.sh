#!/usr/bin/env bash
# A checkpoint of txl-train, read with h5py into the PyTorch reference model
# (tests/reference/eval_checkpoint.py, which uses tests/reference/txl_ref.py), must reproduce the
# validation and test losses that txl logged for it. It exercises the checkpoint layout, the
# corpus layout, and the evaluation walk (columns, segments with the last one shorter, memory of
# eval_mem_len rows carried across segments, eval_clamp_len, eval_same_length, max_eval_steps).
# Needs PyTorch, NumPy and h5py for /usr/bin/python3 (Debian: python3-torch, python3-h5py), or
# for $TXL_TORCH_PYTHON; without them it says so and exits 77 (skipped).
source "$(dirname "$0")/lib.sh" "$1" "$2"
py=${TXL_TORCH_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch/h5py not installed (torch, h5py and numpy for $py)"
  exit 77
fi
EVAL="$SRC/tests/reference/eval_checkpoint.py"

# Tolerance, relative, for txl's logged loss against the reference's in float32 (both sides
# float32, different summation orders):
#  - metrics.jsonl prints the loss with 6 decimals: up to 5e-7 nats off, 2e-7 relative at ~2.4;
#  - each side's per-token loss is within ~1e-6 of the exact value at the logits' scale (the
#    golden test sees ~1e-6 relative per tensor; on this model the reference's float32 per-token
#    losses differ from its float64 ones by at most 1.4e-6 nats, logits up to ~7). The mean over
#    the ~800 (valid) / ~4500 (test) scored tokens is off by no more than the largest per-token
#    error even when all errors have the same sign (random signs average them down by
#    sqrt(tokens), which is what is seen: ~1e-8 relative between float32 and float64).
#    Two sides: <= ~3e-6 nats, plus the rounding: ~3.5e-6 nats, ~1.5e-6 relative.
# 5e-6 relative (~1.2e-5 nats) leaves a 3x margin over that worst case, and is 7x below the
# smallest modelling error seen on this model (eval_same_length ignored: 3.5e-5 relative; the
# clamp ignored: 2.6e-4; the training mem_len instead of eval_mem_len: 5.3e-4).
RTOL=5e-6

# A small model, trained long enough (300 steps, seconds) that it uses its context, so that the
# memory, the clamp and the mask change the loss measurably. Evaluation settings all differ from
# training's: a longer memory than in training, a clamp shorter than the keys, same_length.
make_corpus "$WORK/c.h5" 3000 200
cat > "$WORK/run.ini" <<INI
[data]
corpus = $WORK/c.h5
[model]
n_layer = 2
d_model = 64
n_head = 2
d_head = 32
d_inner = 128
dropout = 0.1
dropatt = 0.1
[train]
tgt_len = 32
mem_len = 32
batch_size = 8
max_step = 300
lr = 0.004
warmup_step = 10
log_interval = 100
eval_interval = 300
seed = 7
[eval]
eval_tgt_len = 20
eval_mem_len = 40
eval_clamp_len = 30
eval_same_length = true
eval_batch_size = 4
max_eval_steps = 10
[run]
work_dir = $WORK/run
checkpoint_interval = 0
INI
"$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training failed"; finish; }
grep -E '^(valid|test) at step|^checkpoint ' "$WORK/train.out" || true

# the last validation and the test evaluation txl logged, and the checkpoint 'latest' names
read -r vstep vloss tloss <<<"$("$py" - "$WORK/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
v = [r for r in rows if r["kind"] == "valid"][-1]
t = [r for r in rows if r["kind"] == "test"][-1]
print(v["step"], repr(v["loss"]), repr(t["loss"]))
PY
)"
ckpt="$WORK/run/$(cat "$WORK/run/latest")"
echo "txl: valid loss $vloss at step $vstep, test loss $tloss; checkpoint $(basename "$ckpt")"

# evaluate SPLIT EXPECT [--float64]: prints the reference's output, sets REF to its loss
evaluate() {
  local split=$1 expect=$2
  shift 2
  local rc=0
  "$py" "$EVAL" "$ckpt" "$WORK/c.h5" --split "$split" --expect "$expect" --rtol "$RTOL" "$@" \
    > "$WORK/eval.out" 2>&1 || rc=$?
  sed 's/^/  reference: /' "$WORK/eval.out"
  REF=$(sed -n 's/^loss //p' "$WORK/eval.out")
  STEP=$(sed -n 's/^checkpoint step \([0-9]*\),.*/\1/p' "$WORK/eval.out")
  return $rc
}

for split in valid test; do
  if [ "$split" = valid ]; then expect=$vloss; else expect=$tloss; fi
  rc=0
  evaluate "$split" "$expect" || rc=$?
  if [ -z "$REF" ]; then
    fail "$split: eval_checkpoint.py failed (exit $rc)"
  elif [ "$STEP" != "$vstep" ]; then
    fail "$split: the checkpoint is of step $STEP, txl evaluated at step $vstep"
  elif [ "$rc" -eq 0 ]; then
    ok "$split: reference float32 loss $REF = txl's $expect within $RTOL relative"
  else
    fail "$split: reference float32 loss $REF differs from txl's $expect by more than $RTOL relative"
  fi
  ref32=$REF
  # float64: information only (how far float32 is from exact, on either side)
  rc=0
  evaluate "$split" "$expect" --float64 || rc=$?
  if [ -z "$REF" ]; then
    fail "$split: eval_checkpoint.py --float64 failed"
  else
    "$py" -c "
import sys
t, r32, r64 = (float(x) for x in sys.argv[1:])
print('info: %s: float64 reference %.12f; minus txl %+.3g (relative %+.3g), minus float32 reference %+.3g'
      % ('$split', r64, r64 - t, (r64 - t) / t, r64 - r32))" "$expect" "$ref32" "$REF"
  fi
done
finish
