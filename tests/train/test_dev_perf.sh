#!/usr/bin/env bash
# train.scheduler = dev_perf (the original's): after the warm-up the rate is train.lr, halved
# (train.decay_rate) whenever a validation does not improve on the best by a relative 1e-4 for
# more than train.patience validations (PyTorch's ReduceLROnPlateau). A run validating every 2
# steps at a high rate: the lr of metrics.jsonl's train lines follows the rule replayed from its
# own validation losses, and decays; a run stopped mid-way (patience 0 and 1, a chain of stops)
# resumes bit for bit (the schedule's state is in the checkpoint); a checkpoint without that state
# is refused when its run was dev_perf, and read as the fresh state when it was not (as a file of
# such a run holds); train.eval_interval = 0 is refused in one line naming both keys.
source "$(dirname "$0")/lib.sh" "$1" "$2"
CKPT_TOOL=$BIN/test_ckpt # del-attr
make_corpus "$WORK/c.h5" 4000 300
small_model_ini "$WORK/c.h5" > "$WORK/a.ini"
cat >> "$WORK/a.ini" <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
max_step = 40
lr = 0.03
warmup_step = 4
scheduler = dev_perf
log_interval = 1
eval_interval = 2
[eval]
eval_tgt_len = 16
eval_batch_size = 4
max_eval_steps = 2
[run]
checkpoint_interval = 0
INI
train() { # NAME ARGS...: txl-train into $WORK/NAME, output in $WORK/NAME.out (status returned)
  local name=$1
  shift
  "$BIN/txl-train" "$WORK/a.ini" --set run.work_dir="$WORK/$name" "$@" > "$WORK/$name.out" 2>&1
}

# The rates of the train lines against the rule replayed from the validation lines: update s
# (train line s) runs at lr * s / warmup_step during the warm-up, then at the rate the
# validations before it left. Prints the number of decays.
replay() { # RUN_DIR LR WARMUP DECAY PATIENCE
  python3 - "$@" <<'PY'
import json, math, sys
d, lr, warm, decay, patience = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
rate, best, bad, decays, bad_lines = lr, math.inf, 0, 0, []
train = {}
valid = []
for line in open(d + "/metrics.jsonl"):
    r = json.loads(line)
    if "lr" in r and r.get("kind") not in ("valid", "test", "unigram"): train[r["step"]] = r["lr"]
    elif r.get("kind") == "valid": valid.append((r["step"], r["loss"]))
vi = 0
for s in sorted(train):
    while vi < len(valid) and valid[vi][0] < s:  # validations after update s - 1
        loss = valid[vi][1]; vi += 1
        if loss < best * (1 - 1e-4): best, bad = loss, 0
        else: bad += 1
        if bad > patience:
            bad = 0
            new = max(rate * decay, 0.0)
            if rate - new > 1e-8: rate, decays = new, decays + 1
    want = lr * s / warm if s <= warm else rate
    if abs(train[s] - want) > 1e-6 * want: bad_lines.append("step %d: lr %g, the rule gives %g" % (s, train[s], want))
if bad_lines or len(train) != 40 or len(valid) != 20:
    print("; ".join(bad_lines[:5]) or "%d train lines, %d validations" % (len(train), len(valid)), file=sys.stderr)
    sys.exit(1)
print(decays)
PY
}

train straight --dump-params "$WORK/straight.bin" || { cat "$WORK/straight.out"; fail "dev_perf: 40 steps failed"; finish; }
if n=$(replay "$WORK/straight" 0.03 4 0.5 0); then
  [ "$n" -ge 2 ] && ok "patience 0: metrics.jsonl's lr follows the validations, $n decays" \
    || fail "patience 0: only $n decays (the test needs validations that do not improve)"
else
  fail "patience 0: metrics.jsonl's lr does not follow the rule"
fi
grep -q "dev_perf: no improvement on validation for 1 validation: the learning rate is now 1.500e-02" "$WORK/straight.out" \
  && ok "the first decay is announced" || fail "no line announces the first decay"
grep -q "| lr 1.500e-02 |" "$WORK/straight.out" && ok "the progress line shows the decayed rate" \
  || fail "no progress line at the decayed rate 1.500e-02"

train pat1 --set train.patience=1 --dump-params "$WORK/pat1.bin" || { cat "$WORK/pat1.out"; fail "patience 1 failed"; }
if n=$(replay "$WORK/pat1" 0.03 4 0.5 1); then
  [ "$n" -ge 1 ] && ok "patience 1: metrics.jsonl's lr follows the validations, $n decays" \
    || fail "patience 1: no decay"
else
  fail "patience 1: metrics.jsonl's lr does not follow the rule"
fi

