#!/usr/bin/env bash
# Data parallelism: P = 1, 2 and 4 ranks with the same global batch compute the same training
# run (dropout on), all ranks hold bit-identical parameters after every step, and failures on
# any rank end every rank with a message instead of a hang.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v mpirun >/dev/null || { fail "mpirun not found"; finish; }
make_corpus "$WORK/c.h5" 4000 300
ranks_ini "$WORK/c.h5" > "$WORK/eq.ini"
for P in 1 2 4; do
  if $MPI -n $P "$BIN/txl-train" "$WORK/eq.ini" --set run.work_dir="$WORK/run$P" \
       --dump-params "$WORK/p$P.bin" > "$WORK/o$P.txt" 2>&1; then
    ok "$P rank(s): 30 steps with the replica check after every step"
  else
    cat "$WORK/o$P.txt"; fail "$P rank(s): the run failed"
  fi
done
# within the tolerances derived at ranks_ini (lib.sh)
for P in 2 4; do
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/run$P" "$WORK/run1" $TOL_LOSS_RANKS --train-steps 30 \
    --params "$WORK/p$P.bin" "$WORK/p1.bin" $TOL_PARAM_RANKS \
    && ok "P = $P matches P = 1 (losses of 30 steps, evaluations, final parameters)" || fail "P = $P and P = 1 disagree"
done

# a split too short for the columns, with 2 ranks: every rank stops with the message
expect_error_line "corpus too short for 2 ranks" "too short for 4 columns of 100000\+1 tokens" -- \
  $MPI -n 2 "$BIN/txl-train" "$WORK/eq.ini" --set train.tgt_len=100000
# one rank cannot read its part of the file: a damaged chunk that only rank 1 reads (in its share of
# the start-up check of the corpus; tests/data/ranks_bad_corpus.sh covers a damage met while training)
python3 - "$WORK" <<'PY'
import random, sys
w = sys.argv[1]
rnd = random.Random(5)
letters = "abcdefghijklmnopqrstuvwxyz"
text = "".join(rnd.choice(letters + "\n") for _ in range(300000))
marker = "qwertyuiopasdfghjklzxcvbnm" * 2
at = 225005  # column 3 of 4 starts at 225000: rank 1's first read, a chunk rank 0 never reads
text = text[:at] + marker + text[at + len(marker):]
open(f"{w}/dtrain.txt", "w").write(text)
open(f"{w}/dvalid.txt", "w").write(text[:5000])
open(f"{w}/dtest.txt", "w").write(text[:5000])
PY
"$BIN/txl-prep" --mode char --quiet --train "$WORK/dtrain.txt" --valid "$WORK/dvalid.txt" \
  --test "$WORK/dtest.txt" --out "$WORK/damaged.h5"
python3 - "$WORK/damaged.h5" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
ids = bytes(ord(c) - ord("a") + 1 for c in "qwertyuiopasdfghjklzxcvbnm" * 2)  # '\n' = 0, 'a' = 1, ...
at = data.find(ids)
assert at >= 0 and data.find(ids, at + 1) < 0, "marker not found once"
data[at + 7] ^= 0x01  # still a valid id: only the checksum can tell
open(path, "wb").write(bytes(data))
PY
start=$(date +%s)
expect_error_line "one rank cannot read its columns" "rank 1@.*damaged.h5" -- \
  $MPI -n 2 "$BIN/txl-train" "$WORK/eq.ini" --set data.corpus="$WORK/damaged.h5" --set train.max_step=5 \
  --set run.work_dir="$WORK/rund"
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 120 ] && ok "nobody hung (${elapsed} s)" || fail "took ${elapsed} s"
finish
