#!/usr/bin/env bash
# run.tensorboard's event files as TensorBoard itself reads them (EventAccumulator of pip's
# tensorboard package on $TXL_PYTHON, which scripts/test.sh points at build/py, else /usr/bin/python3;
# SKIPPED where it is not installed): the scalars of
# every tag at the steps and values of metrics.jsonl (to float32 precision, tb_read.py's
# tolerance), after a run that stopped and crashed with events past its last checkpoint and was
# resumed; and a TensorBoard that was already reading the folder while the stale events were in it
# shows the same one history after the resume (the new file's SessionLog START drops them).
source "$(dirname "$0")/lib.sh" "$1" "$2"
PY=${TXL_PYTHON:-/usr/bin/python3}
if ! $PY -c 'import tensorboard.backend.event_processing.event_accumulator' 2> "$WORK/import.err"; then
  echo "SKIPPED: no tensorboard package for $PY ($(tail -n 1 "$WORK/import.err")): pip install tensorboard"
  exit 77
fi
echo "tensorboard $($PY -c 'import tensorboard; print(tensorboard.__version__)')"
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=30 train.log_interval=5 train.eval_interval=10 \
  run.checkpoint_interval=7 run.tensorboard=true > "$WORK/r.ini"
train_into cut "$WORK/r.ini" 1 --set run.resume=auto --stop-at 8 || true
# the first checkpoint of this start (the best on validation, step 10) crashes: events of step 10
# stay past the checkpoint of step 8
TXL_CKPT_FAULT=after_params train_into cut "$WORK/r.ini" 1 --set run.resume=auto || true
[ "$(cat "$WORK/cut/latest")" = ckpt-00000008.h5 ] && ok "stopped at step 8, crashed at the checkpoint of step 10" \
  || fail "the stop and the crash did not leave the checkpoint of step 8 latest"

# One python process: an EventAccumulator opened on the folder now (it sees the stale events),
# the resume run by it, then that accumulator reloaded and a fresh one; both must agree with
# metrics.jsonl.
$PY - "$SRC/tests/train/tb_read.py" "$WORK/cut" "$BIN/txl-train" "$WORK/r.ini" > "$WORK/check.out" 2>&1 <<'PY' || true
import importlib.util, subprocess, sys
from tensorboard.backend.event_processing import event_accumulator as ea
spec = importlib.util.spec_from_file_location("tb_read", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
work, train, ini = sys.argv[2], sys.argv[3], sys.argv[4]

def scalars(acc):
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}

def report(what, problems):
    print(("FAIL %s: %s" % (what, "; ".join(problems[:6]))) if problems else "ok   %s" % what)

live = ea.EventAccumulator(work + "/tb", size_guidance={ea.SCALARS: 0})
live.Reload()
seen = scalars(live)
report("a running TensorBoard sees the stale events of step 10 before the resume",
       [] if 10 in [s for s, _ in seen.get("valid/loss", [])] else ["valid/loss steps %s" % seen.get("valid/loss")])
subprocess.run([train, ini, "--set", "run.work_dir=" + work, "--set", "run.resume=auto"], check=True,
               stdout=subprocess.DEVNULL)
want = t.metrics_scalars(work + "/metrics.jsonl")
live.Reload()
report("the running TensorBoard, reloaded after the resume, shows metrics.jsonl's history", t.compare(scalars(live), want))
fresh = ea.EventAccumulator(work + "/tb", size_guidance={ea.SCALARS: 0})
fresh.Reload()
got = scalars(fresh)
problems = t.compare(got, want)
report("a TensorBoard started after the resume shows metrics.jsonl's history (%d tags, %d scalars)"
       % (len(got), sum(map(len, got.values()))), problems)
PY
cat "$WORK/check.out"
CHECKS=$((CHECKS + $(grep -Ec '^(ok|FAIL) ' "$WORK/check.out")))
FAILS=$((FAILS + $(grep -c '^FAIL ' "$WORK/check.out" || true)))
[ "$(grep -c '^ok ' "$WORK/check.out")" = 3 ] || fail "the TensorBoard checks did not all run"
finish
