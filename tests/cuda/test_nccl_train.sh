#!/usr/bin/env bash
# Several ranks of run.device = cuda through the real NCCL path (dist/nccl.c, the bucketed
# reducer's device transport, the embedding rows' all-gather) on the emulator's CUDA and NCCL
# (kernels/emu): txl-train-emu on 2, 3 and 4 ranks, with uneven shards (5 columns), trains as the
# CPU backend does on the same rank count, with the embedding's rows gathered (dist.embed_rows)
# too; it repeats itself and resumes on 3 ranks bit for bit (final parameters compared byte by
# byte), resumes on 2, replays its steps as CUDA graphs with NCCL's collectives captured (the
# uncaptured run's parameters bit for bit; a replayed step one graph launch and no kernel launch;
# also the wt103 recipe's shape: adaptive input and softmax, div_val 2, batch_chunk 2), shards
# the optimizer (dist.shard_optimizer: the unsharded run's bits on 2 ranks), and its benchmark says the all-reduce and the gather went through NCCL.
# Usage: test_nccl_train.sh BIN_DIR SOURCE_DIR
source "$2/tests/train/lib.sh" "$1" "$2"
command -v mpirun > /dev/null || { echo "SKIPPED: mpirun not found"; exit 77; }
[ -x "$BIN/txl-train-emu" ] || { echo "SKIPPED: no txl-train-emu in this build"; exit 77; }
export TXL_EMU_GPUS=4 # an emulated node with a GPU for each rank

make_corpus "$WORK/c.h5" 3000 300
small_run_ini "$WORK/c.h5" train.batch_size=5 train.max_step=8 run.threads=1 > "$WORK/r.ini"

emu() { # NAME RANKS ARGS...: txl-train-emu, run.device = cuda
  local name=$1 p=$2
  shift 2
  $MPI -n "$p" "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/$name" "$@" \
    > "$WORK/$name.out" 2>&1
}

for p in 2 3 4; do
  train_into cpu$p "$WORK/r.ini" "$p" --set run.device=cpu || { cat "$WORK/cpu$p.out"; fail "$p ranks: the CPU run failed"; continue; }
  emu gpu$p "$p" --dump-params "$WORK/gpu$p.bin" || { cat "$WORK/gpu$p.out"; fail "$p ranks: the emulated CUDA run failed"; continue; }
  # the tolerance of tests/cuda/test_train.sh's GPU = CPU comparison (3e-3 relative per loss over
  # 30 Adam steps, derived there; these are 8, and the all-reduce sums the same shards' gradients)
  python3 "$SRC/tests/lib/compare_runs.py" "$WORK/gpu$p" "$WORK/cpu$p" 3e-3 --kinds train,valid,test --train-steps 8 \
    && ok "$p ranks, 5 columns: the emulated GPUs through NCCL train as the CPU (losses within 3e-3)" \
    || fail "$p ranks: the emulated NCCL run's losses differ from the CPU's"
done

# the input embedding's rows gathered across ranks (ncclAllGather) instead of reduced with the table
train_into cpu3rows "$WORK/r.ini" 3 --set run.device=cpu --set dist.embed_rows=on \
  || { cat "$WORK/cpu3rows.out"; fail "3 ranks, rows gathered: the CPU run failed"; }
