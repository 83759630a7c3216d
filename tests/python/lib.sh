# Shared by the txl package's tests (python/txl): tests/train/lib.sh (paths, the scratch folder, the
# character corpus, the checks), the Python that has PyTorch, h5py and NumPy (without them the test
# says so and exits 77: skipped), the package on its path, tiny training runs.
# Usage: source lib.sh BIN_DIR SOURCE_DIR
source "$(dirname "${BASH_SOURCE[0]}")/../train/lib.sh" "$1" "$2"
PY=${TXL_TORCH_PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, h5py, numpy' 2>/dev/null; then
  echo "SKIPPED: PyTorch/h5py not installed (torch, h5py and numpy for $PY; Debian: python3-torch python3-h5py)"
  exit 77
fi
CHECK=$SRC/tests/python/check.py

# A word-level corpus of the texts make_corpus wrote ($WORK/{train,valid,test}.txt): words seen
# once are left out (--min-freq 2), so that <unk> occurs.
make_word_corpus() { # OUT
  "$BIN/txl-prep" --mode word --min-freq 2 --quiet --train "$WORK/train.txt" --valid "$WORK/valid.txt" \
    --test "$WORK/test.txt" --out "$1"
}

# A tiny run (2 layers of width 32, dropout and dropatt 0.1, 30 steps of 4 columns of 16 rows with
# 16 of memory) into $WORK/NAME, its output in $WORK/NAME.out. Its evaluation settings all differ
# from training's (segments of 12 rows, 24 of memory, the clamp at 20, same_length, 3 columns),
# so that a loss that agrees with txl-eval's took them all. Further "section.key=value"
# arguments replace or add keys. The status is txl-train's.
tiny_run() { # NAME CORPUS [section.key=value ...]
  local name=$1 corpus=$2
  shift 2
  ini_sections data.corpus="$corpus" model.n_layer=2 model.d_model=32 model.n_head=2 model.d_head=16 \
    model.d_inner=64 model.dropout=0.1 model.dropatt=0.1 train.tgt_len=16 train.mem_len=16 train.batch_size=4 \
    train.max_step=30 train.lr=0.004 train.log_interval=10 train.eval_interval=0 eval.eval_tgt_len=12 \
    eval.eval_mem_len=24 eval.eval_clamp_len=20 eval.eval_same_length=true eval.eval_batch_size=3 \
    run.work_dir="$WORK/$name" "$@" > "$WORK/$name.ini"
  "$BIN/txl-train" "$WORK/$name.ini" > "$WORK/$name.out" 2>&1
}

# txl-eval's loss (nats, as printed) of a run on a split
txl_eval_loss() { # RUN SPLIT
  "$BIN/txl-eval" "$1" --split "$2" 2>&1 | sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p'
}

# Runs check.py's SUBCOMMAND; its "ok"/"FAIL" lines count as this test's checks.
py_checks() { # SUBCOMMAND ARGS...
  local out rc=0
  out=$("$PY" "$CHECK" "$@" 2>&1) || rc=$?
  printf '%s\n' "$out"
  CHECKS=$((CHECKS + $(printf '%s\n' "$out" | grep -c '^ok   ' || true)))
  local n_fail
  n_fail=$(printf '%s\n' "$out" | grep -c '^FAIL ' || true)
  CHECKS=$((CHECKS + n_fail))
  FAILS=$((FAILS + n_fail))
  if [ "$rc" -ne 0 ] && [ "$n_fail" -eq 0 ]; then fail "check.py $1 ended with status $rc"; fi
}
