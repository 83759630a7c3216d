# The check library every shell test sources (directly, or through its folder's lib.sh). Every
# check prints one "ok   ..." or "FAIL ..." line; finish prints the count and exits non-zero
# when any failed. Messages are matched with extended regular expressions (grep -E): a literal
# '.', '[', '(', '*', '+', '?', '{', '|', '^' or '$' in a pattern is written escaped ('\.'), and
# re_quote STRING escapes a string taken as it is (a path). Safe under set -euo pipefail.
FAILS=0
CHECKS=0

# The [model] section's shape keys of the tests' small model (2 layers of d_model 32, 2 heads of
# 16, d_inner 64): the INI files of the shell tests write them through this, then their own keys.
small_model_shape() {
  printf 'n_layer = 2\nd_model = 32\nn_head = 2\nd_head = 16\nd_inner = 64\n'
}

# The config of the emulated GPU benchmarks (tests/cuda: test_bench_counts.sh, test_profile.sh):
# the small model with dropout and dropatt 0.1 over 500 tokens, 4 columns of 16 rows with 16 of
# memory, on run.device = cuda with one thread; written to FILE.
small_cuda_bench_ini() { # FILE
  { printf '[data]\nn_token = 500\n[model]\n'; small_model_shape
    printf 'dropout = 0.1\ndropatt = 0.1\n[train]\ntgt_len = 16\nmem_len = 16\nbatch_size = 4\n'
    printf '[run]\ndevice = cuda\nthreads = 1\n'; } > "$1"
}

ok() { CHECKS=$((CHECKS + 1)); echo "ok   $*"; }
fail() { CHECKS=$((CHECKS + 1)); FAILS=$((FAILS + 1)); echo "FAIL $*"; }

# re_quote STRING: STRING as an extended regular expression matching exactly itself
re_quote() { printf '%s' "$1" | sed 's/[][\.|$(){}?+*^]/\\&/g'; }

# check DESCRIPTION COMMAND...: passes when the command succeeds (its output is shown on failure)
check() {
  local what=$1
  shift
  local out
  if out=$("$@" 2>&1); then ok "$what"; else fail "$what   [command: $*]"; printf '%s\n' "$out" | sed 's/^/     | /'; fi
}

# check_eq DESCRIPTION GOT WANT
check_eq() {
  if [ "$2" == "$3" ]; then ok "$1 ($2)"; else fail "$1: got '$2', expected '$3'"; fi
}

# unmatched TEXT REGEX...: "; no /REGEX/ in the message" for each REGEX no line of TEXT matches
unmatched() {
  local text=$1 p
  shift
  for p in "$@"; do printf '%s\n' "$text" | grep -Eq -- "$p" || printf '; no /%s/ in the message' "$p"; done
}

# expect_error DESCRIPTION REGEX... -- COMMAND...
# The command must exit non-zero and print exactly one line to stderr, starting "txl: error: "
# and matching every REGEX.
expect_error() { error_check 1 "$@"; }

# expect_error_line DESCRIPTION REGEX... -- COMMAND...
# As expect_error, but other lines may go to stderr too (mpirun's, a tool's notices): exactly one
# of them starts "txl: error:", and each REGEX matches a line of stderr. The command's stdout and
# stderr are left in $WORK/out.txt and $WORK/err.txt.
expect_error_line() { error_check 0 "$@"; }

# error_check ONLY_LINE DESCRIPTION REGEX... -- COMMAND...: the two above (ONLY_LINE 1 or 0)
error_check() {
  local only=$1 what=$2
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local err rc=0
  if [ "$only" == 1 ]; then
    err=$("$@" 2>&1 >/dev/null) || rc=$?
  else
    "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" || rc=$?
    err=$(cat "$WORK/err.txt")
  fi
  local lines errors line bad=""
  lines=$(printf '%s' "$err" | grep -c '' || true)
  errors=$(printf '%s' "$err" | grep -c '^txl: error:' || true)
  line=$(printf '%s\n' "$err" | grep '^txl: error:' || true)
  [ $rc -ne 0 ] || bad="exit status 0"
  if [ "$only" == 1 ]; then
    [ "$lines" == 1 ] || bad="$bad; $lines lines on stderr"
    case "$err" in "txl: error: "*) ;; *) bad="$bad; not a 'txl: error:' line" ;; esac
  else
    [ "$errors" == 1 ] || bad="$bad; $errors 'txl: error:' lines"
  fi
  bad="$bad$(unmatched "$err" "${patterns[@]}")"
  if [ -z "$bad" ]; then ok "$what -> $line"; else fail "$what: ${bad#; }   [stderr: $(printf '%s' "$err" | head -c 400)]"; fi
}

finish() {
  echo "$CHECKS checks, $FAILS failed"
  if [ $FAILS -ne 0 ]; then echo FAILED; exit 1; fi
  # a test that checked nothing (its loops ran zero times) has shown nothing: not a pass
  if [ $CHECKS -eq 0 ]; then echo "FAILED: no check ran"; exit 1; fi
  echo PASSED
  exit 0
}
