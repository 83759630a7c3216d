# Check helpers shared by the shell tests of tests/data and tests/checkpoint (sourced by their
# lib.sh). Every check prints one "ok"/"FAIL" line; finish exits non-zero when any failed.
FAILS=0
CHECKS=0

ok() { CHECKS=$((CHECKS + 1)); echo "ok   $*"; }
fail() { CHECKS=$((CHECKS + 1)); FAILS=$((FAILS + 1)); echo "FAIL $*"; }

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

# expect_error DESCRIPTION "PATTERN..." -- COMMAND...
# The command must exit non-zero and print exactly one line to stderr, starting "txl: error:" and
# containing every PATTERN (fixed strings, separated by '|').
expect_error() {
  local what=$1 patterns=$2
  shift 3
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c '')
  local bad=""
  [ $rc -ne 0 ] || bad="exit status 0"
  [ "$lines" == 1 ] || bad="$bad; $lines lines on stderr"
  case "$err" in "txl: error: "*) ;; *) bad="$bad; not a 'txl: error:' line" ;; esac
  local IFS='|'
  for p in $patterns; do
    case "$err" in *"$p"*) ;; *) bad="$bad; no '$p' in the message" ;; esac
  done
  if [ -z "$bad" ]; then ok "$what -> $err"; else fail "$what: ${bad#; }   [stderr: $err]"; fi
}

finish() {
  echo "$CHECKS checks, $FAILS failed"
  if [ $FAILS -ne 0 ]; then echo FAILED; exit 1; fi
  echo PASSED
  exit 0
}
