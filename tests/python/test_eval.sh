#!/usr/bin/env bash
# txl.load(...)'s log-probabilities, walked over the valid and test splits as txl evaluates them
# (model.evaluate: columns, segments, the memory carried), give txl-eval's losses, for every
# attention type (rel, shaw, abs_sin, abs_learned) on the character corpus, for the adaptive
# input and softmax (3 clusters, div_val 2, projections) and for a word-level corpus with <unk>;
# in train mode (txl's dropout masks) the losses txl-train logged.
source "$(dirname "$0")/lib.sh" "$1" "$2"

# Tolerance, relative, as tests/train/test_interop.sh derives it for the same arithmetic (the
# package's model is the reference's, in float32, txl's in float32 with other summation orders):
#  - txl-eval prints the loss with 6 decimals: up to 5e-7 nats off, ~1.5e-7 relative at ~3.4 nats;
#  - each side's per-token loss is within ~1.5e-6 nats of the exact one (logits of a few units,
#    float32 sums over at most d_inner = 64 terms); the mean over the ~5,700 (valid) / ~4,500
#    (test) scored tokens is off by no more than that even when every error has the same sign:
#    both sides <= ~3e-6 nats, with the rounding ~3.5e-6 nats, ~1e-6 relative.
# 5e-6 leaves a 5x margin. The memory left out (mem_len=0) moves the loss by far more (2.7e-3 to
# 9.2e-3 relative seen for rel, shaw, abs_learned, the adaptive and the word runs), which is
# checked for those; after 30 steps abs_sin's attention makes little of the memory (2.6e-6
# seen), which is printed only.
RTOL=5e-6
make_corpus "$WORK/c.h5" 2000 200
make_word_corpus "$WORK/w.h5"

compare() { # NAME CORPUS [memory-matters]
  local v t
  v=$(txl_eval_loss "$WORK/$1" valid) t=$(txl_eval_loss "$WORK/$1" test)
  if [ -z "$v" ] || [ -z "$t" ]; then fail "$1: txl-eval printed no loss"; return; fi
  echo "txl-eval $1: valid $v, test $t"
  py_checks eval "$WORK/$1" "$2" "$v" "$t" "$RTOL" "${3:-}"
}
for t in rel shaw abs_sin abs_learned; do
  matters=memory-matters
  [ "$t" = abs_sin ] && matters=
  if tiny_run "$t" "$WORK/c.h5" model.attn_type=$t; then compare "$t" "$WORK/c.h5" $matters
  else cat "$WORK/$t.out"; fail "$t: training failed"; fi
done
if tiny_run adaptive "$WORK/c.h5" model.cutoffs=20,40 model.div_val=2 model.tie_weight=false; then
  compare adaptive "$WORK/c.h5" memory-matters
else cat "$WORK/adaptive.out"; fail "adaptive: training failed"; fi
# the word run: 2 clusters (one projection, d_embed 16), pre-norm layers
if tiny_run word "$WORK/w.h5" model.cutoffs=100 model.d_embed=16 model.pre_lnorm=true; then
  compare word "$WORK/w.h5" memory-matters
else cat "$WORK/word.out"; fail "word: training failed"; fi
# train mode: 3 steps, a checkpoint (parameters and memory) after each, every loss logged
if tiny_run steps "$WORK/c.h5" train.max_step=3 train.log_interval=1 run.checkpoint_interval=1; then
  py_checks train "$WORK/steps" "$WORK/c.h5" "$RTOL"
else cat "$WORK/steps.out"; fail "steps: training failed"; fi
finish
