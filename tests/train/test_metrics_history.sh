#!/usr/bin/env bash
# metrics.jsonl tells one history: a run stopped and resumed many times (--stop-at between
# progress lines, a crash while writing a checkpoint after lines were logged, kill -9 at any
# moment) ends with the uninterrupted run's file, line for line: one line per logged step, one
# "unigram" line, the same figures as printed but the timing ones (tokens/s, ms/step, comm wait,
# elapsed, seconds), also in the first line after each resume, which averages steps from before
# and after it. A fresh run over the metrics of a run that died before its first checkpoint is
# refused and changes nothing; run.resume = auto starts it over into the same history. plot-metrics
# reads a file of repeated steps (written before) as one history. 1 and 2 ranks.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 4000 300
# progress lines every 5 steps, checkpoints every 7 (most fall between lines), validations every 10
small_run_ini "$WORK/c.h5" train.max_step=40 train.log_interval=5 train.eval_interval=10 \
  run.checkpoint_interval=7 run.keep_checkpoints=2 > "$WORK/r.ini"
train() { # NAME ARGS...: txl-train of r.ini into $WORK/NAME (run.resume = auto), output in $WORK/NAME.out
  local name=$1
  shift
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name" --set run.resume=auto "$@" > "$WORK/$name.out" 2>&1
}
# Every line of a run's metrics.jsonl with the numbers as printed, less the wall-clock figures.
history() {
  python3 -c '
import json, sys
timing = {"tokens_per_s", "ms_per_step", "comm_wait", "elapsed_s", "seconds"}
for l in open(sys.argv[1]):
    r = json.loads(l, parse_float=str, parse_int=str)
    print(" ".join("%s=%s" % (k, v) for k, v in r.items() if k not in timing))' "$1/metrics.jsonl"
}
train_lines() { grep -c '"kind": "train"' "$1/metrics.jsonl" || true; }

train straight || { cat "$WORK/straight.out"; fail "the uninterrupted run failed"; finish; }
want=$(history "$WORK/straight")
[ "$(train_lines "$WORK/straight")" = 8 ] && ok "the uninterrupted run logged 8 progress lines" || fail "straight: $(train_lines "$WORK/straight") lines"

# ---- many stops and resumes of one run ----------------------------------------------------------
cycles=0
for at in 3 8 13; do # between progress lines, each after the checkpoint of the one before
  rc=0; train cut --stop-at $at || rc=$?
  [ $rc -eq 75 ] || { tail -3 "$WORK/cut.out"; fail "--stop-at $at: status $rc"; }
  cycles=$((cycles + 1))
done
rc=0; train cut --stop-at 17 || rc=$?
[ $rc -eq 75 ] && cycles=$((cycles + 1)) || fail "--stop-at 17: status $rc"
# a crash while writing the checkpoint of step 20 (the best on validation so far), after that
# step's progress line and validation, both after step 17's checkpoint: the resumed run logs them
# again
rc=0; TXL_CKPT_FAULT=after_params train cut || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 75 ] && cycles=$((cycles + 1)) || { tail -3 "$WORK/cut.out"; fail "crash 2: status $rc"; }
grep -q '"step": 20' "$WORK/cut/metrics.jsonl" && [ "$(cat "$WORK/cut/latest")" = ckpt-00000017.h5 ] \
  && ok "the crashed run left lines of step 20 after its last checkpoint (step 17)" || fail "no lines after the checkpoint"
# kill -9 once the run has logged a line past where it resumed
for k in 1 2 3; do
  before=$(train_lines "$WORK/cut")
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/cut" --set run.resume=auto > "$WORK/cut.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    [ "$(train_lines "$WORK/cut")" -gt "$before" ] 2>/dev/null && grep -q "^resumed" "$WORK/cut.out" && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL $pid 2>/dev/null && cycles=$((cycles + 1))
  wait $pid || true
done
train cut || { cat "$WORK/cut.out"; fail "the last resume failed"; }
grep -q "^test at step 40" "$WORK/cut.out" && ok "$cycles stops and resumes, then the run finished" || fail "the run did not finish"
# and once more: resumed at its last step, the finished run tests again, and validates no more
train cut || { cat "$WORK/cut.out"; fail "resuming the finished run failed"; }
! grep -q "^valid at step 40" "$WORK/cut.out" && grep -q "^test at step 40" "$WORK/cut.out" \
  && ok "the finished run resumed at step 40 tests again and does not validate step 40 again" || fail "resumed at the end"
