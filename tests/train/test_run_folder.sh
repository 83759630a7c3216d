#!/usr/bin/env bash
# A run folder as the tools take it: txl-inspect of a run folder (its newest checkpoint, as
# txl-eval takes it), of its 'latest' and 'best' pointers and with --best; txl-eval and
# txl-generate --best use the checkpoint 'best' names, not the newest; what names no checkpoint
# (--best given a file, a folder without 'best', a pointer naming a missing file) is one line.
# And eval.final_test = false: the run ends without the test evaluation (no test line printed or
# in metrics.jsonl), where the default evaluates it.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 3000 200
# validation and a checkpoint at step 4 (the first validation: 'best'), a checkpoint at step 6
# by --stop-at ('latest'): two different files
small_run_ini "$WORK/c.h5" train.max_step=8 train.eval_interval=4 run.checkpoint_interval=4 > "$WORK/r.ini"
rc=0
train_into run "$WORK/r.ini" 1 --stop-at 6 || rc=$?
check_eq "--stop-at 6: exit status 75 (requeue)" "$rc" 75
check_eq "latest names step 6" "$(cat "$WORK/run/latest")" "ckpt-00000006.h5"
check_eq "best names step 4" "$(cat "$WORK/run/best")" "ckpt-00000004.h5"

# step_of OUTPUT: the step txl-inspect printed
step_of() { sed -n 's/^step  *\([0-9]*\)$/\1/p' "$1"; }
for target in "$WORK/run" "$WORK/run/latest" "$WORK/run/best"; do
  out=$WORK/inspect.out
  if "$BIN/txl-inspect" "$target" > "$out" 2>&1; then
    want=6
    [ "${target##*/}" = best ] && want=4
    check_eq "txl-inspect ${target#"$WORK/"}: the checkpoint of step $want" "$(step_of "$out")" "$want"
    grep -q "^checkpoint  *$(re_quote "$WORK/run/ckpt-0000000$want.h5")$" "$out" \
      && ok "txl-inspect ${target#"$WORK/"} names the file it read" || fail "txl-inspect ${target#"$WORK/"}: $(head -2 "$out")"
  else
    fail "txl-inspect ${target#"$WORK/"} failed: $(head -c 300 "$out")"
  fi
done
"$BIN/txl-inspect" --verify --best "$WORK/run" > "$WORK/ib.out" 2>&1 && check_eq "txl-inspect --verify --best RUN: step 4" \
  "$(step_of "$WORK/ib.out")" 4 || fail "txl-inspect --best: $(head -c 300 "$WORK/ib.out")"

# txl-eval --best against txl-eval of the file best names: the same checkpoint, the same loss
loss_of() { sed -n 's/.*: loss \([0-9.]*\) nats.*/\1/p' "$1"; }
"$BIN/txl-eval" "$WORK/run" --best --split valid > "$WORK/eb.out" 2>&1 \
  && "$BIN/txl-eval" "$WORK/run/ckpt-00000004.h5" --split valid > "$WORK/e4.out" 2>&1 \
  && "$BIN/txl-eval" "$WORK/run" --split valid > "$WORK/e6.out" 2>&1 || fail "txl-eval failed: $(tail -2 "$WORK"/e*.out)"
grep -q "^txl-eval: $(re_quote "$WORK/run/ckpt-00000004.h5") (step 4)" "$WORK/eb.out" \
  && ok "txl-eval --best RUN evaluates step 4" || fail "txl-eval --best: $(head -1 "$WORK/eb.out")"
check_eq "txl-eval --best: the loss of ckpt-00000004.h5" "$(loss_of "$WORK/eb.out")" "$(loss_of "$WORK/e4.out")"
[ "$(loss_of "$WORK/e6.out")" != "$(loss_of "$WORK/eb.out")" ] && ok "the newest (step 6) gives another loss" \
  || fail "steps 4 and 6 evaluate alike: the comparison proves nothing"
