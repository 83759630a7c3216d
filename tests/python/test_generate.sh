#!/usr/bin/env bash
# model.generate: the same seed gives the same tokens, valid ids; txl-generate's text for the same
# settings (its Philox draws, top-k, top-p, the memory of the evaluation settings); greedy tokens
# with the memory carried past several segments equal the context recomputed without memory.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 2000 200
if ! tiny_run run "$WORK/c.h5" train.max_step=60; then cat "$WORK/run.out"; fail "training failed"; finish; fi
args=()
n=0
for s in "0.8 0 1.0 3" "1.0 5 1.0 11" "0.7 0 0.9 12" "1.2 8 0.95 13"; do
  read -r T K P S <<<"$s"
  n=$((n + 1))
  "$BIN/txl-generate" "$WORK/run" --prompt "KING" --length 200 --temperature "$T" --top-k "$K" --top-p "$P" \
    --seed "$S" > "$WORK/g$n.out" 2> "$WORK/g$n.err" || { cat "$WORK/g$n.err"; fail "txl-generate $s failed"; }
  args+=("$WORK/g$n.out" "$T" "$K" "$P" "$S")
done
py_checks generate "$WORK/run" "KING" "${args[@]}"
finish
