#!/usr/bin/env bash
# model.attn_type, the original's attention variants (rel = 0 relative, shaw = 1 Shaw et al.,
# abs_sin = 2 absolute sinusoids, abs_learned = 3 learned absolute per layer; the runs below give
# the original's numbers, which INI files written before the names hold), end to end on a slice of the bundled corpus: each type
# trains (the loss falls), its checkpoint records the type and holds exactly its positional
# tensors, txl-eval evaluates it, an interrupted-and-resumed run of types 1, 2 and 3 (memory
# carried, dropout and dropatt on) is the uninterrupted run bit for bit, 2 ranks continue a
# 1-rank type 3 run, the CUDA backend (on the kernels' CPU emulator, where this build has it)
# trains types 1-3 as the CPU does, a checkpoint whose config text has the number resumes in a run
# that names the type, and every mismatch is refused with one line.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v h5diff >/dev/null && command -v h5ls >/dev/null && command -v h5dump >/dev/null \
  || { fail "h5diff / h5ls / h5dump not found (apt-get install hdf5-tools)"; finish; }
make_corpus "$WORK/c.h5" 4000 300
# small_run_ini: 2 layers of width 32, 4 columns of 16 rows, 24 rows of memory, dropout and
# dropatt 0.1; the positional tables of types 1 and 3 have max_klen = 16 + 24 = 40 rows
small_run_ini "$WORK/c.h5" train.max_step=40 train.warmup_step=4 > "$WORK/r.ini"
train() { # NAME RANKS ARGS...: txl-train of r.ini into $WORK/NAME, output in $WORK/NAME.out
  local name=$1
  shift
  train_into "$name" "$WORK/r.ini" "$@"
}
# mean training loss of steps [a, b]
mean_loss() { python3 -c '
import json, sys
a, b = int(sys.argv[2]), int(sys.argv[3])
x = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train" and a <= r["step"] <= b]
print("%.4f" % (sum(x) / len(x)))' "$1/metrics.jsonl" "$2" "$3"; }
has_tensor() { h5ls "$1/params" | grep -q "^$2 "; }

# ---- each type trains; its checkpoint says which it is and holds its tensors only -----------
# The loss of these 40 steps starts near ln(65) = 4.17 (65 characters; 4.05 .. 4.08 over the first
# five steps) and falls by ~0.8 for every type (3.25 .. 3.26 over the last five): a fall of 0.2 in
# the means of the first and last five steps is far from both the noise of a 4 x 16 batch (~0.05)
# and a model that learns nothing.
declare -A TENSORS_IN=([0]="layers.0.w_r r_w_bias r_r_bias" [1]="layers.0.r_emb layers.0.r_bias layers.1.r_w_bias"
                       [2]="" [3]="layers.0.r_emb layers.1.r_emb")
declare -A TENSORS_OUT=([0]="layers.0.r_emb layers.0.r_bias" [1]="layers.0.w_r r_w_bias r_r_bias layers.0.r_r_bias"
                        [2]="layers.0.w_r r_w_bias r_r_bias layers.0.r_emb layers.0.r_w_bias"
                        [3]="layers.0.w_r r_w_bias r_r_bias layers.0.r_bias layers.0.r_w_bias")
declare -A NAME=([0]=rel [1]=shaw [2]=abs_sin [3]=abs_learned)
for t in 0 1 2 3; do
  train t$t 1 --set model.attn_type=$t || { cat "$WORK/t$t.out"; fail "attn_type $t: training failed"; continue; }
  first=$(mean_loss "$WORK/t$t" 1 5) last=$(mean_loss "$WORK/t$t" 36 40)
  python3 -c "import sys; sys.exit(0 if $last < $first - 0.2 else 1)" \
    && ok "attn_type $t: the loss falls, mean of steps 1-5 $first -> steps 36-40 $last" \
    || fail "attn_type $t: the loss does not fall enough ($first -> $last)"
  ck=$WORK/t$t/ckpt-00000040.h5
  h5dump -a /attn_type "$ck" | grep -q "(0): $t\$" && ok "attn_type $t: root attribute attn_type = $t" \
    || fail "attn_type $t: root attribute attn_type is not $t"
  "$BIN/txl-inspect" "$ck" > "$WORK/inspect$t.out" 2>&1 || fail "attn_type $t: txl-inspect failed"
  grep -q "^model  *n_layer 2, d_model 32, attn_type $t (model.attn_type = ${NAME[$t]})" "$WORK/inspect$t.out" \
    && ok "attn_type $t: txl-inspect shows it" || fail "attn_type $t: txl-inspect does not show attn_type $t"
  miss=""
  for n in ${TENSORS_IN[$t]}; do has_tensor "$ck" "$n" || miss="$miss $n"; done
  for n in ${TENSORS_OUT[$t]}; do has_tensor "$ck" "$n" && miss="$miss (extra) $n"; done
  [ -z "$miss" ] && ok "attn_type $t: the checkpoint holds its positional tensors and no other type's" \
    || fail "attn_type $t: checkpoint tensors:$miss"
  # txl-eval: the run's test loss again (same code, same parameters, same walk over the split)
  run_test=$(python3 -c '
import json, sys
print("%.6f" % [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "test"][-1])' "$WORK/t$t/metrics.jsonl")
  "$BIN/txl-eval" "$WORK/t$t" > "$WORK/e$t.out" 2>&1 || { cat "$WORK/e$t.out"; fail "attn_type $t: txl-eval failed"; continue; }
  e=$(sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p' "$WORK/e$t.out")
  [ "$e" = "$run_test" ] && ok "attn_type $t: txl-eval's test loss $e = the run's" \
    || fail "attn_type $t: txl-eval's test loss '$e' differs from the run's $run_test"
done

# ---- exact resume: memory (with type 2 and 3's in-place position adds), dropout, Adam ---------
for t in 1 2 3; do
  train straight$t 1 --set model.attn_type=$t --set train.max_step=20 --dump-params "$WORK/straight$t.bin" \
    || { cat "$WORK/straight$t.out"; fail "attn_type $t: straight run"; continue; }
  rc=0; train split$t 1 --set model.attn_type=$t --set train.max_step=20 --stop-at 9 || rc=$?
  [ $rc -eq 75 ] || { cat "$WORK/split$t.out"; fail "attn_type $t: --stop-at exit status $rc"; continue; }
  train split$t 1 --set model.attn_type=$t --set train.max_step=20 --resume "$WORK/split$t" --dump-params "$WORK/split$t.bin" \
    || { cat "$WORK/split$t.out"; fail "attn_type $t: resume"; continue; }
  if [ "$(train_losses "$WORK/straight$t")" = "$(train_losses "$WORK/split$t")" ]; then
    ok "attn_type $t: resumed at step 9, losses and gradient norms of all 20 steps identical"
  else
    diff <(train_losses "$WORK/straight$t") <(train_losses "$WORK/split$t") | head; fail "attn_type $t: losses differ"
  fi
  cmp -s "$WORK/straight$t.bin" "$WORK/split$t.bin" && ok "attn_type $t: final parameters bit-identical" \
    || fail "attn_type $t: final parameters differ"
done
# 1 -> 2 ranks, the same global batch (tolerance of tests/train/test_resume.sh: 2e-5 relative)
train x12 1 --set model.attn_type=3 --set train.max_step=20 --stop-at 9 || true
train x12 2 --set model.attn_type=3 --set train.max_step=20 --resume "$WORK/x12" || { cat "$WORK/x12.out"; fail "attn_type 3: 1 -> 2 ranks resume failed"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/x12" "$WORK/straight3" 2e-5 --kinds train --train-steps 20 \
  && ok "attn_type 3: 2 ranks continue a 1-rank run (losses within 2e-5)" || fail "attn_type 3: 1 -> 2 ranks losses differ"

# ---- the CUDA backend on the emulator (txl-train-emu, built with the CUDA backend): the runs of
# types 1-3 above, the same losses up to the tolerance of tests/cuda/test_train.sh's GPU = CPU
# comparison (3e-3 relative per loss over 30 Adam steps; these are 20) -------------------------
if [ -x "$BIN/txl-train-emu" ]; then
  for t in 1 2 3; do
    $MPI -n 1 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.work_dir="$WORK/emu$t" --set model.attn_type=$t       --set train.max_step=20 --set run.device=cuda > "$WORK/emu$t.out" 2>&1       || { cat "$WORK/emu$t.out"; fail "attn_type $t: the emulated CUDA run failed"; continue; }
    python3 "$SRC/tests/lib/compare_runs.py" "$WORK/emu$t" "$WORK/straight$t" 3e-3 --kinds train --train-steps 20       && ok "attn_type $t: the CUDA backend (emulated) trains as the CPU (losses within 3e-3)"       || fail "attn_type $t: the emulated CUDA run's losses differ from the CPU's"
  done
else
  echo "this build has no CUDA backend: the emulated CUDA runs are not made"
fi

# ---- refusals: one error line, non-zero exit -------------------------------------------------
ck1=$WORK/t1/ckpt-00000040.h5
expect_error_line "resume with another attn_type" "t1/ckpt-00000040.h5 was made by a model of another shape.*model.attn_type shaw -> abs_learned" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=3 --set run.work_dir="$WORK/bad" --resume "$ck1"
# the root attribute itself (the config text agrees, the attribute does not): refused, naming the file
cp "$ck1" "$WORK/other_type.h5"
"$BIN/test_ckpt" set-attr "$WORK/other_type.h5" attn_type 2 || fail "test_ckpt set-attr"
expect_error_line "checkpoint attribute attn_type 2, run attn_type 1" "other_type.h5.*model.attn_type = abs_sin \(2 in the original\), this run has shaw \(1\)" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=1 --set run.work_dir="$WORK/bad" --resume "$WORK/other_type.h5"
expect_error_line "txl-eval of a checkpoint whose attribute disagrees" "other_type.h5.*model.attn_type = abs_sin \(2 in the original\), this run has shaw \(1\)" -- \
  "$BIN/txl-eval" "$WORK/other_type.h5"
# a file written before the attribute existed is attn_type 0: a type 0 run resumes it, a type 1 run does not
cp "$WORK/t0/ckpt-00000040.h5" "$WORK/old0.h5" && cp "$ck1" "$WORK/old1.h5"
"$BIN/test_ckpt" del-attr "$WORK/old0.h5" attn_type && "$BIN/test_ckpt" del-attr "$WORK/old1.h5" attn_type \
  || fail "test_ckpt del-attr"
train old0 1 --resume "$WORK/old0.h5" --set train.max_step=42 \
  && ok "a checkpoint without attn_type (older files) resumes as attn_type 0" || { cat "$WORK/old0.out"; fail "old file resume"; }
# a checkpoint written before the names (its config text: attn_type = 1) resumes in a run that names
# the type: the resume compares the values the texts are read as
cp "$ck1" "$WORK/numbered.h5"
sed -E 's/^(attn_type +=) shaw( |$)/\1 1\2/' "$WORK/t1/config.ini" > "$WORK/numbered.ini"
grep -Eq '^attn_type += 1( |$)' "$WORK/numbered.ini" || fail "t1/config.ini has no 'attn_type = shaw' line"
"$BIN/test_ckpt" set-attr-str "$WORK/numbered.h5" config "$(cat "$WORK/numbered.ini")" || fail "test_ckpt set-attr-str"
train numbered 1 --resume "$WORK/numbered.h5" --set model.attn_type=shaw --set train.max_step=42 \
  && ok "a checkpoint whose config text says attn_type = 1 resumes with model.attn_type = shaw" \
  || { cat "$WORK/numbered.out"; fail "resume of a checkpoint with attn_type = 1 in its config text"; }
expect_error_line "a checkpoint without attn_type is attn_type 0" "old1.h5.*model.attn_type = rel \(0 in the original\), this run has shaw \(1\)" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=1 --set run.work_dir="$WORK/bad" --resume "$WORK/old1.h5"
expect_error "attn_type out of range" "model.attn_type: '4' is not one of rel\|shaw\|abs_sin\|abs_learned or their numbers 0-3" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=4 --set run.work_dir="$WORK/bad"
expect_error "attn_type 1 with bf16 activations" "model.attn_type = shaw \(1 in the original\) keeps its per-key bias r_bias in fp32.*run.precision = bf16 is not supported" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=1 --set run.device=cuda --set run.precision=bf16 --set run.work_dir="$WORK/bad"
expect_error "attn_type 3 with segments longer than its table" "train.tgt_len \+ train.mem_len = 40, but segments of 41 rows" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set model.attn_type=3 --set eval.eval_tgt_len=41 --set run.work_dir="$WORK/bad"
finish
