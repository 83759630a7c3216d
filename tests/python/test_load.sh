#!/usr/bin/env bash
# txl.load: a run folder (its latest), its latest and best pointers, best=True, a checkpoint file;
# a damaged checkpoint (one flipped byte) and a missing one are TxlErrors naming the file; the
# corpus of another vocabulary is refused (vocab_digest), naming both files; a checkpoint whose
# corpus cannot be found loads without a vocabulary (encode says what to pass), and data.corpus
# written relative is found next to the checkpoint.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 2000 200
make_word_corpus "$WORK/w.h5"
# checkpoints at steps 10 and 20 (validation at each: 'best' names one of them); data.corpus
# relative to the folder the run starts in
mkdir "$WORK/start"
cp "$WORK/c.h5" "$WORK/start/c.h5"
if (cd "$WORK/start" && tiny_run run c.h5 train.max_step=20 train.eval_interval=10 run.checkpoint_interval=10); then
  mkdir "$WORK/scratch"
  # validation improved at both steps, so 'best' names step 20 as 'latest' does: point it at step
  # 10 as txl writes it (one line), so that best=True is seen to follow it
  if grep -qx ckpt-00000020.h5 "$WORK/run/best"; then printf 'ckpt-00000010.h5\n' > "$WORK/run/best"; fi
  cd "$WORK/start"  # where data.corpus = c.h5 is found as written
  py_checks load "$WORK/run" "$WORK/c.h5" "$WORK/w.h5" "$WORK/scratch"
else
  cat "$WORK/run.out"
  fail "training failed"
fi
finish
