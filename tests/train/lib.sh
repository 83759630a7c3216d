# Shared by the txl-train tests: paths, a scratch folder, a small corpus, and checks that fail
# loudly. Usage: source lib.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
PASSED=0
FAILED=0

pass() { echo "PASS: $*"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

# A character-level corpus from the bundled demo text: the first N lines of each split.
make_corpus() { # OUT TRAIN_LINES VALID_LINES
  local d=$SRC/data/demo/tinyshakespeare
  head -n "$2" "$d/train.txt" > "$WORK/train.txt"
  head -n "$3" "$d/valid.txt" > "$WORK/valid.txt"
  head -n "$3" "$d/test.txt" > "$WORK/test.txt"
  "$BIN/txl-prep" --mode char --quiet --train "$WORK/train.txt" --valid "$WORK/valid.txt" \
    --test "$WORK/test.txt" --out "$1"
}

# The small model the rank and resume tests train ([data] and [model] of an INI file): 2 layers,
# width 32, dropout and dropatt on. Sections after it come from the caller.
small_model_ini() { # CORPUS
  cat <<INI
[data]
corpus = $1
[model]
n_layer = 2
d_model = 32
n_head = 2
d_head = 16
d_inner = 64
dropout = 0.1
dropatt = 0.1
INI
}

MPI="timeout 300 mpirun --oversubscribe --bind-to none"

# expect_error NAME PATTERN CMD...: CMD must exit non-zero and print exactly one line to stderr,
# matching PATTERN (extended regex), starting with "txl: error:".
expect_error() {
  local name=$1 pattern=$2
  shift 2
  local rc=0
  "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" || rc=$?
  local lines
  lines=$(grep -c '^txl: error:' "$WORK/err.txt" || true)
  if [ "$rc" -eq 0 ]; then
    fail "$name: exit status 0"
  elif [ "$lines" -ne 1 ]; then
    fail "$name: expected one 'txl: error:' line, got $lines: $(head -c 400 "$WORK/err.txt")"
  elif ! grep -Eq -- "$pattern" "$WORK/err.txt"; then
    fail "$name: message does not match /$pattern/: $(cat "$WORK/err.txt")"
  else
    pass "$name ($(grep '^txl: error:' "$WORK/err.txt"))"
  fi
}

finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
