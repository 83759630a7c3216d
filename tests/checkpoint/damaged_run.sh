#!/usr/bin/env bash
# A damaged checkpoint never blocks a restart: a run folder with a good ckpt-2 and a ckpt-4 whose
# data chunk has one flipped bit, `latest` naming ckpt-4. run.resume = auto (1 and 2 ranks),
# --resume DIR, txl-eval and txl-generate of the folder use ckpt-2 with one notice naming
# ckpt-4 and why; the same for a folder of files without a digest (as an older txl wrote them),
# which txl_ckpt_find verifies by reading every dataset back (Fletcher32).
#   damaged_run.sh BIN_DIR SOURCE_DIR
source "$(dirname "$0")/../train/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 1000 100
small_run_ini "$WORK/c.h5" train.max_step=4 train.log_interval=2 eval.max_eval_steps=1 run.checkpoint_interval=2 \
  run.keep_checkpoints=3 > "$WORK/r.ini"

# ok_notice NAME STREAM PATTERN CMD...: CMD exits 0 with exactly one line matching PATTERN on
# STREAM (out or err)
ok_notice() {
  local what=$1 stream=$2 pattern=$3 rc=0
  shift 3
  "$@" > "$WORK/n.out" 2> "$WORK/n.err" || rc=$?
  local n
  n=$(grep -Ec -- "$pattern" "$WORK/n.$stream" || true)
  if [ "$rc" -eq 0 ] && [ "$n" -eq 1 ]; then ok "$what ($(grep -E -- "$pattern" "$WORK/n.$stream" | cut -c1-300))"
  else fail "$what: exit status $rc, $n lines /$pattern/ on std$stream: $(grep -v '^step' "$WORK/n.err" | tail -c 400)"; fi
}

# one_folder NAME [ENV...]: trains NAME (ckpt-2, ckpt-4) with ENV set, damages ckpt-4's first chunk
# of /params/word_emb, then checks every way a folder is used; WHY is what the notice must say
one_folder() {
  local name=$1 why=$2
  shift 2
  env "$@" $MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name" > "$WORK/train.out" 2>&1 \
    || { cat "$WORK/train.out"; fail "$name: training failed"; return; }
  [ "$(cat "$WORK/$name/latest")" = ckpt-00000004.h5 ] && [ -f "$WORK/$name/ckpt-00000002.h5" ] \
    && ok "$name: the run wrote ckpt-00000002.h5 and ckpt-00000004.h5 (latest)" || { fail "$name: checkpoints"; return; }
  "$BIN/test_ckpt_flips" chunk "$WORK/$name/ckpt-00000004.h5" /params/word_emb > /dev/null \
    && ok "$name: one bit of ckpt-00000004.h5's /params/word_emb flipped" || fail "$name: no flip"
  notice() { echo "$1: 'latest' names .*$1/ckpt-00000004\.h5, which cannot be used \($why.*\); using .*$1/ckpt-00000002\.h5"; }
  local P notice
  notice=$(notice "$name")
  for P in 1 2; do
    rm -rf "$WORK/$name.$P" && cp -r "$WORK/$name" "$WORK/$name.$P"
    ok_notice "$name: P=$P: run.resume = auto" out "^resume: .*$(notice "$name\.$P")" \
      env "$@" $MPI -n "$P" "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name.$P" --set run.resume=auto
    grep -q "resumed from .*$name\.$P/ckpt-00000002\.h5: step 2" "$WORK/n.out" && ok "$name: P=$P: resumed from step 2" \
      || fail "$name: P=$P: did not resume from step 2"
  done
  ok_notice "$name: --resume DIR" out "^resume: .*$notice" \
    $MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name.dir" --resume "$WORK/$name"
  ok_notice "$name: txl-eval of the folder" out "^checkpoint: .*$notice" "$BIN/txl-eval" "$WORK/$name"
  ok_notice "$name: txl-generate of the folder" err "^checkpoint: .*$notice" \
    "$BIN/txl-generate" "$WORK/$name" --length 4
}

echo "== files with a digest"
one_folder run "the checkpoint is damaged: its SHA-256 digest does not match"
echo "== files without a digest (TXL_CKPT_FAULT=no_digest: as an older txl wrote them)"
one_folder old "dataset '/params/word_emb' is damaged: its checksum \(Fletcher32\) does not match" TXL_CKPT_FAULT=no_digest
finish
