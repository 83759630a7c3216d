# Helpers for the shell tests of tests/data (sourced). Every check prints one "ok"/"FAIL" line;
# finish exits non-zero when any failed.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"

# no_leftovers DESCRIPTION DIR PREFIX: no file DIR/PREFIX* exists (output or temporary)
no_leftovers() {
  local left
  left=$(cd "$2" && ls -d "$3"* 2>/dev/null)
  if [ -z "$left" ]; then ok "$1: no output or temporary file left"; else fail "$1: left behind: $left"; fi
}

