#!/usr/bin/env bash
# run.tensorboard = true: rank 0 writes <work_dir>/tb/events.out.tfevents.<seconds>.<hostname>
# with the scalars of metrics.jsonl, which a reader written here (tb_read.py: the framing, both
# masked CRC32Cs, the protobuf fields, by hand) finds again: every figure of every line, at its
# step, to float32 precision; on 1 and 2 ranks (one file: rank 0's); over a stop and a crash
# after lines past the last checkpoint (and a stale temporary, a record cut short by a kill), the
# event files tell one history, metrics.jsonl's, with no repeated or stale step; a finished run resumed at its end tests again without a second test
# event of that step. A file named tb in work_dir: one error line, non-zero exit. Off by default.
source "$(dirname "$0")/lib.sh" "$1" "$2"
PY=/usr/bin/python3
READER=$SRC/tests/train/tb_read.py
make_corpus "$WORK/c.h5" 4000 300
# progress lines every 5 steps, checkpoints every 7 (most fall between lines), validations every 10
small_run_ini "$WORK/c.h5" train.max_step=30 train.log_interval=5 train.eval_interval=10 \
  run.checkpoint_interval=7 run.tensorboard=true > "$WORK/r.ini"

# tb_agree DIR: whether DIR/tb read by tb_read.py agrees with DIR/metrics.jsonl; prints the
# differences, or the count of tags and scalars
tb_agree() {
  $PY - "$READER" "$1" <<'PY' 2>&1
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tb_read", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
got, want = t.history(sys.argv[2] + "/tb"), t.metrics_scalars(sys.argv[2] + "/metrics.jsonl")
problems = t.compare(got, want)
print("\n".join(problems[:10]) if problems else "%d tags, %d scalars" % (len(got), sum(map(len, got.values()))))
sys.exit(1 if problems else 0)
PY
}
check_tb() { # WHAT DIR
  local out
  if out=$(tb_agree "$2"); then ok "$1: the event files hold metrics.jsonl's figures, every step once ($out)"; else fail "$1: $out"; fi
}
# the (tag, step) pairs of DIR's events, sorted
tb_steps() { $PY - "$READER" "$1/tb" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("tb_read", sys.argv[1])
t = importlib.util.module_from_spec(spec)
spec.loader.exec_module(t)
for tag, values in sorted(t.history(sys.argv[2]).items()):
    print(tag, " ".join(str(s) for s, _ in values))
PY
}
event_files() { ls "$1/tb" | grep -c tfevents || true; }

"$BIN/txl-train" --help | grep -Eq '^ +tensorboard +bool +default false' && ok "txl-train --help lists run.tensorboard (default false)" \
  || fail "--help does not list run.tensorboard"

# ---- one run, 1 and 2 ranks ---------------------------------------------------------------------
train_into one "$WORK/r.ini" 1 || { cat "$WORK/one.out"; fail "1 rank: the run failed"; finish; }
name=$(ls "$WORK/one/tb")
[[ $name =~ ^events\.out\.tfevents\.[0-9]{10}\.$(re_quote "$(hostname)")$ ]] \
  && ok "one event file, named events.out.tfevents.<unix seconds>.<hostname> ($name)" || fail "event files: $name"
check_tb "1 rank" "$WORK/one"
# the reader's tolerance is tight enough to see a loss off by 2e-6 (2 units of the printed 6th
# decimal, against 0.5e-6 + 4.1 * 2^-24 = 7.4e-7)
mkdir -p "$WORK/off"
cp -r "$WORK/one/tb" "$WORK/off/tb"
$PY -c '
import re, sys
lines = open(sys.argv[1]).readlines()
k = next(i for i, l in enumerate(lines) if l.startswith("{\"kind\": \"train\""))
lines[k] = re.sub(r"\"loss\": ([0-9.]+)", lambda m: "\"loss\": %.6f" % (float(m.group(1)) + 2e-6), lines[k], count=1)
open(sys.argv[2], "w").writelines(lines)' "$WORK/one/metrics.jsonl" "$WORK/off/metrics.jsonl"
out=$(tb_agree "$WORK/off") && fail "the check missed a loss off by 2e-6: $out" \
  || { grep -q '^train/loss step 5: ' <<< "$out" && ok "the check sees a loss off by 2e-6 ($out)" || fail "off: $out"; }

