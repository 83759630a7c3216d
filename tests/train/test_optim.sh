#!/usr/bin/env bash
# train.optim = lamb and sgd (momentum 0.9): each trains 30 steps of the small model with the loss
# going down; 2 ranks equal 1 within the rank tolerance; a run stopped at step 12 and resumed ends
# bit for bit as the uninterrupted one; a resume with another train.optim is refused in one line
# naming the checkpoint and both values; txl-inspect names the optimizer. Where the emulator build
# is there (txl-train-emu), run.device = cuda against the CPU run within tests/cuda/test_train.sh's
# TOL_GPU.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.mem_len=16 train.max_step=30 train.warmup_step=5 train.eval_interval=10 \
  train.momentum=0.9 train.weight_decay=0.01 eval.max_eval_steps=4 > "$WORK/o.ini"
# the learning rate of each optimizer (SGD's steps are lr |g|, LAMB's lr |p|: larger rates than Adam's)
lr_of() { case $1 in sgd) echo 0.5 ;; lamb) echo 0.05 ;; *) echo 0.003 ;; esac; }
train() { # NAME RANKS ARGS...: txl-train into $WORK/NAME, output in $WORK/NAME.out
  local name=$1 p=$2
  shift 2
  $MPI -n "$p" "${TRAIN:-$BIN/txl-train}" "$WORK/o.ini" --set run.work_dir="$WORK/$name" --set train.lr="${LR:-0.003}" \
    "$@" > "$WORK/$name.out" 2>&1
}
# first and last train loss of a run
first_last() { python3 -c "
import json, sys
l = [json.loads(x) for x in open(sys.argv[1])]
t = [r['loss'] for r in l if r['kind'] == 'train']
print(t[0], t[-1])" "$1/metrics.jsonl"; }

for o in lamb sgd; do
  export LR=$(lr_of $o)
  train $o 1 --set train.optim=$o --dump-params "$WORK/$o.bin" || { cat "$WORK/$o.out"; fail "$o: 1 rank failed"; continue; }
  read -r a b <<< "$(first_last "$WORK/$o")"
  python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) < float(sys.argv[1]) - 0.1 else 1)" "$a" "$b" \
    && ok "$o: 30 steps, train loss $a -> $b" || fail "$o: the loss did not go down ($a -> $b)"
  grep -q "^optim .*= $o" "$WORK/$o.out" || grep -q "optim.*$o" "$WORK/$o.out" \
    && ok "$o: the start lines name it" || fail "$o: the start lines do not name the optimizer"
  # Tolerances: those of tests/train/test_ranks.sh. 2 ranks change only the order of the gradient
  # sums; LAMB's trust ratios are norms of the parameters and directions, identical on the ranks.
  if train ${o}2 2 --set train.optim=$o --dump-params "$WORK/${o}2.bin"; then
    python3 "$SRC/tests/lib/compare_runs.py" "$WORK/${o}2" "$WORK/$o" 2e-5 --train-steps 30 \
      --params "$WORK/${o}2.bin" "$WORK/$o.bin" 1e-5 \
      && ok "$o: 2 ranks = 1 rank (losses, validations, test, final parameters)" || fail "$o: 2 ranks and 1 differ"
  else
    cat "$WORK/${o}2.out"; fail "$o: 2 ranks failed"
  fi
  rc=0; train ${o}s 1 --set train.optim=$o --stop-at 12 --set run.checkpoint_interval=0 || rc=$?
  train ${o}s 1 --set train.optim=$o --resume "$WORK/${o}s" --dump-params "$WORK/${o}s.bin" || rc=1
  [ "$rc" -eq 75 ] || { cat "$WORK/${o}s.out"; fail "$o: stop at 12 and resume (status $rc)"; }
  cmp -s "$WORK/${o}s.bin" "$WORK/$o.bin" && ok "$o: stopped at step 12 and resumed = uninterrupted, bit for bit" \
    || fail "$o: the resumed run differs from the uninterrupted one"
  ck=$(ls "$WORK/${o}s"/ckpt-*.h5 | head -n 1)
  "$BIN/txl-inspect" "$ck" > "$WORK/${o}_inspect.out" 2>&1
  grep -q "^optimizer *$o " "$WORK/${o}_inspect.out" && ok "$o: txl-inspect names the optimizer" \
    || { cat "$WORK/${o}_inspect.out"; fail "$o: txl-inspect does not name $o"; }
done
unset LR
# another optimizer on resume: one line naming the file and both values
rc=0; train refuse 1 --set train.optim=adam --resume "$WORK/sgds" || rc=$?
lines=$(grep -c . "$WORK/refuse.out" || true)
if [ "$rc" -ne 0 ] && grep -q "sgds/ckpt-.*\.h5 holds the state of train.optim = sgd, this run asks for train.optim = adam" "$WORK/refuse.out"; then
  ok "resume with train.optim = adam from an sgd checkpoint refused: $(grep -m 1 'train.optim' "$WORK/refuse.out")"
else
  cat "$WORK/refuse.out"; fail "resume with another train.optim not refused as it should be (status $rc)"
fi
[ "$(grep -c 'train.optim' "$WORK/refuse.out")" -eq 1 ] && ok "the refusal is one line" \
  || fail "the refusal is not one line ($lines lines of output)"

# run.device = cuda on the kernels' CPU emulator against the CPU: TOL_GPU = 3e-3, derived in
# tests/cuda/test_train.sh (the ops' rounding, 1e-3 per step, drifting over 30 steps); SGD and
# LAMB move the parameters by at most as much as Adam per step at this learning rate (SGD: lr |buf|
# with |g| ~ 1 after clipping; LAMB: lr |p| / |u| u, i.e. lr times the tensor's scale), so the
# drift is bounded alike; LAMB's norms are the same sums in another order (relative 1e-7).
if [ -x "$BIN/txl-train-emu" ]; then
  for o in lamb sgd; do
    export LR=$(lr_of $o)
    if TRAIN=$BIN/txl-train-emu train ${o}_emu 1 --set train.optim=$o --set run.device=cuda; then
      python3 "$SRC/tests/lib/compare_runs.py" "$WORK/${o}_emu" "$WORK/$o" 3e-3 --train-steps 30 \
        && ok "$o: run.device = cuda (emulator) = the CPU run within 3e-3" || fail "$o: the emulated GPU run and the CPU run differ"
    else
      cat "$WORK/${o}_emu.out"; fail "$o: the emulated GPU run failed"
    fi
  done
else
  echo "lamb, sgd on run.device = cuda: not run here (no txl-train-emu, the CUDA emulator build)"
fi
finish
