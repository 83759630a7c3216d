# Helpers for the shell tests of tests/checkpoint (sourced), on top of tests/lib/checks.sh's
# checks.
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

rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
