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
"$BIN/txl-train" "$good" > "$WORK/good.out" 2>&1 && ok "the good config trains" || { cat "$WORK/good.out"; fail "the good config fails"; }

bad() { # NAME PATTERN INI-TEXT
  printf '%s\n' "$3" > "$WORK/bad.ini"
  expect_error_line "$1" "$2" -- "$BIN/txl-train" "$WORK/bad.ini"
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
expect_error_line "missing config file" "nothere.ini: cannot open config" -- "$BIN/txl-train" "$WORK/nothere.ini"
# the parser: nothing read silently otherwise than written
bad "a key given twice" "bad.ini:3: model.n_layer is set twice, on lines 2 and 3" $'[model]\nn_layer = 3\nn_layer = 5'
printf '[data]\ncorpus = %s/c.h5\0.bak\n' "$WORK" > "$WORK/nul.ini"
expect_error_line "a NUL byte in a value" "nul.ini:2: NUL byte" -- "$BIN/txl-train" "$WORK/nul.ini"
bad "text after a section header" "bad.ini:1: malformed section header" $'[model] x\nn_layer = 3'
bad "trailing text after a number" "model.n_layer: '3x' is not an integer" $'[model]\nn_layer = 3x'
bad "a hex float" "train.lr: '0x1p-10' is not a decimal number" $'[train]\nlr = 0x1p-10'
bad "nan" "train.lr: 'nan' is not a decimal number" $'[train]\nlr = nan'
bad "1e999" "train.clip = 1e999 is out of range" $'[train]\nclip = 1e999'
bad "an unterminated quote" "bad.ini:2: run.sample_prompt: unterminated quote" $'[run]\nsample_prompt = "ROMEO'
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$good"; } > "$WORK/crlf.ini"
if "$BIN/txl-train" "$WORK/crlf.ini" --print-config > "$WORK/crlf.out" 2>&1 && grep -q '^n_layer *= 1 ' "$WORK/crlf.out"; then
  ok "a UTF-8 byte-order mark and CRLF line ends"
else
  fail "BOM + CRLF: $(head -c 300 "$WORK/crlf.out")"
fi
# values as written, not rounded by a printf
bad "a value shown as written" "train.beta1 = 0.9999999 is out of range \[0, 0.999999\]" $'[train]\nbeta1 = 0.9999999'
# ranges: values that make no work, NaN or an overflowing size
bad "max_eval_steps = 0" "bad.ini:2: eval.max_eval_steps = 0 evaluates no tokens" $'[eval]\nmax_eval_steps = 0'
bad "lr = 0" "bad.ini:2: train.lr = 0 would train nothing" $'[train]\nlr = 0'
bad "adam_eps = 0" "train.adam_eps = 0 is out of range \[1e-30, 1\]" $'[train]\nadam_eps = 0'
bad "an empty work_dir" "bad.ini:2: run.work_dir is empty" $'[run]\nwork_dir ='
bad "d_embed = 0" "model.d_embed = 0: an embedding needs a width" $'[model]\nd_embed = 0'
bad "segment rows beyond an int" "bad.ini:3: train.tgt_len 1048576 \+ train.mem_len 150 rows x 4096 columns on a rank = 4295581696 rows" \
  $'[train]\ntgt_len = 1048576\nbatch_size = 4096'
# beta2 = 0.99999999 is 1 in single precision: every parameter was NaN after the first step
expect_error_line "beta2 that is 1 as a float" "--set train.beta2=0.99999999: train.beta2 = 0.99999999 is out of range \[0, 0.9999999\]" -- \
  "$BIN/txl-train" "$good" --set train.beta2=0.99999999 --set run.work_dir="$WORK/beta2"
# --set errors name the --set, not the file
expect_error_line "a bad --set value names the --set" "^txl: error: --set train.lr=abc: train.lr: 'abc' is not a decimal number" -- \
  "$BIN/txl-train" "$good" --set train.lr=abc
expect_error_line "a combination a --set made bad names the --set" \
  "^txl: error: --set train.warmup_step=5: train.warmup_step = 5 exceeds train.max_step = 2" -- \
  "$BIN/txl-train" "$good" --set train.warmup_step=5
printf '[train]\nmax_step = 10\nwarmup_step = 20\n' > "$WORK/bad.ini"
expect_error_line "one made bad by the file names its line" "^txl: error: [^ ]*bad.ini:3: train.warmup_step = 20 exceeds" -- \
  "$BIN/txl-train" "$WORK/bad.ini"
expect_error_line "bad --set key" "--set model.n_layerz=2: unknown key" -- "$BIN/txl-train" "$good" --set model.n_layerz=2
expect_error_line "bad --set value" "model.n_layer = 0 is out of range" -- "$BIN/txl-train" "$good" --set model.n_layer=0
expect_error_line "unknown option" "unknown option '--frobnicate'" -- "$BIN/txl-train" "$good" --frobnicate
expect_error_line "vocabulary mismatch" "vocabulary of [0-9]+ tokens, but data.n_token = 7" -- "$BIN/txl-train" "$good" --set data.n_token=7
expect_error_line "corpus too short" "the train split \([0-9]+ tokens\) is too short for 4 columns of 100000\+1 tokens" -- \
  "$BIN/txl-train" "$good" --set train.tgt_len=100000
expect_error_line "same_length without memory" "same_length needs train.mem_len > 0" -- \
  "$BIN/txl-train" "$good" --set model.same_length=true --set train.mem_len=0
# every rank exits non-zero, nobody hangs: one column cannot be split over 2 ranks
if command -v mpirun >/dev/null; then
  expect_error_line "more ranks than columns" "batch_size = 1 is fewer columns than the 2 ranks" -- \
    timeout 120 mpirun -n 2 "$BIN/txl-train" "$good" --set train.batch_size=1
fi
# run.device = cuda where it cannot be had: a build without the CUDA backend, or no GPU visible
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  expect_error_line "run.device = cuda without a GPU" \
    "run.device = cuda: (this txl was built without the CUDA backend|.*no CUDA device visible)" -- \
    "$BIN/txl-train" "$good" --set run.device=cuda
fi
expect_error_line "bad run.precision" "run.precision: 'fp8' is not one of fp32.tf32.bf16.fp16" -- "$BIN/txl-train" "$good" --set run.precision=fp8
expect_error_line "bf16 on the CPU" "run.precision = bf16 needs run.device = cuda" -- "$BIN/txl-train" "$good" --set run.precision=bf16
expect_error_line "fp16 on the CPU" "run.precision = fp16 needs run.device = cuda" -- "$BIN/txl-train" "$good" --set run.precision=fp16
if [ -x "$BIN/txl-train-emu" ] && command -v mpirun >/dev/null; then
  expect_error_line "emulated CUDA backend (one device) on 2 ranks: both would use it" \
    "node-local ranks 0 and 1 would both compute on the GPU at PCI bus id 0000:10:00\\.0 \(each sees 1 GPU, the same\)" -- \
    timeout 120 mpirun -n 2 "$BIN/txl-train-emu" "$good" --set run.device=cuda --set train.batch_size=2
fi
# txl-eval's options take their keys' ranges (config.def): -2 is a clamp_len, -3 is not
if "$BIN/txl-eval" "$WORK/run" --clamp-len -2 --mem-len -1 --threads 0 --max-segments 1 > "$WORK/eval.out" 2>&1 \
  && grep -q "mem_len 8 clamp_len -1 " "$WORK/eval.out"; then
  ok "txl-eval --clamp-len -2 --mem-len -1 --threads 0: the training's clamp_len and mem_len, threads as txl-train"
else
  fail "txl-eval --clamp-len -2 --mem-len -1 --threads 0: $(tail -c 300 "$WORK/eval.out")"
fi
expect_error_line "txl-eval --clamp-len -3" "^txl: error: --clamp-len -3: eval.eval_clamp_len = -3 is out of range \[-2, 1073741824\]" -- \
  "$BIN/txl-eval" "$WORK/run" --clamp-len -3
expect_error_line "txl-eval --max-segments 0" "^txl: error: --max-segments 0: eval.max_eval_steps = 0" -- \
  "$BIN/txl-eval" "$WORK/run" --max-segments 0
expect_error_line "txl-eval --mem-len 0 --same-length names the option" \
  "^txl: error: --mem-len 0: eval.eval_same_length needs an evaluation memory" -- \
  "$BIN/txl-eval" "$WORK/run" --mem-len 8,0 --same-length
[ ! -e "$WORK/run/metrics.jsonl" ] || [ -s "$WORK/run/metrics.jsonl" ] && ok "no empty metrics file left" || fail "empty metrics file"
finish