got=$(history "$WORK/cut")
if [ "$got" = "$want" ]; then
  ok "metrics.jsonl holds the uninterrupted run's lines, in order, the same figures as printed ($(grep -c '' <<< "$got") lines)"
else
  { diff <(echo "$want") <(echo "$got") || true; } | head -20; fail "metrics.jsonl differs from the uninterrupted run's"
fi
check_eq "one unigram line" "$(grep -c '"kind": "unigram"' "$WORK/cut/metrics.jsonl")" 1
check_eq "one line per logged step" "$(python3 -c '
import json, sys
seen = [(r["kind"], r.get("step")) for r in map(json.loads, open(sys.argv[1]))]
print(len(seen) - len(set(seen)))' "$WORK/cut/metrics.jsonl") repeated" "0 repeated"

# on 2 ranks (rank 0 rewrites the file, every rank agrees): two stops between lines and a crash
train_into straight2 "$WORK/r.ini" 2 || fail "2 ranks: the uninterrupted run failed"
for at in 8 13; do train_into cut2 "$WORK/r.ini" 2 --set run.resume=auto --stop-at $at || true; done
TXL_CKPT_FAULT=after_params train_into cut2 "$WORK/r.ini" 2 --set run.resume=auto || true
train_into cut2 "$WORK/r.ini" 2 --set run.resume=auto || { cat "$WORK/cut2.out"; fail "2 ranks: the last resume failed"; }
[ "$(history "$WORK/cut2")" = "$(history "$WORK/straight2")" ] \
  && ok "2 ranks: stopped twice and crashed once, metrics.jsonl holds the uninterrupted run's lines" \
  || { { diff <(history "$WORK/straight2") <(history "$WORK/cut2") || true; } | head; fail "2 ranks: metrics.jsonl differs"; }

# plot-metrics draws a file written before one history was kept (a resumed run's lines for steps
# the stopped run had logged already, after them) as one history: no curve jumps back
mkdir -p "$WORK/legacy"
{ cat "$WORK/straight/metrics.jsonl"; sed -n '1,4p' "$WORK/straight/metrics.jsonl"; } > "$WORK/legacy/metrics.jsonl"
plot_steps() { python3 -c '
import importlib.util, sys
spec = importlib.util.spec_from_file_location("plot_metrics", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print(" ".join("%s:%s" % (r["kind"], r.get("step", "-")) for r in m.load(sys.argv[2])))' "$SRC/scripts/plot-metrics.py" "$1"; }
check_eq "plot-metrics reads an old file with repeated steps as one history" \
  "$(plot_steps "$WORK/legacy/metrics.jsonl")" "$(plot_steps "$WORK/straight/metrics.jsonl")"

# ---- a run that died before its first checkpoint ------------------------------------------------
rc=0; TXL_CKPT_FAULT=after_params train dead || rc=$?
[ $rc -ne 0 ] && [ ! -e "$WORK/dead/latest" ] && grep -q '"step": 5' "$WORK/dead/metrics.jsonl" \
  && ok "a run killed at its first checkpoint left metrics.jsonl with lines and no checkpoint" || fail "dead run: status $rc"
sum=$(md5sum < "$WORK/dead/metrics.jsonl")
for P in 1 2; do
  expect_error_line "P=$P: a fresh run over a dead run's metrics is refused" \
    "dead/metrics.jsonl holds 1 line of an earlier run that wrote no checkpoint \(the last of step 5\), which a new run would append to: give this one another run.work_dir, or start over in it with --set run.resume=auto \(its lines are dropped\), or remove the file" -- \
    $MPI -n $P "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/dead"
done
[ "$(md5sum < "$WORK/dead/metrics.jsonl")" = "$sum" ] && ok "the refused runs left metrics.jsonl as it was" || fail "metrics.jsonl changed"
train dead || { cat "$WORK/dead.out"; fail "run.resume=auto over the dead run failed"; }
grep -q "resume = auto: no checkpoint in .*dead, starting fresh" "$WORK/dead.out" && [ "$(history "$WORK/dead")" = "$want" ] \
  && ok "run.resume = auto started it over: the uninterrupted run's lines" || { { diff <(echo "$want") <(history "$WORK/dead") || true; } | head; fail "dead run started over"; }
finish
