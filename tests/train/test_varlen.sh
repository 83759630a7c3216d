#!/usr/bin/env bash
# Variable segment lengths (train.varlen): each step's rows drawn around tgt_len (data/varlen.c;
# the rule's statistics are checked by tests/data/test_varlen.c). Here, end to end: the steps of
# a run have varying lengths within [5, tgt_len + 15] (metrics.jsonl's tokens per step), the same
# lengths on 1 and 2 ranks (the draw is keyed by seed and step) with the same run within the
# rank-equivalence tolerance, and a run stopped mid-way resumes with the same lengths, bit for bit.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.mem_len=16 train.max_step=30 train.warmup_step=5 train.eval_interval=10 \
  train.varlen=true eval.max_eval_steps=4 > "$WORK/v.ini"
train() { # NAME RANKS ARGS...
  local name=$1 p=$2
  shift 2
  train_into "$name" "$WORK/v.ini" "$p" "$@"
}
# tokens of each train line (log_interval 1: one step each), as "step:tokens" words
lengths() { python3 -c "
import json, sys
print(' '.join(f'{r[\"step\"]}:{r[\"tokens\"]:.0f}' for r in map(json.loads, open(sys.argv[1] + '/metrics.jsonl'))
               if r['kind'] == 'train'))" "$1"; }

train one 1 --dump-params "$WORK/one.bin" || { cat "$WORK/one.out"; fail "varlen run failed"; finish; }
grep -q "varlen: 5 to 31 rows, around 16" "$WORK/one.out" && ok "the start lines name the lengths" \
  || fail "no varlen line at start"
python3 - "$(lengths "$WORK/one")" <<'PY' && ok "30 steps of varying lengths, all in [5, 31] rows x 4 columns" || fail "lengths wrong"
import sys
rows = [int(w.split(":")[1]) / 4 for w in sys.argv[1].split()]
print("rows per step:", " ".join(f"{r:.0f}" for r in rows))
sys.exit(0 if len(rows) == 30 and all(r == int(r) and 5 <= r <= 31 for r in rows) and len(set(rows)) > 3 else 1)
PY

# 2 ranks: the same lengths; the same run up to the order of the float sums (tolerances of
# tests/train/test_ranks.sh: TOL_LOSS 2e-5, TOL_PARAM 1e-5)
if train two 2 --dump-params "$WORK/two.bin"; then
  [ "$(lengths "$WORK/two")" = "$(lengths "$WORK/one")" ] && ok "2 ranks draw the same lengths" \
    || fail "2 ranks drew other lengths"
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/two" "$WORK/one" 2e-5 --train-steps 30 \
    --params "$WORK/two.bin" "$WORK/one.bin" 1e-5 && ok "2 ranks = 1 rank with varlen" || fail "2 ranks and 1 differ"
else
  cat "$WORK/two.out"; fail "varlen on 2 ranks failed"
fi

# stopped at step 12 and resumed: the lengths of the uninterrupted run, the same bits
rc=0; train stop 1 --stop-at 12 || rc=$?
train stop 1 --resume "$WORK/stop" --dump-params "$WORK/stop.bin" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/stop.out"; fail "stop at 12 and resume (status $rc)"; }
[ "$(lengths "$WORK/stop")" = "$(lengths "$WORK/one")" ] && ok "the resumed run draws the same lengths" \
  || fail "the resumed run drew other lengths"
cmp -s "$WORK/stop.bin" "$WORK/one.bin" && ok "stopped at step 12 and resumed = uninterrupted, bit for bit" \
  || fail "the resumed varlen run differs"
finish
