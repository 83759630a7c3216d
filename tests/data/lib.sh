# Helpers for the shell tests of tests/data (sourced), on top of tests/lib/checks.sh's checks.
set -u
source "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"

# no_leftovers DESCRIPTION DIR PREFIX: no file DIR/PREFIX* exists (output or temporary)
no_leftovers() {
  local left
  left=$(cd "$2" && ls -d "$3"* 2>/dev/null)
  if [ -z "$left" ]; then ok "$1: no output or temporary file left"; else fail "$1: left behind: $left"; fi
}


# mpi_expect_error DESCRIPTION P REGEX... -- COMMAND...
# COMMAND on P ranks (mpirun) must end the way a bad input ends a job: exactly one "txl: error:"
# line in its output, matching every REGEX (extended regular expressions), nothing of
# MPI_Abort's ("MPI_ABORT", Open MPI's "Data unpack would read past end of buffer"), and exit
# status 1 on every rank (each rank's status is written by a shell around it: a rank killed by an
# abort writes none). The command's stdout is left in $WORK/mpi.stdout.
mpi_expect_error() {
  local what=$1 np=$2
  shift 2
  local patterns=()
  while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
  shift
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/txl-mpi.XXXXXX")
  # shellcheck disable=SC2016
  timeout 300 mpirun -n "$np" --oversubscribe --bind-to none \
    bash -c '"$@"; echo $? > "'"$dir"'/rc.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}"' rank "$@" \
    > "$WORK/mpi.stdout" 2> "$dir/stderr"
  local err bad="" lines statuses=""
  err=$(cat "$dir/stderr")
  lines=$(grep -c '^txl: error:' "$dir/stderr")
  [ "$lines" == 1 ] || bad="$bad; $lines 'txl: error:' lines"
  case "$err" in *MPI_ABORT* | *"Data unpack"*) bad="$bad; MPI_Abort's output" ;; esac
  local r
  for r in $(seq 0 $((np - 1))); do
    if [ -f "$dir/rc.$r" ]; then statuses="$statuses $(cat "$dir/rc.$r")"; else statuses="$statuses none"; fi
  done
  [ "$statuses" == "$(printf ' 1%.0s' $(seq 1 "$np"))" ] || bad="$bad; exit statuses of the ranks:$statuses"
  local line
  line=$(grep '^txl: error:' "$dir/stderr" | head -n 1)
  bad="$bad$(unmatched "$line" "${patterns[@]}")"
  if [ -z "$bad" ]; then
    ok "$what -> $line (every rank exit 1)"
  else
    fail "$what: ${bad#; }"
    sed 's/^/     | /' "$dir/stderr" | head -n 30
  fi
  rm -rf "$dir"
}

# short_run_and_sample CORPUS WHAT [MODEL_LINE...]: trains 20 steps of a small model on CORPUS
# (one process, into $WORK/run; MODEL_LINEs added to [model]), checks that it ran and reports its
# losses as perplexity (a subword corpus), and defines gen ARGS..., which prints txl-generate's text
# of that run (60 tokens, seed 7) without its last (statistics) line. Ends the test when training fails.
short_run_and_sample() {
  local corpus=$1 what=$2
  shift 2
  {
    printf '[data]\ncorpus = %s\n[model]\n%s\n' "$corpus" "$(small_model_shape)"
    printf '%s\n' "$@"
    printf '[train]\ntgt_len = 16\nmem_len = 16\nbatch_size = 4\nmax_step = 20\nlr = 0.004\n'
    printf 'log_interval = 10\neval_interval = 0\n[eval]\neval_tgt_len = 16\nmax_eval_steps = 3\n'
    printf '[run]\nwork_dir = %s\ncheckpoint_interval = 0\n' "$WORK/run"
  } > "$WORK/run.ini"
  if "$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1; then ok "txl-train $what"; else
    fail "txl-train failed"; tail -20 "$WORK/train.out" | sed 's/^/     | /'; finish; fi
  grep -Eq "^valid at step 20 \| loss [0-9.]+ \| ppl [0-9.]+" "$WORK/train.out" && ok "losses as perplexity (subwords)" ||
    fail "no perplexity: $(grep '^valid' "$WORK/train.out")"
  gen() { "$BIN/txl-generate" "$WORK/run" --length 60 --seed 7 "$@" 2> "$WORK/gen.err" | sed '$d'; }
}
