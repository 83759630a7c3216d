#!/usr/bin/env bash
# txl-eval: a checkpoint evaluated with the training run's test settings reproduces the run's
# own test loss; 2 and 4 ranks agree with 1 within the summation-order tolerance; a memory sweep
# prints one line per length and its mem_len 0 line equals a separate --mem-len 0 run; bad input
# is a one-line error.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 3000 200
{ small_model_ini "$WORK/c.h5"; cat <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
max_step = 40
lr = 0.004
log_interval = 20
eval_interval = 0
[eval]
eval_tgt_len = 12
eval_mem_len = 24
eval_batch_size = 4
[run]
work_dir = $WORK/run
INI
} > "$WORK/run.ini"
"$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training failed"; finish; }
run_test=$(python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%.6f" % [r["loss"] for r in rows if r["kind"] == "test"][-1])' "$WORK/run/metrics.jsonl")

loss_of() { sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p' "$1"; }
"$BIN/txl-eval" "$WORK/run" > "$WORK/e1.out" 2>&1 || { cat "$WORK/e1.out"; fail "txl-eval failed"; finish; }
cat "$WORK/e1.out"
e1=$(loss_of "$WORK/e1.out")
# the run's test loss (metrics.jsonl) against txl-eval's, both printed with 6 decimals: same code,
# same parameters, same walk over the split: the same figure
if [ "$e1" = "$run_test" ]; then
  ok "txl-eval's test loss $e1 = the run's $run_test"
else
  fail "txl-eval's test loss $e1 differs from the run's $run_test"
fi
# Other rank counts: the same parameters and columns, but each rank's products have L * B / P
# rows instead of L * B, and BLAS may then pick other kernels and another order of each dot
# product's terms (the CPU's kind decides: AVX2 and AVX-512 builds of OpenBLAS differ). A logit
# is the end of a chain of about 600 products' terms here (2 layers of projections of 32
# features, scores of 16, 24 keys, FFN of 32 and 64, the output layer), so the two orders differ
# by at most ~600 u = 3.6e-5 relative and typically by sqrt(600) u = 1.5e-6 (u = 2^-24, random
# signs); the loss, log-sum-exp minus the target's logit, averages those over 2,000 tokens.
# TOL = 2e-5 relative: 10x the typical difference, below the worst case of a single logit.
for p in 2 4; do
  $MPI -n $p "$BIN/txl-eval" "$WORK/run" > "$WORK/e$p.out" 2>&1 || { cat "$WORK/e$p.out"; fail "txl-eval on $p ranks failed"; continue; }
  ep=$(loss_of "$WORK/e$p.out")
  python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 2e-5 * b else 1)" \
    "$ep" "$e1" && ok "$p ranks: loss $ep, 1 rank: $e1 (within 2e-5 relative)" || fail "$p ranks: loss $ep, 1 rank: $e1"
done

"$BIN/txl-eval" "$WORK/run" --split valid --tgt-len 8 --mem-len 0,8,32 --clamp-len 20 --same-length \
  --batch-size 2 > "$WORK/sweep.out" 2>&1 || true
# same_length with no memory is refused by the config check, so the sweep must fail as a whole
if grep -q "eval_same_length needs an evaluation memory" "$WORK/sweep.out"; then
  ok "same_length with mem_len 0 in a sweep is refused"
else
  fail "same_length with mem_len 0 accepted: $(cat "$WORK/sweep.out")"
fi
"$BIN/txl-eval" "$WORK/run" --split valid --tgt-len 8 --mem-len 0,8,32 --clamp-len 20 --batch-size 2 \
  > "$WORK/sweep.out" 2>&1 || { cat "$WORK/sweep.out"; fail "memory sweep failed"; finish; }
cat "$WORK/sweep.out"
lines=$(grep -c "^tgt_len 8 mem_len [0-9]* clamp_len 20 same_length 0 batch 2: loss" "$WORK/sweep.out" || true)
[ "$lines" -eq 3 ] && ok "memory sweep: 3 lines" || fail "memory sweep: $lines lines"
"$BIN/txl-eval" "$WORK/run" --split valid --tgt-len 8 --mem-len 0 --clamp-len 20 --batch-size 2 > "$WORK/m0.out" 2>&1
s0=$(grep "mem_len 0 " "$WORK/sweep.out" | sed 's/ | .*//') m0=$(grep "mem_len 0 " "$WORK/m0.out" | sed 's/ | .*//')
[ -n "$s0" ] && [ "$s0" = "$m0" ] && ok "sweep's mem_len 0 line = a lone --mem-len 0 run" || fail "'$s0' vs '$m0'"
python3 - "$WORK/sweep.out" <<'PY' && ok "valid bpc printed for a character corpus" || fail "no bpc"
import re, sys
sys.exit(0 if re.search(r"loss [0-9.]+ nats, bpc [0-9.]+", open(sys.argv[1]).read()) else 1)
PY

# bad input
mkdir -p "$WORK/empty"
expect_error_line "no checkpoint in the folder" "empty: no checkpoint" -- "$BIN/txl-eval" "$WORK/empty"
expect_error_line "missing file" "nope.h5" -- "$BIN/txl-eval" "$WORK/nope.h5"
expect_error_line "not a checkpoint" "c.h5" -- "$BIN/txl-eval" "$WORK/c.h5"
expect_error_line "unknown split" "--split bogus" -- "$BIN/txl-eval" "$WORK/run" --split bogus
expect_error_line "bad memory list" "--mem-len x" -- "$BIN/txl-eval" "$WORK/run" --mem-len 8,x
expect_error_line "unknown option" "--frobnicate" -- "$BIN/txl-eval" "$WORK/run" --frobnicate
expect_error_line "fewer columns than ranks" "eval_batch_size = 1 is fewer columns than the 2 ranks" -- \
  $MPI -n 2 "$BIN/txl-eval" "$WORK/run" --batch-size 1
# a corpus with another vocabulary (bytes: 256 symbols)
printf 'hello world\n%.0s' $(seq 200) > "$WORK/b.txt"
"$BIN/txl-prep" --mode byte --quiet --train "$WORK/b.txt" --valid "$WORK/b.txt" --test "$WORK/b.txt" --out "$WORK/b.h5"
expect_error_line "corpus of another vocabulary" "b.h5: vocabulary of [0-9]+ tokens, but the checkpoint's model has" -- \
  "$BIN/txl-eval" "$WORK/run" --corpus "$WORK/b.h5"
"$BIN/txl-eval" --help | grep -q -- "--mem-len N\[,N...\]" && ok "--help lists the options" || fail "--help"
finish
