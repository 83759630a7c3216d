#!/usr/bin/env bash
# Bad configs and command lines: one clear line on stderr, non-zero exit, on every rank.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 400 60
good=$WORK/good.ini
cat > "$good" <<INI
[data]
corpus = $WORK/c.h5
[model]
n_layer = 1
d_model = 16
n_head = 2
d_head = 8
d_inner = 32
[train]
tgt_len = 8
mem_len = 8
batch_size = 4
max_step = 2
[eval]
eval_batch_size = 2
max_eval_steps = 1
[run]
work_dir = $WORK/run
INI
"$BIN/txl-train" "$good" > "$WORK/good.out" 2>&1 && pass "the good config trains" || { cat "$WORK/good.out"; fail "the good config fails"; }

bad() { # NAME PATTERN INI-TEXT
  printf '%s\n' "$3" > "$WORK/bad.ini"
  expect_error "$1" "$2" "$BIN/txl-train" "$WORK/bad.ini"
}
bad "unknown key" "bad.ini:2: unknown key 'n_layers' in section \[model\]" $'[model]\nn_layers = 3'
bad "unknown section" "bad.ini:1: unknown section \[modle\]" $'[modle]\nn_layer = 3'
bad "wrong type" "bad.ini:2: model.n_layer: 'three' is not an integer" $'[model]\nn_layer = three'
bad "out of range" "bad.ini:2: model.dropout = 1.5 is out of range" $'[model]\ndropout = 1.5'
bad "bad enum" "train.scheduler: 'linear' is not one of cosine\|inv_sqrt\|constant" $'[train]\nscheduler = linear'
bad "bad bool" "model.pre_lnorm: 'maybe' is not a boolean" $'[model]\npre_lnorm = maybe'
bad "key outside a section" "bad.ini:1: key 'n_layer' outside any \[section\]" 'n_layer = 3'
bad "odd d_model" "d_model = 15 must be even" $'[model]\nd_model = 15'
bad "warmup beyond max_step" "warmup_step = 20 exceeds train.max_step = 10" $'[train]\nwarmup_step = 20\nmax_step = 10'
bad "missing corpus key" "data.corpus is not set" $'[model]\nn_layer = 1'
bad "missing corpus file" "nope.h5" $'[data]\ncorpus = '"$WORK"$'/nope.h5'
printf 'not an hdf5 file\n' > "$WORK/text.h5"
bad "corpus that is not HDF5" "text.h5" $'[data]\ncorpus = '"$WORK"$'/text.h5'
expect_error "missing config file" "nothere.ini: cannot open config" "$BIN/txl-train" "$WORK/nothere.ini"
expect_error "bad --set key" "--set model.n_layerz=2: unknown key" "$BIN/txl-train" "$good" --set model.n_layerz=2
expect_error "bad --set value" "model.n_layer = 0 is out of range" "$BIN/txl-train" "$good" --set model.n_layer=0
expect_error "unknown option" "unknown option '--frobnicate'" "$BIN/txl-train" "$good" --frobnicate
expect_error "vocabulary mismatch" "vocabulary of [0-9]+ tokens, but data.n_token = 7" "$BIN/txl-train" "$good" --set data.n_token=7
expect_error "corpus too short" "the train split \([0-9]+ tokens\) is too short for 4 columns of 100000\+1 tokens" \
  "$BIN/txl-train" "$good" --set train.tgt_len=100000
expect_error "same_length without memory" "same_length needs train.mem_len > 0" \
  "$BIN/txl-train" "$good" --set model.same_length=true --set train.mem_len=0
# every rank exits non-zero, nobody hangs: one column cannot be split over 2 ranks
if command -v mpirun >/dev/null; then
  expect_error "more ranks than columns" "batch_size = 1 is fewer columns than the 2 ranks" \
    timeout 120 mpirun -n 2 "$BIN/txl-train" "$good" --set train.batch_size=1
fi
# run.device = cuda where it cannot be had: a build without the CUDA backend, or no GPU visible
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  expect_error "run.device = cuda without a GPU" \
    "run.device = cuda: (this txl was built without the CUDA backend|.*no CUDA device visible)" \
    "$BIN/txl-train" "$good" --set run.device=cuda
fi
expect_error "bad run.precision" "run.precision: 'fp16' is not one of fp32.tf32.bf16" "$BIN/txl-train" "$good" --set run.precision=fp16
expect_error "bf16 on the CPU" "run.precision = bf16 needs run.device = cuda" "$BIN/txl-train" "$good" --set run.precision=bf16
if [ -x "$BIN/txl-train-emu" ] && command -v mpirun >/dev/null; then
  expect_error "emulated CUDA backend (one device) on 2 ranks" "2 ranks on this node but 1 GPU" \
    timeout 120 mpirun -n 2 "$BIN/txl-train-emu" "$good" --set run.device=cuda --set train.batch_size=2
fi
[ ! -e "$WORK/run/metrics.jsonl" ] || [ -s "$WORK/run/metrics.jsonl" ] && pass "no empty metrics file left" || fail "empty metrics file"
finish
