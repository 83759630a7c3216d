# Helpers for the shell tests of tests/checkpoint (sourced). Every check prints one "ok"/"FAIL"
# line; finish exits non-zero when any failed.
#   script arguments: TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
set -u
TOOL=$1 INSPECT=$2 MPIEXEC=$3 WORK=$4
source "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ulimit -c 0 2>/dev/null   # the crash test aborts on purpose: no core files


# mpi NP ARGS...: the test driver on NP ranks
mpi() {
  local np=$1
  shift
  local extra=""
  [ "$np" -gt 2 ] && extra=--oversubscribe
  "$MPIEXEC" -n "$np" $extra "$TOOL" "$@"
}


# run_driver DESCRIPTION COMMAND...: the driver prints its own ok/FAIL lines; passes when it
# exits 0
run_driver() {
  local what=$1
  shift
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -E '^(ok|FAIL) ' | sed 's/^/  /'
  if [ $rc -eq 0 ]; then ok "$what"; else
    fail "$what (exit $rc)   [command: $*]"
    printf '%s\n' "$out" | grep -vE '^(ok|FAIL) ' | tail -20 | sed 's/^/     | /'
  fi
}

# absent DESCRIPTION FILE...: none of the files exists
absent() {
  local what=$1 f left=""
  shift
  for f in "$@"; do [ -e "$f" ] && left="$left $f"; done
  if [ -z "$left" ]; then ok "$what"; else fail "$what: left behind:$left"; fi
}

# expect_error DESCRIPTION "PATTERN|..." -- COMMAND...
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


rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
