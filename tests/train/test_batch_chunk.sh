#!/usr/bin/env bash
# Gradient accumulation (train.batch_chunk): a rank's columns go through the model in groups, one
# after the other, each group keeping its own memory, their gradients summed into one step. With
# dropout keyed by global column, batch_chunk = 1, 2 and 4 are the same run (B = 6 on 1 rank:
# groups of 6, 3 and 2 columns; B = 5 on 2 ranks of 3 and 2 columns with batch_chunk = 2); a run
# stopped mid-way resumes exactly with the same batch_chunk and within the tolerance with another
# (the memory is carried per column through the checkpoint); the start lines and --check name the
# groups, and the activation memory of the estimate falls.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
make_corpus "$WORK/c.h5" 4000 300
# 30 steps, validations every 10 (tests/train/lib.sh's small run otherwise)
run_keys=(train.mem_len=16 train.max_step=30 train.warmup_step=5 train.eval_interval=10 eval.max_eval_steps=4)
small_run_ini "$WORK/c.h5" "${run_keys[@]}" train.batch_size=6 > "$WORK/b6.ini"
small_run_ini "$WORK/c.h5" "${run_keys[@]}" train.batch_size=5 > "$WORK/b5.ini"
train() { train_into "$@"; }

# Tolerances: those of tests/train/test_ranks.sh (the same model, steps and learning rate). The
# groups change nothing but the order of the float sums: every parameter's gradient is the sum
# over the L * B rows of the rank, taken group by group (each group's GEMM adds its partial sum to
# the gradient buffer) instead of at once, and the loss is the sum over all tokens divided by
# L * B either way: the same reordering as splitting the columns among ranks. TOL_LOSS = 2e-5,
# TOL_PARAM = 1e-5.
train one "$WORK/b6.ini" 1 --dump-params "$WORK/one.bin" || { cat "$WORK/one.out"; fail "batch_chunk 1 failed"; }
for k in 2 4; do
  if train chunk$k "$WORK/b6.ini" 1 --set train.batch_chunk=$k --dump-params "$WORK/chunk$k.bin"; then
    ok "B=6, batch_chunk $k: 30 steps"
  else
    cat "$WORK/chunk$k.out"; fail "B=6, batch_chunk $k failed"; continue
  fi
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/chunk$k" "$WORK/one" 2e-5 --train-steps 30 \
    --params "$WORK/chunk$k.bin" "$WORK/one.bin" 1e-5 \
    && ok "B=6: batch_chunk $k = batch_chunk 1 (losses, validations, test, final parameters)" \
    || fail "B=6: batch_chunk $k and 1 differ"
done
groups_line="gradient accumulation: a rank of 6 columns takes them in 3 groups of at most 2"
grep -q "$groups_line" "$WORK/chunk4.out" && ok "batch_chunk 4: the start lines name the groups" \
  || fail "batch_chunk 4: no groups line in the start lines"
if grep -q "gradient accumulation" "$WORK/one.out"; then fail "batch_chunk 1 names groups"; else ok "batch_chunk 1: no groups line"; fi

# the estimate's training activations (MiB, the figure before "training activations"), for 128 rows
# and d_inner 1024 (tens of MiB, so the printed decimal resolves them): with groups of 2 of the 6
# columns every buffer but the memory rows (kept for every column: 2 layers x 16 rows x 6 x 32
# floats, 24 KiB) and the few column-free ones (positions, R W_r) holds a third as much, so the
# figure must fall to about a third; below half of it is required
act_mib() { sed -n 's/.*, \([0-9.]*\) MiB training activations.*/\1/p' "$1" | head -n 1; }
big=(--set train.tgt_len=128 --set model.d_inner=1024)
"$BIN/txl-train" "$WORK/b6.ini" --check "${big[@]}" > "$WORK/check1.out" 2>&1
"$BIN/txl-train" "$WORK/b6.ini" --check "${big[@]}" --set train.batch_chunk=3 > "$WORK/check3.out" 2>&1
a1=$(act_mib "$WORK/check1.out") a3=$(act_mib "$WORK/check3.out")
grep -q "takes them in 3 groups of at most 2" "$WORK/check3.out" && ok "--check names the groups" \
  || { cat "$WORK/check3.out"; fail "--check: no groups line"; }
python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[2]) < 0.5 * float(sys.argv[1]) else 1)" "$a1" "$a3" 2>/dev/null \
  && ok "--check: training activations and memory $a1 MiB with batch_chunk 1, $a3 MiB with 3 (< half)" \
  || fail "--check: activations '$a1' MiB with batch_chunk 1, '$a3' MiB with 3 (should be < half)"

# uneven shards and groups together: B = 5 on 2 ranks (3 and 2 columns, groups of 2 + 1 and 1 + 1)
train one_b5 "$WORK/b5.ini" 1 --dump-params "$WORK/one_b5.bin" || { cat "$WORK/one_b5.out"; fail "B=5 on 1 rank failed"; }
if train two_b5 "$WORK/b5.ini" 2 --set train.batch_chunk=2 --dump-params "$WORK/two_b5.bin"; then
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/two_b5" "$WORK/one_b5" 2e-5 --train-steps 30 \
    --params "$WORK/two_b5.bin" "$WORK/one_b5.bin" 1e-5 \
    && ok "B=5 on 2 ranks with batch_chunk 2 = 1 rank without" || fail "B=5: 2 ranks with groups and 1 rank differ"
else
  cat "$WORK/two_b5.out"; fail "B=5 on 2 ranks with batch_chunk 2 failed"
fi

# resume mid-run: with the same batch_chunk the same bits; with another, within the tolerance
rc=0; train stop4 "$WORK/b6.ini" 1 --set train.batch_chunk=4 --stop-at 12 || rc=$?
train stop4 "$WORK/b6.ini" 1 --set train.batch_chunk=4 --resume "$WORK/stop4" --dump-params "$WORK/stop4.bin" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/stop4.out"; fail "batch_chunk 4: stop at 12 and resume (status $rc)"; }
cmp -s "$WORK/stop4.bin" "$WORK/chunk4.bin" && ok "batch_chunk 4: stopped at step 12 and resumed = uninterrupted, bit for bit" \
  || fail "batch_chunk 4: the resumed run differs from the uninterrupted one"
rc=0; train stop2to1 "$WORK/b6.ini" 1 --set train.batch_chunk=2 --stop-at 12 || rc=$?
train stop2to1 "$WORK/b6.ini" 1 --resume "$WORK/stop2to1" --dump-params "$WORK/stop2to1.bin" || rc=1
[ "$rc" -eq 75 ] || { cat "$WORK/stop2to1.out"; fail "batch_chunk 2 then 1: stop and resume (status $rc)"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/stop2to1" "$WORK/one" 2e-5 --train-steps 30 \
  --params "$WORK/stop2to1.bin" "$WORK/one.bin" 1e-5 \
  && ok "12 steps with batch_chunk 2 + 18 with 1 = the run without groups" || fail "batch_chunk 2 then 1: the resumed run differs"
finish
