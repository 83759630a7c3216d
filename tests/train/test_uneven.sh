#!/usr/bin/env bash
# Uneven column shards: a batch that does not divide among the ranks (B = 6 on P = 4: 2, 2, 1, 1
# columns; B = 5 on P = 2: 3, 2) trains the same run as one rank, evaluates to the same loss, and
# resumes across rank counts; every rank holds bit-identical parameters after every step.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
make_corpus "$WORK/c.h5" 4000 300
ini() { # BATCH
  small_model_ini "$WORK/c.h5"
  cat <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = $1
max_step = 30
lr = 0.003
warmup_step = 5
log_interval = 1
eval_interval = 10
[eval]
eval_tgt_len = 16
eval_batch_size = $1
max_eval_steps = 4
[run]
checkpoint_interval = 0
[dist]
check_replicas = 1
INI
}
ini 6 > "$WORK/b6.ini"
ini 5 > "$WORK/b5.ini"
train() { train_into "$@"; }

# Tolerances: those of tests/train/test_ranks.sh (the same model, steps and learning rate). Uneven
# shards change nothing but the order of the float sums: each rank sums the gradient over its
# own L * B_r rows, then the ranks' sums are added (at most L * B + P terms), and the loss is the
# sum over all tokens divided by L * B on every rank count. TOL_LOSS = 2e-5, TOL_PARAM = 1e-5.
for case in "6 4" "5 2"; do
  read -r B P <<<"$case"
  train one_b$B "$WORK/b$B.ini" 1 --dump-params "$WORK/one_b$B.bin" || { cat "$WORK/one_b$B.out"; fail "B=$B on 1 rank failed"; continue; }
  if train uneven_b$B "$WORK/b$B.ini" "$P" --dump-params "$WORK/uneven_b$B.bin"; then
    ok "B=$B on $P ranks: 30 steps, replicas bit-identical after every step"
  else
    cat "$WORK/uneven_b$B.out"; fail "B=$B on $P ranks failed"; continue
  fi
  grep -q "columns: $B global, $((B / P)) or $(((B + P - 1) / P)) on each rank" "$WORK/uneven_b$B.out" \
    && ok "B=$B on $P ranks: the start lines name the uneven split" || fail "B=$B on $P ranks: no uneven split in the start lines"
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/uneven_b$B" "$WORK/one_b$B" 2e-5 --train-steps 30 \
    --params "$WORK/uneven_b$B.bin" "$WORK/one_b$B.bin" 1e-5 \
    && ok "B=$B: $P ranks = 1 rank (losses, validations, test, final parameters)" || fail "B=$B: $P ranks and 1 rank differ"
done

# resume across the rank counts: stopped on P ranks, continued on 1, and the other way round
rc=0; train p4to1 "$WORK/b6.ini" 4 --stop-at 12 || rc=$?
train p4to1 "$WORK/b6.ini" 1 --resume "$WORK/p4to1" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/p4to1.out"; fail "B=6: stop on 4 ranks and resume on 1 (status $rc)"; }
rc=0; train p1to2 "$WORK/b5.ini" 1 --stop-at 12 || rc=$?
train p1to2 "$WORK/b5.ini" 2 --resume "$WORK/p1to2" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/p1to2.out"; fail "B=5: stop on 1 rank and resume on 2 (status $rc)"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/p4to1" "$WORK/one_b6" 2e-5 --train-steps 30 \
  && ok "B=6: 12 steps on 4 ranks + 18 on 1 = the 1-rank run" || fail "B=6: the resumed run differs"
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/p1to2" "$WORK/one_b5" 2e-5 --train-steps 30 \
  && ok "B=5: 12 steps on 1 rank + 18 on 2 = the 1-rank run" || fail "B=5: the resumed run differs"

# evaluation alone: txl-eval with 5 and 6 columns on 2, 3 and 4 ranks against 1 rank (the
# tolerance of tests/train/test_eval.sh: 2e-5 relative)
loss_of() { sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p' "$1"; }
for case in "5 2" "5 3" "6 4"; do
  read -r B P <<<"$case"
  $MPI -n 1 "$BIN/txl-eval" "$WORK/one_b6" --split valid --batch-size "$B" > "$WORK/e1.out" 2>&1
  $MPI -n "$P" "$BIN/txl-eval" "$WORK/one_b6" --split valid --batch-size "$B" > "$WORK/ep.out" 2>&1
  e1=$(loss_of "$WORK/e1.out") ep=$(loss_of "$WORK/ep.out")
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 2e-5 * b else 1)" \
    "$ep" "$e1" 2>/dev/null && ok "txl-eval, $B columns on $P ranks: loss $ep, 1 rank: $e1" \
    || { cat "$WORK/ep.out"; fail "txl-eval, $B columns on $P ranks: loss '$ep', 1 rank: '$e1'"; }
done

# more ranks than columns: one line, every rank exits 1
expect_error_line "more ranks than columns" "train.batch_size = 2 is fewer columns than the 4 ranks" -- \
  $MPI -n 4 "$BIN/txl-train" "$WORK/b6.ini" --set train.batch_size=2 --set run.work_dir="$WORK/bad"
expect_error_line "more ranks than evaluation columns" "eval.eval_batch_size = 3 is fewer columns than the 4 ranks" -- \
  $MPI -n 4 "$BIN/txl-eval" "$WORK/one_b6" --batch-size 3
finish
