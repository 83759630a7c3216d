#!/usr/bin/env bash
# A short training run on a slice of the bundled corpus: the validation loss must end well
# below the unigram entropy of the validation text, and the same config run twice must give
# the same numbers bit for bit.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 20000 300
cat > "$WORK/run.ini" <<INI
[data]
corpus = $WORK/c.h5
[model]
n_layer = 2
d_model = 64
n_head = 2
d_head = 32
d_inner = 256
dropout = 0.0
[train]
tgt_len = 32
mem_len = 32
batch_size = 16
max_step = 600
lr = 0.004
warmup_step = 20
log_interval = 50
eval_interval = 0
seed = 7
[eval]
eval_tgt_len = 32
eval_mem_len = 64
eval_batch_size = 4
[run]
work_dir = $WORK/run
sample_tokens = 60
INI
"$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training failed"; finish; }
tail -n 12 "$WORK/train.out"
# last validation loss vs the unigram entropy (both in nats per character)
read -r unigram valid <<<"$(python3 - "$WORK/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
uni = [r["loss"] for r in rows if r["kind"] == "unigram"][-1]
val = [r["loss"] for r in rows if r["kind"] == "valid"][-1]
print(uni, val)
PY
)"
# "well below": at most 75% of the unigram entropy (a character model that learned which
# letters follow which is far below it: bigram statistics alone give about 80%).
if python3 -c "import sys; sys.exit(0 if $valid < 0.75 * $unigram else 1)"; then
  ok "validation loss $valid nats < 0.75 x unigram entropy $unigram"
else
  fail "validation loss $valid nats is not below 0.75 x unigram entropy $unigram"
fi
grep -q -- "--- end of sample ---" "$WORK/train.out" && ok "a sample was generated" || fail "no sample"

# determinism: the same short run twice, every figure but the timings identical
strip() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    for k in ("tokens_per_s", "ms_per_step", "elapsed_s", "seconds"):
        r.pop(k, None)
    print(json.dumps(r, sort_keys=True))' "$1"; }
for i in 1 2; do
  "$BIN/txl-train" "$WORK/run.ini" --set train.max_step=20 --set train.log_interval=1 \
    --set eval.max_eval_steps=3 --set run.sample_tokens=0 --set run.work_dir="$WORK/det$i" > /dev/null 2>&1
  strip "$WORK/det$i/metrics.jsonl" > "$WORK/det$i.txt"
done
if cmp -s "$WORK/det1.txt" "$WORK/det2.txt" && [ "$(grep -c '"train"' "$WORK/det1.txt")" -eq 20 ]; then
  ok "two identical runs give identical losses, gradient norms and evaluations (20 steps)"
else
  diff "$WORK/det1.txt" "$WORK/det2.txt" | head; fail "two identical runs differ"
fi
finish
