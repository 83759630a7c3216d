# The check library every shell test sources (directly, or through its folder's lib.sh). Every
# check prints one "ok   ..." or "FAIL ..." line; finish prints the count and exits non-zero
# when any failed. Messages are matched with extended regular expressions (grep -E): a literal
# '.', '[', '(', '*', '+', '?', '{', '|', '^' or '$' in a pattern is written escaped ('\.'), and
# re_quote STRING escapes a string taken as it is (a path). Safe under set -euo pipefail.
FAILS=0
CHECKS=0

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

# expect_error DESCRIPTION REGEX... -- COMMAND...
# The command must exit non-zero and print exactly one line to stderr, starting "txl: error: "
# and matching every REGEX.
expect_error() {
  local what=$1
  shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local err rc=0
  err=$("$@" 2>&1 >/dev/null) || rc=$?
  local lines
  lines=$(printf '%s' "$err" | grep -c '' || true)
  local bad="" p
  [ $rc -ne 0 ] || bad="exit status 0"
  [ "$lines" == 1 ] || bad="$bad; $lines lines on stderr"
  case "$err" in "txl: error: "*) ;; *) bad="$bad; not a 'txl: error:' line" ;; esac
  for p in "${patterns[@]}"; do
    printf '%s\n' "$err" | grep -Eq -- "$p" || bad="$bad; no /$p/ in the message"
  done
  if [ -z "$bad" ]; then ok "$what -> $err"; else fail "$what: ${bad#; }   [stderr: $err]"; fi
}

# expect_error_line DESCRIPTION REGEX... -- COMMAND...
# As expect_error, but other lines may go to stderr too (mpirun's, a tool's notices): exactly one
# of them starts "txl: error:", and each REGEX matches a line of stderr. The command's stdout and
# stderr are left in $WORK/out.txt and $WORK/err.txt.
expect_error_line() {
  local what=$1
  shift
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local rc=0
  "$@" > "$WORK/out.txt" 2> "$WORK/err.txt" || rc=$?
  local lines p
  lines=$(grep -c '^txl: error:' "$WORK/err.txt" || true)
  if [ "$rc" -eq 0 ]; then
    fail "$what: exit status 0"
  elif [ "$lines" -ne 1 ]; then
    fail "$what: expected one 'txl: error:' line, got $lines: $(head -c 400 "$WORK/err.txt")"
  else
    for p in "${patterns[@]}"; do
      if ! grep -Eq -- "$p" "$WORK/err.txt"; then
        fail "$what: message does not match /$p/: $(cat "$WORK/err.txt")"
        return 0
      fi
    done
    ok "$what -> $(grep '^txl: error:' "$WORK/err.txt")"
  fi
}

finish() {
  echo "$CHECKS checks, $FAILS failed"
  if [ $FAILS -ne 0 ]; then echo FAILED; exit 1; fi
  echo PASSED
  exit 0
}
