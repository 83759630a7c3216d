# Shared by the txl-train tests: paths, a scratch folder, a small corpus and INI files; the checks
# are tests/lib/checks.sh's. Usage: source lib.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
source "$(dirname "${BASH_SOURCE[0]}")/../lib/checks.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

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
$(small_model_shape)
dropout = 0.1
dropatt = 0.1
INI
}

# The small run of the checkpoint and run-folder tests: small_model_ini's model, 4 columns of 16
# rows with 24 rows of memory, lr 0.003, no validation while training (3 segments at the end),
# no checkpoints but the last. Each further argument "section.key=value" ([train], [eval] or
# [run]) replaces or adds one key.
small_run_ini() { # CORPUS [section.key=value ...]
  small_model_ini "$1"
  shift
  ini_sections train.tgt_len=16 train.mem_len=24 train.batch_size=4 train.max_step=20 train.lr=0.003 \
    train.log_interval=1 train.eval_interval=0 eval.eval_tgt_len=16 eval.eval_batch_size=4 eval.max_eval_steps=3 \
    run.checkpoint_interval=0 "$@"
}

# INI sections from "section.key=value" arguments: sections and keys in the order they first
# appear, a later value of a key replacing an earlier one.
ini_sections() { # section.key=value ...
  python3 - "$@" <<'PY'
import sys
sections = {}
for a in sys.argv[1:]:
    key, value = a.split("=", 1)
    section, key = key.split(".", 1)
    sections.setdefault(section, {})[key] = value
for section, keys in sections.items():
    print(f"[{section}]")
    for k, v in keys.items():
        print(f"{k} = {v}")
PY
}

MPI="timeout 300 mpirun --oversubscribe --bind-to none"

# The run of the rank-equivalence tests (test_ranks.sh, tests/dist/test_two_nodes.sh):
# small_model_ini's model, 4 columns of 16 rows, 30 steps of lr 0.003 (5 of warm-up), the replica
# check after every step, 4 segments of validation at the end.
# Tolerances. Ranks change only the order of float sums: the weight-gradient sums over a rank's
# L*B/P rows and then over P ranks instead of over L*B rows (at most L*B + P = 68 terms, so a
# relative difference of at most 68 u = 4e-6 of each gradient sum, u = 2^-24). Through Adam
# (whose update m / sqrt(v) moves by at most about twice that relatively) over 30 steps of
# lr <= 3e-3, a parameter moves by at most 30 * 3e-3 * 2 * 4e-6 = 7e-7 from the 1-rank run,
# against parameters of scale ~1: TOL_PARAM_RANKS = 1e-5 relative to each run's largest
# parameter. The losses (printed with 6 decimals, ~3 nats) follow the parameters: TOL_LOSS_RANKS =
# 2e-5 relative.
TOL_LOSS_RANKS=2e-5
TOL_PARAM_RANKS=1e-5
ranks_ini() { # CORPUS
  small_model_ini "$1"
  cat <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
max_step = 30
lr = 0.003
warmup_step = 5
log_interval = 1
eval_interval = 0
[eval]
eval_tgt_len = 16
eval_batch_size = 4
max_eval_steps = 4
[dist]
# every step: all ranks must hold bit-identical parameters (else the run stops with an error)
check_replicas = 1
# small buckets: several per layer, sizes that do not divide the layers
bucket_mb = 0.01
INI
}

# "STEP LOSS GRAD_NORM" of each train line of a run folder's metrics.jsonl, the numbers as Python
# prints them (exact)
train_losses() { python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "train": print(r["step"], repr(r["loss"]), repr(r["grad_norm"]))' "$1/metrics.jsonl"; }

# txl-train of INI on RANKS ranks into $WORK/NAME, its output in $WORK/NAME.out; the status is
# txl-train's.
train_into() { # NAME INI RANKS ARGS...
  local name=$1 conf=$2 p=$3
  shift 3
  $MPI -n "$p" "$BIN/txl-train" "$conf" --set run.work_dir="$WORK/$name" "$@" > "$WORK/$name.out" 2>&1
}

# A run at a real size for the stop tests: d_model 512, 4 layers, 128 rows with 128 of memory on
# 4 columns (13.7M parameters: a checkpoint of 160 MiB, a step of about a second on a 2-core
# machine), logging every step, no validation, no checkpoint but the ones asked for.
big_run_ini() { # CORPUS [section.key=value ...]
  local corpus=$1
  shift
  ini_sections data.corpus="$corpus" model.n_layer=4 model.d_model=512 model.n_head=8 model.d_head=64 \
    model.d_inner=2048 train.tgt_len=128 train.mem_len=128 train.batch_size=4 train.max_step=1000 \
    train.log_interval=1 train.eval_interval=0 eval.max_eval_steps=2 run.checkpoint_interval=0 run.threads=1 "$@"
}

# Waits up to SECONDS for a line of FILE matching REGEX (grep -E); status 1 if none came.
wait_line() { # FILE REGEX SECONDS
  local i
  for i in $(seq $(($3 * 10))); do grep -Eq -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# The run folder DIR after a stop that OUT reports: its `latest` names the checkpoint of the last
# step OUT's progress lines show, of at least 150 MiB, which txl-inspect --verify reads back whole.
# SIGNALS is the signal the stop line names, or alternatives (grep -E) where two may arrive first.
check_stopped_run() { # WHAT DIR OUT SIGNALS
  local what=$1 dir=$2 out=$3 sig=$4 last stopped name size
  last=$(sed -n 's/^step *\([0-9]*\)\/.*/\1/p' "$out" | tail -n 1)
  stopped=$(sed -En "s/^stopped after step ([0-9]+) \(($sig)\): checkpoint of step \1 written.*exit status 75 \(requeue\)$/\1/p" "$out")
  name=$(cat "$dir/latest" 2>/dev/null || true)
  size=$(stat -c %s "$dir/${name##*/}" 2>/dev/null || echo 0)
  if [ -n "$stopped" ] && [ "$stopped" = "$last" ] && [ "${name##*/}" = "$(printf 'ckpt-%08d.h5' "$stopped")" ] \
     && [ "$size" -ge $((150 * 1048576)) ] && "$BIN/txl-inspect" --verify "$dir/${name##*/}" > "$out.verify" 2>&1; then
    ok "$what: stopped after step $stopped, the last one logged; latest = ${name##*/}, $((size / 1048576)) MiB, verified whole"
  else
    fail "$what: last logged step '$last', stop line step '$stopped', latest '$name', $size bytes"
    grep -v '^step' "$out" | tail -n 8 | sed 's/^/     | /'
    tail -n 3 "$out.verify" 2>/dev/null | sed 's/^/     | /'
  fi
}
