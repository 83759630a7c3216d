#!/usr/bin/env bash
# Whole training runs, txl against PyTorch, timed from start to exit: the tiny shape
# (configs/bench/tiny.ini: 4 layers of 32, 8 columns of 33, memory 41) on a real word-level corpus
# cut to its 10,000 most frequent words (txl-prep --mode word --max-size 10000), MAX_STEP steps,
# the whole validation split evaluated every MAX_STEP/4 steps and at the end, a checkpoint at the
# same steps, then the test split: what a user's run does, evaluations, checkpoints and start-up
# included, not the training step alone (scripts/bench-cpu.sh times that).
#   txl:     txl-train in two layouts with THREADS cores in all, one process of THREADS threads
#            (1xT) and THREADS ranks of one thread (Tx1);
#   PyTorch: tests/reference/train_ref.py (the original's train.py loop over the reference model,
#            one process of THREADS threads, PyTorch's best layout for tiny in scripts/bench-cpu.sh),
#            with $TORCH_PYTHON (default python3; it needs h5py).
# Prints each run's wall time and trained tokens per wall second, its last validation and test
# loss (the runs train the same model on the same tokens, so these should be alike, not equal:
# the initialisations and dropout masks differ), then the best txl layout against PyTorch.
#   scripts/bench-e2e.sh CORPUS_DIR [THREADS] [MAX_STEP]
# CORPUS_DIR holds wiki.{train,valid,test}.tokens (the WikiText layout) or {train,valid,test}.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/env.sh"
dir=${1:?usage: scripts/bench-e2e.sh CORPUS_DIR [THREADS] [MAX_STEP]}
threads=${2:-2}
steps=${3:-4000}
py=${TORCH_PYTHON:-python3}
interval=$(( steps / 4 > 0 ? steps / 4 : 1 ))
split() { # NAME: the file of that split in $dir
  for f in "$dir/wiki.$1.tokens" "$dir/$1.txt"; do [ -f "$f" ] && { echo "$f"; return; }; done
  echo "bench-e2e: no $1 split in $dir (wiki.$1.tokens or $1.txt)" >&2
  exit 1
}
train_txt=$(split train) valid_txt=$(split valid) test_txt=$(split test)
"$here/build.sh" > /dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$TXL_BUILD/bin/txl-prep" --mode word --max-size 10000 --quiet --train "$train_txt" --valid "$valid_txt" \
  --test "$test_txt" --out "$out/corpus.h5"
echo "corpus: $dir, word level, 10,000 words; $steps steps, validation and a checkpoint every $interval, then test"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $threads threads in all"
now() { date +%s.%N; }
tokens=0 # trained tokens of a run: steps x columns x rows, from txl-train's "columns:" line (PyTorch's run trains the same shape)
report() { # NAME SECONDS VALID TEST
  awk -v n="$1" -v s="$2" -v v="$3" -v t="$4" -v tok="$tokens" \
    'BEGIN { printf "%-22s %8.1f s  %8.0f tok/s end to end  valid loss %s  test loss %s\n", n, s, tok / s, v, t }'
}
best_txl=0
for lay in "1x$threads" "${threads}x1"; do
  procs=${lay%x*} per=${lay#*x}
  t0=$(now)
  OMP_NUM_THREADS=$per mpirun -n "$procs" --bind-to none "$TXL_BUILD/bin/txl-train" "$TXL_ROOT/configs/bench/tiny.ini" \
    --set data.corpus="$out/corpus.h5" --set train.max_step="$steps" --set train.eval_interval="$interval" \
    --set run.checkpoint_interval="$interval" --set train.log_interval="$interval" \
    --set eval.eval_batch_size=8 --set eval.eval_tgt_len=33 --set run.threads="$per" \
    --set run.work_dir="$out/txl-$lay" > "$out/txl-$lay.txt" 2>&1 ||
    { cat "$out/txl-$lay.txt"; echo "bench-e2e: txl-train $lay failed"; exit 1; }
  s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  shape=$(sed -n 's/^columns: \([0-9]*\) global.*; \([0-9]*\) rows per step.*/\1 \2/p' "$out/txl-$lay.txt")
  [ -n "$shape" ] || { echo "bench-e2e: no 'columns:' line from txl-train"; exit 1; }
  tokens=$(( steps * ${shape% *} * ${shape#* } ))
  v=$(sed -n 's/^valid at step .* | loss \([0-9.]*\) .*/\1/p' "$out/txl-$lay.txt" | tail -n 1)
  t=$(sed -n 's/^test at step .* | loss \([0-9.]*\) .*/\1/p' "$out/txl-$lay.txt" | tail -n 1)
  report "txl $lay" "$s" "$v" "$t"
  best_txl=$(awk -v a="$best_txl" -v s="$s" 'BEGIN { print (a == 0 || s < a) ? s : a }')
done
t0=$(now)
OMP_NUM_THREADS=$threads "$py" "$TXL_ROOT/tests/reference/train_ref.py" --corpus "$out/corpus.h5" --config tiny \
  --max-step "$steps" --eval-interval "$interval" --checkpoint-interval "$interval" --eval-batch-size 8 \
  --out-dir "$out/ref" --threads "$threads" > "$out/ref.txt" 2>&1 ||
  { cat "$out/ref.txt"; echo "bench-e2e: train_ref.py failed"; exit 1; }
s=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
line=$(tail -n 1 "$out/ref.txt")
v=$(sed -n 's/.*valid loss \([0-9.]*\),.*/\1/p' <<< "$line")
t=$(sed -n 's/.*test loss \([0-9.]*\) .*/\1/p' <<< "$line")
report "PyTorch 1x$threads" "$s" "$v" "$t"
echo "($(sed -n 's/.*(\(torch [^)]*\)).*/\1/p' <<< "$line"); its wall time includes the interpreter's start and imports)"
awk -v a="$best_txl" -v b="$s" 'BEGIN { printf "txl best layout against PyTorch, whole runs: %.2fx\n", b / a }'
