#!/usr/bin/env bash
# The row-sparse reduction of the tied word embedding (dist.embed_rows, src/train/embed_gather.h):
# with 2, 3 and 4 ranks (3: uneven columns, 2 + 1 + 1) the run matches the dense reduction
# (dist.embed_rows = off) and the 1-rank run within the bound of tests/train/test_ranks.sh, every
# rank holds bit-identical parameters after every step (dist.check_replicas = 1), and a repeat is
# bit for bit; the same with the adaptive softmax over the one table (div_val 1, as wt103_base);
# --bench says which path a run takes (untied or adaptive input: the dense one).
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=12 train.mem_len=16 > "$WORK/r.ini"
# embed_rows = on: this small vocabulary's table is fewer bytes than the rows (auto would not gather)
printf '[dist]\ncheck_replicas = 1\nbucket_mb = 0.01\nembed_rows = on\n' >> "$WORK/r.ini"

run() { # NAME RANKS ARGS...: train and dump the final parameters to $WORK/NAME.bin
  local name=$1 p=$2
  shift 2
  train_into "$name" "$WORK/r.ini" "$p" --dump-params "$WORK/$name.bin" "$@" \
    && ok "$name: $p rank(s), the replicas checked after every step" || { cat "$WORK/$name.out"; fail "$name: the run failed"; }
}
run one 1
for p in 2 3 4; do
  run rows$p $p
  run rows${p}_again $p
  run dense$p $p --set dist.embed_rows=off
  cmp -s "$WORK/rows$p.bin" "$WORK/rows${p}_again.bin" && ok "$p ranks: the repeat holds the same parameters, bit for bit" \
    || fail "$p ranks: the repeat differs"
  check_eq "$p ranks: the repeat's losses" "$(train_losses "$WORK/rows${p}_again")" "$(train_losses "$WORK/rows$p")"
  # The rows change only the order of the embedding gradient's sums (each row added after the
  # rank sum of the output layer's part instead of before it): the bound of test_ranks.sh
  # (relative 68 u per gradient sum, through 12 Adam steps of lr <= 3e-3: far below 1e-5 of the
  # largest parameter; losses 2e-5 relative) holds against both the dense path and one rank.
  for other in dense$p one; do
    python3 "$SRC/tests/lib/compare_runs.py" "$WORK/rows$p" "$WORK/$other" 2e-5 --train-steps 12 \
      --params "$WORK/rows$p.bin" "$WORK/$other.bin" 1e-5 \
      && ok "$p ranks with the rows gathered match $other" || fail "$p ranks with the rows gathered and $other disagree"
  done
done

# wt103_base's shape: the adaptive softmax (cutoffs) over the one tied table (div_val 1), whose
# tail clusters' output gradients land in word_emb's rows too
run ad_rows 2 --set model.cutoffs=20,40
run ad_dense 2 --set model.cutoffs=20,40 --set dist.embed_rows=off
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/ad_rows" "$WORK/ad_dense" 2e-5 --train-steps 12 \
  --params "$WORK/ad_rows.bin" "$WORK/ad_dense.bin" 1e-5 \
  && ok "adaptive softmax, div_val 1: the rows gathered match the dense path" || fail "adaptive softmax, div_val 1: they disagree"

# which path: the --bench line
bench() { # RANKS ARGS...
  local p=$1
  shift
  $MPI -n "$p" "$BIN/txl-train" "$WORK/r.ini" --bench 3 --set run.work_dir="$WORK/bench" "$@" 2>&1
}
line="input-side rows gathered instead"
for args in "" "--set model.cutoffs=20,40"; do
  bench 2 $args > "$WORK/b.out" && grep -q "$line" "$WORK/b.out" && ok "--bench, 2 ranks $args: the rows are gathered" \
    || { cat "$WORK/b.out"; fail "--bench, 2 ranks $args: no line about the gathered rows"; }
done
for args in "--set dist.embed_rows=off" "--set model.tie_weight=false" "--set model.cutoffs=20,40 --set model.div_val=2"; do
  bench 2 $args > "$WORK/b.out" && ! grep -q "$line" "$WORK/b.out" && ok "--bench, 2 ranks, $args: the dense path" \
    || { cat "$WORK/b.out"; fail "--bench, 2 ranks, $args: not the dense path"; }
done
bench 2 --set dist.embed_rows=auto > "$WORK/b.out" && ! grep -q "$line" "$WORK/b.out" \
  && ok "--bench, 2 ranks, embed_rows = auto: this small table is reduced densely" \
  || { cat "$WORK/b.out"; fail "--bench, 2 ranks, embed_rows = auto: gathered rows larger than the table"; }
# 4 rows of 2 columns on each of 2 ranks: 2 x (4 x 2 x 32 floats + ids, each rounded up to 256 bytes)
# = 2,560 bytes against the table's vocabulary x 32 floats (more than 60 x 128 bytes): auto gathers
bench 2 --set dist.embed_rows=auto --set train.tgt_len=4 > "$WORK/b.out" && grep -q "$line" "$WORK/b.out" \
  && ok "--bench, 2 ranks, embed_rows = auto, 4 rows: the rows are gathered" \
  || { cat "$WORK/b.out"; fail "--bench, 2 ranks, embed_rows = auto, 4 rows: not gathered"; }
bench 1 > "$WORK/b.out" && ! grep -q "$line" "$WORK/b.out" && ok "--bench, 1 rank: nothing to gather" \
  || { cat "$WORK/b.out"; fail "--bench, 1 rank"; }
finish
