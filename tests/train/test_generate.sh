#!/usr/bin/env bash
# txl-generate: the same seed gives the same text; greedy decoding (top-k 1) with the memory
# equals greedy decoding that recomputes the whole context for every token (the memory carries
# exactly what recomputation would see); top-p close to 0 is greedy too; --compare times both
# ways; bad input is a one-line error.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 3000 200
{ small_model_ini "$WORK/c.h5"; cat <<INI
[train]
tgt_len = 16
mem_len = 16
batch_size = 4
max_step = 60
lr = 0.004
log_interval = 30
eval_interval = 0
[eval]
eval_tgt_len = 16
[run]
work_dir = $WORK/run
INI
} > "$WORK/run.ini"
"$BIN/txl-train" "$WORK/run.ini" > "$WORK/train.out" 2>&1 || { cat "$WORK/train.out"; fail "training failed"; finish; }
gen() { "$BIN/txl-generate" "$WORK/run" --prompt "ROMEO:" "$@" 2> "$WORK/gen.err"; }
text_of() { sed -n '1,/^with memory\|^recomputing/p' "$1" | sed '$d'; }

gen --length 80 --seed 5 > "$WORK/a.out" && gen --length 80 --seed 5 > "$WORK/b.out" || { cat "$WORK/gen.err"; fail "txl-generate failed"; finish; }
head -c 300 "$WORK/a.out"; echo
[ "$(text_of "$WORK/a.out")" = "$(text_of "$WORK/b.out")" ] && ok "same seed, same text" || fail "same seed, other text"
gen --length 80 --seed 6 > "$WORK/c.out"
[ "$(text_of "$WORK/a.out")" != "$(text_of "$WORK/c.out")" ] && ok "another seed, another text" || fail "seed ignored"
case "$(text_of "$WORK/a.out")" in ROMEO:*) ok "the text starts with the prompt" ;; *) fail "prompt not printed" ;; esac

# prompt (6) + 60 tokens < 100: the memory holds every earlier token and the recomputation sees
# them all, so both compute the same logits (up to rounding: other product shapes) and pick the
# same tokens, greedily and when sampling with the same uniforms
body() { sed '$d' "$1"; } # the text: all but the figures line
for mode in "--top-k 1" "--temperature 1 --seed 9"; do
  gen --length 60 $mode --mem-len 100 --clamp-len 0 > "$WORK/mem.out"
  gen --length 60 $mode --mem-len 100 --clamp-len 0 --recompute 100 > "$WORK/re.out"
  if body "$WORK/mem.out" | cmp -s - <(body "$WORK/re.out") && [ "$(body "$WORK/mem.out" | wc -c)" -ge 66 ]; then
    ok "$mode: memory = recomputing the context ($(body "$WORK/mem.out" | tr '\n' '|' | head -c 70))"
  else
    fail "$mode: memory and recomputation differ: $(body "$WORK/mem.out" | head -c 200) --- $(body "$WORK/re.out" | head -c 200)"
  fi
done
gen --length 60 --top-k 1 --mem-len 100 --clamp-len 0 > "$WORK/greedy.out"
gen --length 60 --top-p 1e-9 --mem-len 100 --clamp-len 0 > "$WORK/topp.out"
body "$WORK/topp.out" | cmp -s - <(body "$WORK/greedy.out") && ok "top-p 1e-9 = top-k 1 (greedy)" \
  || fail "top-p 1e-9 differs from greedy"

gen --length 40 --quiet --compare > "$WORK/cmp.out" || { cat "$WORK/gen.err"; fail "--compare failed"; }
cat "$WORK/cmp.out"
grep -Eq "^speed-up of the memory: [0-9.]+x$" "$WORK/cmp.out" && ok "--compare prints the speed-up" || fail "--compare"

expect_error_line "missing checkpoint" "nope.h5" -- "$BIN/txl-generate" "$WORK/nope.h5"
expect_error_line "bad temperature" "--temperature 0" -- "$BIN/txl-generate" "$WORK/run" --temperature 0
expect_error_line "bad top-p" "--top-p 1.5" -- "$BIN/txl-generate" "$WORK/run" --top-p 1.5
expect_error_line "character outside the vocabulary" "character '#' is not in the vocabulary" -- \
  "$BIN/txl-generate" "$WORK/run" --prompt "a#b"
expect_error_line "more than one rank" "runs on one rank" -- $MPI -n 2 "$BIN/txl-generate" "$WORK/run"
"$BIN/txl-generate" --help | grep -q -- "--top-p P" && ok "--help lists the options" || fail "--help"
finish
