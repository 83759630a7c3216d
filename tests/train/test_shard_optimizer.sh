#!/usr/bin/env bash
# ZeRO-1 (dist.shard_optimizer, src/optim/shard.h): each rank holds and updates the optimizer
# state of its slice alone. On 2 ranks (a sum of two has one order: the reduce to each owner adds
# what the all-reduce adds) the run is the unsharded run bit for bit: losses, gradient norms,
# final parameters, and both moments in the checkpoints; also with SGD and with the embedding's
# rows gathered (dist.embed_rows). On 3 ranks (uneven columns, 2 + 1 + 1) the repeat is bit for
# bit and the run matches the unsharded one within test_ranks.sh's bound (the reduces' order may
# differ from the all-reduce's). A sharded checkpoint resumes sharded or not, on 2 ranks bit for
# bit with the uninterrupted run, and on 1 and 3 ranks; LAMB is refused; the start says so.
source "$(dirname "$0")/lib.sh" "$1" "$2"
command -v h5diff >/dev/null || { fail "h5diff not found (apt-get install hdf5-tools)"; finish; }
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=12 train.warmup_step=3 run.checkpoint_interval=6 > "$WORK/r.ini"
printf '[dist]\ncheck_replicas = 1\nbucket_mb = 0.01\n' >> "$WORK/r.ini"
Z="--set dist.shard_optimizer=true"

run() { # NAME RANKS ARGS...: train into $WORK/NAME, the final parameters into $WORK/NAME.bin
  local name=$1 p=$2
  shift 2
  train_into "$name" "$WORK/r.ini" "$p" --dump-params "$WORK/$name.bin" "$@" \
    && ok "$name: $p rank(s), the replicas checked after every step" || { cat "$WORK/$name.out"; fail "$name: the run failed"; }
}
same_state() { # A B: parameters and both moments bit-identical in two checkpoints
  h5diff -q "$1" "$2" /params /params && h5diff -q "$1" "$2" /adam_m /adam_m && h5diff -q "$1" "$2" /adam_v /adam_v
}
bitwise() { # WHAT A B: the losses, the final parameters and the checkpoints of steps 6 and 12 of two runs
  local what=$1 a=$2 b=$3
  check_eq "$what: losses and gradient norms" "$(train_losses "$WORK/$a")" "$(train_losses "$WORK/$b")"
  cmp -s "$WORK/$a.bin" "$WORK/$b.bin" && ok "$what: final parameters bit for bit" || fail "$what: final parameters differ"
  for s in 00000006 00000012; do
    same_state "$WORK/$a/ckpt-$s.h5" "$WORK/$b/ckpt-$s.h5" \
      && ok "$what: the checkpoint of step $((10#$s)): parameters and both moments bit for bit" \
      || fail "$what: the checkpoints of step $s differ"
  done
}

run plain2 2
run zero2 2 $Z
grep -q "optimizer state: sharded over 2 ranks (dist.shard_optimizer)" "$WORK/zero2.out" \
  && ok "the start names the sharding" || { head -30 "$WORK/zero2.out"; fail "no line about the sharded state"; }
grep -q "this rank's slice of the moments" "$WORK/zero2.out" && ok "the memory estimate counts a slice of the moments" \
  || fail "the estimate does not say it counts a slice"
! grep -q "optimizer state: sharded" "$WORK/plain2.out" && ok "unsharded: no such line" || fail "unsharded run says sharded"
bitwise "2 ranks, Adam, sharded = unsharded" zero2 plain2

run sgd_plain2 2 --set train.optim=sgd
run sgd_zero2 2 --set train.optim=sgd $Z
bitwise "2 ranks, SGD, sharded = unsharded" sgd_zero2 sgd_plain2

run rows_plain2 2 --set dist.embed_rows=on
run rows_zero2 2 --set dist.embed_rows=on $Z
bitwise "2 ranks, the embedding's rows gathered, sharded = unsharded" rows_zero2 rows_plain2

run zero2_nooverlap 2 $Z --set dist.overlap_comm=false
bitwise "2 ranks, sharded, buckets after the backward = overlapped" zero2_nooverlap zero2

run zero3 3 $Z
run zero3_again 3 $Z
run plain3 3
bitwise "3 ranks, sharded: the repeat" zero3_again zero3
# the reduce's order against the all-reduce's: test_ranks.sh's bound (relative 68 u per gradient
# sum through 12 Adam steps of lr <= 3e-3: far below 1e-5 of the largest parameter; losses 2e-5)
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/zero3" "$WORK/plain3" 2e-5 --train-steps 12 \
  --params "$WORK/zero3.bin" "$WORK/plain3.bin" 1e-5 \
  && ok "3 ranks: sharded matches unsharded within the bound" || fail "3 ranks: sharded and unsharded disagree"

# resume: a sharded checkpoint of step 6 holds the whole moments (the format unchanged)
mkdir -p "$WORK/from6"
for target in "2 $Z" "2" "1" "3 $Z"; do
  p=${target%% *}
  name="res_${target// /_}"; name=${name//--set_dist.shard_optimizer=true/z}
  rm -rf "$WORK/$name"
  train_into "$name" "$WORK/r.ini" "$p" --resume "$WORK/zero2/ckpt-00000006.h5" --dump-params "$WORK/$name.bin" \
    ${target#"$p"} || { cat "$WORK/$name.out"; fail "$name: the resume failed"; continue; }
  grep -q "resumed from .*ckpt-00000006.h5: step 6" "$WORK/$name.out" && ok "$name: resumed at step 6" \
    || fail "$name: no resume message"
done
cmp -s "$WORK/res_2_z.bin" "$WORK/zero2.bin" && ok "sharded 2 -> sharded 2: the uninterrupted run's parameters, bit for bit" \
  || fail "sharded 2 -> sharded 2: other parameters"
cmp -s "$WORK/res_2.bin" "$WORK/zero2.bin" && ok "sharded 2 -> unsharded 2: the uninterrupted run's parameters, bit for bit" \
  || fail "sharded 2 -> unsharded 2: other parameters"
same_state "$WORK/res_2_z/ckpt-00000012.h5" "$WORK/zero2/ckpt-00000012.h5" \
  && ok "sharded 2 -> sharded 2: the final checkpoint bit for bit" || fail "sharded 2 -> sharded 2: the final checkpoint differs"
for x in res_1 res_3_z; do
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/$x" "$WORK/zero2" 2e-5 --kinds train --after-step 6 \
    --params "$WORK/$x.bin" "$WORK/zero2.bin" 1e-5 \
    && ok "$x: continues the sharded run (within test_ranks.sh's bound)" || fail "$x: does not continue it"
done

expect_error_line "LAMB sharded" "dist.shard_optimizer cannot shard train.optim = lamb" -- \
  $MPI -n 2 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/lamb" --set train.optim=lamb $Z
finish