train_into two "$WORK/r.ini" 2 || { cat "$WORK/two.out"; fail "2 ranks: the run failed"; finish; }
check_eq "2 ranks: one event file" "$(event_files "$WORK/two")" 1
check_tb "2 ranks" "$WORK/two"

# off by default: no tb folder
train_into plain "$WORK/r.ini" 1 --set run.tensorboard=false --set train.max_step=5 || fail "run.tensorboard=false failed"
[ ! -e "$WORK/plain/tb" ] && ok "run.tensorboard = false: no tb folder" || fail "run.tensorboard = false wrote $WORK/plain/tb"

# ---- stops, a crash, resumes --------------------------------------------------------------------
for P in 1 2; do
  d=cut$P
  train_into $d "$WORK/r.ini" $P --set run.resume=auto --stop-at 8 || true
  # the first checkpoint of the next start (the best on validation, step 10) crashes after that
  # step's progress line and validation: events of step 10 past the checkpoint of step 8
  rc=0; TXL_CKPT_FAULT=after_params train_into $d "$WORK/r.ini" $P --set run.resume=auto || rc=$?
  $PY "$READER" "$WORK/$d/tb" | grep -q '^  step 10 valid/loss' && [ "$(cat "$WORK/$d/latest")" = ckpt-00000008.h5 ] \
    && ok "P=$P: the crash (status $rc) left events of step 10 after the checkpoint of step 8" || fail "P=$P: no stale events"
  if [ $P = 1 ]; then # a temporary of a rewrite killed half-way, which TensorBoard would read
    tmp=$(ls "$WORK/$d/tb" | tail -n 1).tmp-99999999
    touch "$WORK/$d/tb/$tmp"
  else # the kill came in the middle of the last event (step 10's validation): a record cut short
    last=$WORK/$d/tb/$(ls "$WORK/$d/tb" | tail -n 1)
    truncate -s -5 "$last"
  fi
  train_into $d "$WORK/r.ini" $P --set run.resume=auto || { cat "$WORK/$d.out"; fail "P=$P: the resume failed"; }
  if [ $P = 1 ]; then
    [ ! -e "$WORK/$d/tb/$tmp" ] && grep -q "removed 1 temporary left by a run killed while writing: $tmp" "$WORK/$d.out" \
      && ok "the stale temporary in tb/ is removed, with a notice" || fail "the temporary $tmp stayed"
  fi
  grep -q "tb: dropped 2 events that the run which stopped logged after the checkpoint of step 8" "$WORK/$d.out" \
    && ok "P=$P: the resume dropped the 2 stale events of step 10" || fail "P=$P: no notice of dropped events"
  check_tb "P=$P: stopped, crashed, resumed" "$WORK/$d"
  ref=one; [ $P = 2 ] && ref=two
  [ "$(tb_steps "$WORK/$d")" = "$(tb_steps "$WORK/$ref")" ] \
    && ok "P=$P: the same tags and steps as the uninterrupted run's" || { diff <(tb_steps "$WORK/$ref") <(tb_steps "$WORK/$d") | head; fail "P=$P: steps differ"; }
  check_eq "P=$P: one event file per start" "$(event_files "$WORK/$d")" 3
done
# the finished run resumed at its last step tests again: its test events of step 30 replace the
# earlier ones
train_into cut1 "$WORK/r.ini" 1 --set run.resume=auto || fail "resuming the finished run failed"
check_tb "the finished run resumed at step 30" "$WORK/cut1"
check_eq "one test/loss event of step 30" "$(tb_steps "$WORK/cut1" | sed -n 's/^test\/loss //p')" 30

# ---- bad input ------------------------------------------------------------------------------------
mkdir -p "$WORK/bad" && touch "$WORK/bad/tb"
expect_error "a file named tb in work_dir: one line" \
  "bad/tb: cannot create the TensorBoard folder \(run\.tensorboard = true\): something that is not a folder has its name" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad"
expect_error_line "2 ranks: a file named tb in work_dir" \
  "bad/tb: cannot create the TensorBoard folder \(run\.tensorboard = true\)" -- \
  $MPI -n 2 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad"
[ -f "$WORK/bad/tb" ] && ok "the file named tb is left as it was" || fail "bad/tb changed"
finish