# stopped and resumed: the same bits (a stop right after a decay, and a chain of stops)
rc=0; train stop --stop-at 10 || rc=$?
cp "$WORK/stop/ckpt-00000010.h5" "$WORK/ck10.h5" || rc=1 # kept for the checks below (rotation deletes it)
train stop --resume "$WORK/stop" --dump-params "$WORK/stop.bin" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/stop.out"; fail "stop at 10 and resume (status $rc)"; }
cmp -s "$WORK/stop.bin" "$WORK/straight.bin" && ok "patience 0: stopped at step 10 and resumed = uninterrupted, bit for bit" \
  || fail "patience 0: the resumed run differs from the uninterrupted one"
rc=0
for s in 7 9 15 19 27; do
  st=0; train chain --set train.patience=1 --resume auto --stop-at $s || st=$?
  [ "$st" -eq 75 ] || { rc=1; cat "$WORK/chain.out"; }
done
train chain --set train.patience=1 --resume auto --dump-params "$WORK/chain.bin" || rc=1
[ "$rc" -eq 0 ] || fail "patience 1: the chain of stops failed"
cmp -s "$WORK/chain.bin" "$WORK/pat1.bin" && ok "patience 1: stopped at 7, 9, 15, 19, 27 and resumed = uninterrupted, bit for bit" \
  || fail "patience 1: the resumed run differs from the uninterrupted one"
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/chain" "$WORK/pat1" 0 --train-steps 40 >/dev/null 2>&1 \
  && ok "patience 1: the resumed run's metrics match" || fail "patience 1: the resumed run's metrics differ"

# a checkpoint without the schedule's state
ck=$WORK/ck10.h5
cp "$ck" "$WORK/nostate.h5"
for a in plateau_rate plateau_best plateau_bad; do "$CKPT_TOOL" del-attr "$WORK/nostate.h5" $a > /dev/null; done
rc=0; train nostate --resume "$WORK/nostate.h5" || rc=$?
[ "$rc" -ne 0 ] && grep -q "nostate.h5: its config says train.scheduler = dev_perf, but it holds no schedule state" "$WORK/nostate.out" \
  && ok "a dev_perf checkpoint without the schedule's state is refused" \
  || { cat "$WORK/nostate.out"; fail "a dev_perf checkpoint without the schedule's state: status $rc"; }
"$BIN/txl-inspect" "$ck" > "$WORK/ck10.txt" 2>&1 || true
"$BIN/txl-inspect" "$WORK/nostate.h5" > "$WORK/nostate.txt" 2>&1 || true
grep -q "^dev_perf state  rate [0-9.e+-]*, best valid loss [0-9.]*, [0-9]* validation" "$WORK/ck10.txt" \
  && grep -q "^dev_perf state  none" "$WORK/nostate.txt" \
  && ok "txl-inspect shows the schedule's state, or its absence" || fail "txl-inspect: no dev_perf state line"
cp "$ck" "$WORK/part.h5" && "$CKPT_TOOL" del-attr "$WORK/part.h5" plateau_bad > /dev/null
rc=0; train part --resume "$WORK/part.h5" || rc=$?
[ "$rc" -ne 0 ] && grep -q "holds 2 of the 3 root attributes plateau_\*" "$WORK/part.out" \
  && ok "a checkpoint with part of the schedule's state is refused" \
  || { cat "$WORK/part.out"; fail "a checkpoint with part of the schedule's state: status $rc"; }
# a cosine run's checkpoint holds the fresh state; one written before these attributes reads alike
rc=0; train cos --set train.scheduler=cosine --stop-at 10 || rc=$?
[ "$rc" -eq 75 ] || { cat "$WORK/cos.out"; fail "cosine: stop at 10 (status $rc)"; }
cp "$WORK/cos/ckpt-00000010.h5" "$WORK/old.h5"
for a in plateau_rate plateau_best plateau_bad; do "$CKPT_TOOL" del-attr "$WORK/old.h5" $a > /dev/null; done
train cos --resume "$WORK/cos" --dump-params "$WORK/cos.bin" || fail "cosine checkpoint resumed as dev_perf failed"
train old --resume "$WORK/old.h5" --dump-params "$WORK/old.bin" || { cat "$WORK/old.out"; fail "an older cosine checkpoint resumed as dev_perf failed"; }
cmp -s "$WORK/cos.bin" "$WORK/old.bin" && ! cmp -s "$WORK/cos.bin" "$WORK/straight.bin" \
  && ok "cosine then dev_perf: a checkpoint without the state = one with the fresh state, bit for bit" \
  || fail "cosine then dev_perf: the checkpoint without the state continues otherwise"

# the refusal
rc=0; "$BIN/txl-train" "$WORK/a.ini" --set train.eval_interval=0 --set run.work_dir="$WORK/zero" > "$WORK/zero.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$(grep -c . "$WORK/zero.out")" -eq 1 ] && grep -q "train.scheduler = dev_perf.*train.eval_interval = 0" "$WORK/zero.out" \
  && ok "dev_perf with eval_interval = 0: refused in one line naming both keys" \
  || { cat "$WORK/zero.out"; fail "dev_perf with eval_interval = 0 (status $rc)"; }
finish