emu gpu3rows 3 --set dist.embed_rows=on || { cat "$WORK/gpu3rows.out"; fail "3 ranks, rows gathered: the emulated run failed"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/gpu3rows" "$WORK/cpu3rows" 3e-3 --kinds train,valid,test --train-steps 8 \
  && ok "3 ranks, the embedding's rows gathered: as the CPU (losses within 3e-3)" \
  || fail "3 ranks, rows gathered: the losses differ from the CPU's"

# bit for bit: a repeat, and a run stopped at step 4 and resumed on 3 ranks, end with the
# parameters of the whole run, gpu3 above (the emulated collectives sum in a fixed order for a rank count)
emu again3 3 --dump-params "$WORK/again3.bin" || { cat "$WORK/again3.out"; fail "3 ranks: the repeat failed"; }
cmp -s "$WORK/gpu3.bin" "$WORK/again3.bin" && ok "3 ranks: a repeat ends with the same parameters, bit for bit" \
  || fail "3 ranks: a repeat's parameters differ"
for q in 3 2; do
  rc=0; emu split$q 3 --stop-at 4 || rc=$? # status 75: stopped after step 4's checkpoint
  [ $rc -eq 75 ] || { cat "$WORK/split$q.out"; fail "3 ranks: --stop-at 4 exit status $rc"; continue; }
  emu split$q "$q" --resume "$WORK/split$q" --dump-params "$WORK/split$q.bin" \
    || { cat "$WORK/split$q.out"; fail "3 -> $q ranks: the resume failed"; continue; }
done
cmp -s "$WORK/gpu3.bin" "$WORK/split3.bin" && ok "3 ranks: stopped at step 4 and resumed, the same parameters bit for bit" \
  || fail "3 ranks: the resumed run's parameters differ"
# another rank count sums in another order: the tolerance of tests/train/test_resume.sh (2e-5)
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/split2" "$WORK/gpu3" 2e-5 --kinds train --train-steps 8 \
  && ok "3 -> 2 ranks: the resumed run continues the losses (within 2e-5)" || fail "3 -> 2 ranks: the losses differ"

# run.cuda_graph (auto: on here) captured the steps with NCCL's all-reduce in them; off, they are
# issued one by one: the same parameters, bit for bit
grep -Eq '^cuda graph: [1-9][0-9]* steps replayed' "$WORK/gpu3.out" && ok "3 ranks: $(grep '^cuda graph: [0-9]' "$WORK/gpu3.out")" \
  || fail "3 ranks: no step replayed as a graph: $(grep '^cuda graph' "$WORK/gpu3.out")"
emu nograph3 3 --set run.cuda_graph=off --dump-params "$WORK/nograph3.bin" || { cat "$WORK/nograph3.out"; fail "3 ranks, graphs off: the run failed"; }
cmp -s "$WORK/gpu3.bin" "$WORK/nograph3.bin" && ok "3 ranks: the graph's replays end with the uncaptured run's parameters, bit for bit" \
  || fail "3 ranks: the captured run's parameters differ from the uncaptured run's"
# the wt103 recipe's shape (adaptive input and softmax, div_val > 1, two column groups) on 2
# ranks: captured with its grouping on the device, the uncaptured run's parameters bit for bit
WT103=(--set model.cutoffs=20,40 --set model.div_val=2 --set train.batch_chunk=2)
emu adapt2 2 "${WT103[@]}" --dump-params "$WORK/adapt2.bin" || { cat "$WORK/adapt2.out"; fail "2 ranks, adaptive: the run failed"; }
grep -Eq '^cuda graph: [1-9][0-9]* steps replayed' "$WORK/adapt2.out" && ok "2 ranks, adaptive, batch_chunk 2: $(grep '^cuda graph: [0-9]' "$WORK/adapt2.out")" \
  || fail "2 ranks, adaptive: no step replayed as a graph: $(grep '^cuda graph' "$WORK/adapt2.out")"
emu adapt2off 2 "${WT103[@]}" --set run.cuda_graph=off --dump-params "$WORK/adapt2off.bin" \
  || { cat "$WORK/adapt2off.out"; fail "2 ranks, adaptive, graphs off: the run failed"; }
cmp -s "$WORK/adapt2.bin" "$WORK/adapt2off.bin" && ok "2 ranks, adaptive: the replays end with the uncaptured run's parameters, bit for bit" \
  || fail "2 ranks, adaptive: the captured run's parameters differ from the uncaptured run's"
# ZeRO-1 (dist.shard_optimizer) through NCCL: the gradient reduced to each slice's owner
# (ncclReduce), the norm's parts summed (ncclAllReduce of doubles), the slices shared
# (ncclBroadcast in a group), all captured with the step. On 2 ranks (a sum of two has one order)
# the unsharded run's parameters bit for bit, with graphs and without, with the embedding's rows
# gathered too, and stopped and resumed; on 3 the unsharded run within tests/train/test_ranks.sh's
# bound (the reduces' order may differ from the all-reduce's).
Z=(--set dist.shard_optimizer=true)
emu zgpu2 2 "${Z[@]}" --dump-params "$WORK/zgpu2.bin" || { cat "$WORK/zgpu2.out"; fail "2 ranks, sharded: the run failed"; }
grep -Eq '^cuda graph: [1-9][0-9]* steps replayed' "$WORK/zgpu2.out" && ok "2 ranks, sharded: $(grep '^cuda graph: [0-9]' "$WORK/zgpu2.out")" \
  || fail "2 ranks, sharded: no step replayed as a graph: $(grep '^cuda graph' "$WORK/zgpu2.out")"
emu zgpu2off 2 "${Z[@]}" --set run.cuda_graph=off --dump-params "$WORK/zgpu2off.bin" || { cat "$WORK/zgpu2off.out"; fail "2 ranks, sharded, graphs off: the run failed"; }
emu gpu2rows 2 --set dist.embed_rows=on --dump-params "$WORK/gpu2rows.bin" || { cat "$WORK/gpu2rows.out"; fail "2 ranks, rows: the run failed"; }
emu zgpu2rows 2 "${Z[@]}" --set dist.embed_rows=on --dump-params "$WORK/zgpu2rows.bin" || { cat "$WORK/zgpu2rows.out"; fail "2 ranks, sharded, rows: the run failed"; }
rc=0; emu zsplit2 2 "${Z[@]}" --stop-at 4 || rc=$?
[ $rc -eq 75 ] || { cat "$WORK/zsplit2.out"; fail "2 ranks, sharded: --stop-at 4 exit status $rc"; }
emu zsplit2 2 "${Z[@]}" --resume "$WORK/zsplit2" --dump-params "$WORK/zsplit2.bin" || { cat "$WORK/zsplit2.out"; fail "2 ranks, sharded: the resume failed"; }
for pair in "zgpu2 gpu2 sharded," "zgpu2off gpu2 sharded, graphs off," "zgpu2rows gpu2rows sharded, the rows gathered," \
            "zsplit2 gpu2 sharded, stopped at step 4 and resumed,"; do
  read -r a b what <<< "$pair"
  cmp -s "$WORK/$a.bin" "$WORK/$b.bin" && ok "2 ranks, $what the unsharded run's parameters bit for bit" \
    || fail "2 ranks, $what: the parameters differ from the unsharded run's"
done
emu zgpu3 3 "${Z[@]}" --dump-params "$WORK/zgpu3.bin" || { cat "$WORK/zgpu3.out"; fail "3 ranks, sharded: the run failed"; }
python3 "$SRC/tests/lib/compare_runs.py" "$WORK/zgpu3" "$WORK/gpu3" 2e-5 --kinds train --train-steps 8 \
  --params "$WORK/zgpu3.bin" "$WORK/gpu3.bin" 1e-5 \
  && ok "3 ranks, sharded: the unsharded run within the bound" || fail "3 ranks, sharded: differs from the unsharded run"

# a replayed step on 2 ranks: no kernel launch of the host's, one graph launch, and no host
# synchronisation of its own (the upload ring may make the host wait when it runs a ring ahead of
# the device, which here lags behind the other rank's host: so the least over the steps is 0, the
# most one wait per upload of the step, as each may move the ring to its next slot
# (kernels/cuda/upload.cu): each column group's inputs and the optimizer's constants, groups + 1);
# the small model, sharded too, and the wt103 recipe's shape
small_cuda_bench_ini "$WORK/small.ini"
for v in "small 2" "small-sharded 2 --set dist.shard_optimizer=true" "wt103-shaped 3 --set model.cutoffs=100,300 --set model.div_val=2 --set train.batch_chunk=2"; do
  name=${v%% *} rest=${v#"$name "} slots=${rest%% *} args=${rest#"$slots"}
  # shellcheck disable=SC2086
  out=$($MPI -n 2 "$BIN/txl-train-emu" "$WORK/small.ini" --bench 4 --bench-warmup 3 $args 2>&1) || { printf '%s\n' "$out"; fail "2 ranks, $name: the graph's --bench failed"; }
  line=$(grep -E '^bench: per step: ' <<< "$out" || true)
  if [[ $line =~ launches\ 0\ to\ 0,\ synchronisations\ 0\ to\ ([0-9]+),\ graph\ launches\ 1\ to\ 1 ]] && (( BASH_REMATCH[1] <= slots )) ||
     [[ $line =~ ^bench:\ per\ step:\ 0\ kernel\ launches,\ 0\ host\ synchronisations,\ 1\ graph\ launches ]]; then
    ok "2 ranks, $name, replayed: $line"
  else
    fail "2 ranks, $name, replayed: expected 0 kernel launches, 1 graph launch, at least one step without a host synchronisation and at most $slots in one: $line"
  fi
done

# the benchmark names the path the gradients took
out=$($MPI -n 2 "$BIN/txl-train-emu" "$WORK/r.ini" --set run.device=cuda --set run.work_dir="$WORK/bench" \
  --set dist.embed_rows=on --bench 2 --bench-warmup 1 2>&1) || { printf '%s\n' "$out"; fail "2 ranks: --bench failed"; }
printf '%s\n' "$out" | grep -q "gradient all-reduce of .* through NCCL on its own stream" \
  && ok "2 ranks: --bench reports the all-reduce through NCCL" \
  || { printf '%s\n' "$out" | grep -i "all-reduce"; fail "2 ranks: --bench does not report NCCL"; }
printf '%s\n' "$out" | grep -q "input-side rows gathered instead" \
  && ok "2 ranks: --bench reports the embedding's rows gathered" || fail "2 ranks: no gather of the rows"
finish
