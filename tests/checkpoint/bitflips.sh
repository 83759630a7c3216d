#!/usr/bin/env bash
# No reader crashes on a damaged checkpoint: every single-bit flip of a small checkpoint's
# metadata is one error line, never a crash inside HDF5 (which does not survive every damaged
# byte of its own metadata: the file's digest is checked before HDF5 opens it).
#
# What runs, and why it stays fast: a checkpoint of a one-layer model of width 8 (38 KB, 23 KB
# of it metadata: the bytes outside the datasets' raw chunks). test_ckpt_flips flips every bit
# of every one of those bytes in turn (about 190,000 files) and reads each with txl_ckpt_peek,
# the first reader that txl-inspect, txl-eval, txl-generate and a resume call on a file: that
# is the digest check (a SHA-256 of 38 KB, tens of microseconds), so the whole sweep takes
# seconds where starting the tools 190,000 times would take days. The four tools themselves
# then run on a sample of those flips spread evenly over the metadata: each exits 1 with one
# "txl: error:" line naming the file (a crash exits with a signal). The raw chunks are left to
# the tests of Fletcher32 and of the digest (tests/checkpoint/corrupt.sh): a flip there is as
# visible to the digest as any other.
#   bitflips.sh BIN_DIR SOURCE_DIR
source "$(dirname "$0")/../train/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 400 60
cat > "$WORK/t.ini" <<INI
[data]
corpus = $WORK/c.h5
[model]
n_layer = 1
d_model = 8
n_head = 1
d_head = 8
d_inner = 16
[train]
tgt_len = 8
mem_len = 8
batch_size = 2
max_step = 2
log_interval = 1
eval_interval = 0
[eval]
eval_tgt_len = 8
eval_batch_size = 2
max_eval_steps = 1
[run]
checkpoint_interval = 0
INI
$MPI -n 1 "$BIN/txl-train" "$WORK/t.ini" --set run.work_dir="$WORK/run" > "$WORK/train.out" 2>&1 \
  || { cat "$WORK/train.out"; fail "training failed"; finish; }
good=$WORK/run/ckpt-00000002.h5
[ -f "$good" ] && ok "the run wrote $(basename "$good") ($(stat -c %s "$good") bytes)" || { fail "no checkpoint"; finish; }

echo "== every bit of every metadata byte, through the digest check"
if out=$("$BIN/test_ckpt_flips" all "$good" "$WORK/scratch.h5" 2>&1); then ok "$out"; else fail "$out"; fi

echo "== a sample of those flips through the tools"
# one_error NAME FILE CMD...: CMD exits 1 (no signal) with exactly one "txl: error:" line naming FILE
one_error() {
  local what=$1 file=$2 rc=0
  shift 2
  "$@" > "$WORK/o.out" 2> "$WORK/o.err" || rc=$?
  local n named
  n=$(grep -c '^txl: error:' "$WORK/o.err" || true)
  named=$(grep '^txl: error:' "$WORK/o.err" | grep -cF "$file" || true)
  if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && [ "$named" -eq 1 ]; then
    ok "$what -> $(grep '^txl: error:' "$WORK/o.err" | cut -c1-160)"
  else
    fail "$what: exit status $rc, $n error lines ($named naming the file): $(tail -c 300 "$WORK/o.err")"
  fi
}
for off in $("$BIN/test_ckpt_flips" sample "$good" 6); do
  f=$WORK/flip_$off.h5
  bit=$((off % 8))
  python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[int(sys.argv[3])] ^= 1 << int(sys.argv[4]); open(sys.argv[2], 'wb').write(b)" \
    "$good" "$f" "$off" "$bit"
  one_error "byte $off bit $bit: txl-inspect --verify" "$f" "$BIN/txl-inspect" --verify "$f"
  one_error "byte $off bit $bit: txl-eval" "$f" "$BIN/txl-eval" "$f"
  one_error "byte $off bit $bit: txl-generate" "$f" "$BIN/txl-generate" "$f" --length 4
  one_error "byte $off bit $bit: resume" "$f" $MPI -n 1 "$BIN/txl-train" "$WORK/t.ini" \
    --set run.work_dir="$WORK/r_$off" --resume "$f"
done
finish
