#!/usr/bin/env bash
# A bad corpus under several ranks: every case ends with one "txl: error:" line (the lowest
# failing rank's), exit status 1 on every rank and no MPI_Abort; a damage anywhere in the file is
# found by the check at start, before the model is built and before step 1.
#   ranks_bad_corpus.sh BIN_DIR CORPUS_TOOL STREAM_TOOL WORKDIR [PYTHON3]
BIN=$1 TOOL=$2 STREAM=$3 WORK=$4 PY=${5:-}
. "$(dirname "$0")/lib.sh"
rm -rf "$WORK" && mkdir -p "$WORK" && cd "$WORK" || exit 2
if [ -z "$PY" ]; then
  echo "SKIPPED: every case (no python3 to write the text and locate the bytes to damage)"
  exit 77
fi

# Text of random letters and line ends; a marker of 52 letters planted once in train (at 225005:
# column 3 of 4 starts at 225000, a chunk of 65536 ids that columns 0 to 2 never touch) and a
# different one in test. Char mode: '\n' is id 0, 'a' id 1, ... (uint8 ids as the text's bytes).
"$PY" - <<'PYEOF'
import random
rnd = random.Random(5)
letters = "abcdefghijklmnopqrstuvwxyz"
def text(n):
    return "".join(rnd.choice(letters + "\n") for _ in range(n))
train, valid, test = text(300000), text(20000), text(20000)
mark_train, mark_test = "qwertyuiopasdfghjklzxcvbnm" * 2, "mnbvcxzlkjhgfdsapoiuytrewq" * 2
train = train[:225005] + mark_train + train[225005 + 52:]
test = test[:7000] + mark_test + test[7000 + 52:]
for name, t in (("train", train), ("valid", valid), ("test", test)):
    open(name + ".txt", "w").write(t)
PYEOF
"$BIN/txl-prep" --mode char --quiet --train train.txt --valid valid.txt --test test.txt --out good.h5
# damage FILE MARKER: flips one bit of the stored ids of MARKER (a valid id still: only the
# checksum can tell)
damage() {
  cp good.h5 "$1"
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
path, marker = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
ids = bytes(ord(c) - ord("a") + 1 for c in marker)
at = data.find(ids)
assert at >= 0 and data.find(ids, at + 1) < 0, "marker not found once"
data[at + 7] ^= 0x01
open(path, "wb").write(bytes(data))
PYEOF
}
damage train_damaged.h5 qwertyuiopasdfghjklzxcvbnmqwertyuiopasdfghjklzxcvbnm
damage test_damaged.h5 mnbvcxzlkjhgfdsapoiuytrewqmnbvcxzlkjhgfdsapoiuytrewq
"$TOOL" make-foreign foreign.h5

cat > small.ini <<INI
[data]
corpus = $WORK/good.h5
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
max_step = 3
[eval]
eval_batch_size = 4
max_eval_steps = 1
INI
check "the good corpus passes the check in parts" "$TOOL" check good.h5 4
check "the good corpus trains on 2 ranks" timeout 300 mpirun -n 2 --oversubscribe --bind-to none \
  "$BIN/txl-train" small.ini --set run.work_dir="$WORK/good_run"

echo "== txl-train on a missing, foreign or damaged corpus"
for P in 1 2 4; do
  mpi_expect_error "$P rank(s), a missing corpus" $P "$(re_quote "$WORK")/missing\.h5" 'cannot open corpus file' 'No such file' -- \
    "$BIN/txl-train" small.ini --set data.corpus="$WORK/missing.h5" --set run.work_dir="$WORK/r"
  mpi_expect_error "$P rank(s), an HDF5 file that is no corpus" $P 'foreign\.h5' 'not a txl corpus file' -- \
    "$BIN/txl-train" small.ini --set data.corpus="$WORK/foreign.h5" --set run.work_dir="$WORK/r"
  mpi_expect_error "$P rank(s), a damaged chunk of train" $P 'train_damaged\.h5' "reading split 'train' failed" '\(HDF5: ' -- \
    "$BIN/txl-train" small.ini --set data.corpus="$WORK/train_damaged.h5" --set run.work_dir="$WORK/r"
  # the test split is read for the first time after training: the check at start must find it
  mpi_expect_error "$P rank(s), a damaged chunk of test (only)" $P 'test_damaged\.h5' "reading split 'test' failed" '\(HDF5: ' -- \
    "$BIN/txl-train" small.ini --set data.corpus="$WORK/test_damaged.h5" --set run.work_dir="$WORK/r_test$P"
  if grep -q -e '^training:' -e '^step ' -e '^model:' "$WORK/mpi.stdout" || [ -e "$WORK/r_test$P/metrics.jsonl" ]; then
    fail "$P rank(s): the damaged test split was found only after the model was built or trained: $(grep -e '^training:' -e '^step ' -e '^model:' "$WORK/mpi.stdout" | head -n 3)"
  else
    ok "$P rank(s): the damaged test split was found at start (no model, no step, no metrics)"
  fi
done

echo "== txl-train on a vocabulary of 2^31 tokens (no int; it was 'out of memory allocating 18446743... bytes')"
"$TOOL" make-big-vocab big_vocab.h5 2147483648
for P in 1 2; do
  mpi_expect_error "$P rank(s), vocab_size 2^31" $P 'big_vocab\.h5' 'vocab_size = 2147483648 is out of range' -- \
    "$BIN/txl-train" small.ini --set data.corpus="$WORK/big_vocab.h5" --set run.work_dir="$WORK/r"
done

echo "== txl-eval: a damaged chunk only rank 1 of 2 reads (split train, 4 columns)"
mpi_expect_error "txl-eval on 2 ranks" 2 'rank 1@' 'train_damaged\.h5' "reading split 'train' failed" -- \
  "$BIN/txl-eval" "$WORK/good_run" --corpus "$WORK/train_damaged.h5" --split train --batch-size 4
check "txl-eval on the good corpus" timeout 300 mpirun -n 2 --oversubscribe --bind-to none \
  "$BIN/txl-eval" "$WORK/good_run" --split train --batch-size 4 --max-segments 2

echo "== reads during a walk (no check at start): the ranks agree on each segment"
check "the walk over the good corpus" timeout 300 mpirun -n 2 --oversubscribe --bind-to none \
  "$STREAM" good.h5 train 4 100
mpi_expect_error "2 ranks, only rank 1's columns are damaged" 2 'rank 1@' 'train_damaged\.h5' "reading split 'train' failed" -- \
  "$STREAM" train_damaged.h5 train 4 100
mpi_expect_error "4 ranks, only rank 3's columns are damaged" 4 'rank 3@' 'train_damaged\.h5' "reading split 'train' failed" -- \
  "$STREAM" train_damaged.h5 train 4 100
finish