"$BIN/txl-eval" "$WORK/run/best" --split valid > "$WORK/ep.out" 2>&1 || fail "txl-eval RUN/best: $(tail -1 "$WORK/ep.out")"
check_eq "txl-eval RUN/best: the loss of ckpt-00000004.h5" "$(loss_of "$WORK/ep.out")" "$(loss_of "$WORK/e4.out")"

# txl-generate --best: the text of the file best names (same seed), unlike the newest's
# gen TARGET ARGS...: the text (the speed line after it left out)
gen() { "$BIN/txl-generate" "$@" --prompt "ROMEO:" --length 60 --seed 3 2> "$WORK/gen.err" | sed '$d'; }
gen "$WORK/run" --best > "$WORK/gb.txt" && gen "$WORK/run/ckpt-00000004.h5" > "$WORK/g4.txt" \
  && gen "$WORK/run" > "$WORK/g6.txt" || fail "txl-generate failed: $(cat "$WORK/gen.err")"
grep -q "^txl-generate: $(re_quote "$WORK/run/ckpt-00000004.h5")," <("$BIN/txl-generate" "$WORK/run" --best --length 4 2>&1 >/dev/null) \
  && ok "txl-generate --best RUN names ckpt-00000004.h5" || fail "txl-generate --best names another file"
cmp -s "$WORK/gb.txt" "$WORK/g4.txt" && ok "txl-generate --best: the text of ckpt-00000004.h5" || fail "txl-generate --best: other text"

expect_error_line "txl-eval --best with a file" "ckpt-00000004\.h5: --best takes a run folder" -- \
  "$BIN/txl-eval" "$WORK/run/ckpt-00000004.h5" --best
mkdir -p "$WORK/nobest" && cp "$WORK/run/ckpt-00000006.h5" "$WORK/nobest/" && echo ckpt-00000006.h5 > "$WORK/nobest/latest"
expect_error_line "txl-generate --best, no 'best' pointer" "nobest: no 'best' pointer" -- \
  "$BIN/txl-generate" "$WORK/nobest" --best
echo ckpt-00000002.h5 > "$WORK/nobest/best"
expect_error_line "txl-inspect of a 'best' naming a missing file" "nobest/best names .*nobest/ckpt-00000002\.h5, which does not exist" -- \
  "$BIN/txl-inspect" "$WORK/nobest/best"
expect_error_line "txl-inspect of an empty folder" "empty: no checkpoint in this folder" -- \
  bash -c "mkdir -p '$WORK/empty' && exec '$BIN/txl-inspect' '$WORK/empty'"
for tool in txl-inspect txl-eval txl-generate; do "$BIN/$tool" --help > "$WORK/$tool.help"; done
grep -q -- "--best" "$WORK/txl-inspect.help" && grep -q -- "--best" "$WORK/txl-eval.help" \
  && grep -q -- "--best" "$WORK/txl-generate.help" && ok "--help of txl-inspect, txl-eval, txl-generate lists --best" \
  || fail "a --help without --best"

# eval.final_test = false: the run continued to step 8 ends without the test evaluation
train_into run "$WORK/r.ini" 1 --resume "$WORK/run" --set eval.final_test=false || fail "the run without the final test failed: $(tail -2 "$WORK/run.out")"
grep -q "^test: skipped (eval.final_test = false" "$WORK/run.out" && ! grep -q '"kind": *"test"' "$WORK/run/metrics.jsonl" \
  && ! grep -Eq '^test( |:).*loss' "$WORK/run.out" && ok "eval.final_test = false: no test evaluation, one line saying so" \
  || { tail -4 "$WORK/run.out"; fail "eval.final_test = false"; }
train_into full "$WORK/r.ini" 1 || fail "the run with the final test failed"
grep -q '"kind": *"test"' "$WORK/full/metrics.jsonl" && ok "by default the run ends with the test evaluation" \
  || fail "no test line by default"
"$BIN/txl-train" --help > "$WORK/train.help"
grep -q "^    final_test  *bool" "$WORK/train.help" && ok "txl-train --help lists eval.final_test" || fail "--help: no final_test"
finish
