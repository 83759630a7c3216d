#!/usr/bin/env bash
# train.loss_scale (src/optim/loss_scale.h) on the CPU, where fp32 shows what the scaling does
# and does not do:
# - a power-of-two scale is exact: static 2^10, and dynamic from 2^97 growing to its cap 2^100
#   every 3 steps, end with the parameters of the unscaled run, bit for bit (1 and 2 ranks);
# - dynamic: an infinite gradient (the TXL_TRAIN_FAULT hook, step 3) skips that step's update and
#   halves the scale; the run goes on, window finite steps double it again; metrics.jsonl and the
#   checkpoint hold the scale and the skipped count; --stop-at 5 and resume end where the straight
#   run ends (the scaler's state is in the checkpoint);
# - static, or dynamic already at scale 1, stops on the infinite gradient as an unscaled run does;
# - train.loss_scale_init that is not a power of two is one line naming the key.
source "$(dirname "$0")/lib.sh" "$1" "$2"
make_corpus "$WORK/c.h5" 4000 300
small_run_ini "$WORK/c.h5" train.max_step=12 > "$WORK/r.ini"
FAULT=inf_grad:3:layers.1.w_ff2
run() { # NAME RANKS [ARGS...]: a run into $WORK/NAME, its parameters dumped to $WORK/NAME.bin
  local name=$1 p=$2
  shift 2
  $MPI -n "$p" "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/$name" --dump-params "$WORK/$name.bin" "$@" \
    > "$WORK/$name.out" 2>&1 || { sed 's/^/     | /' "$WORK/$name.out"; fail "$name: txl-train exited non-zero"; return 1; }
}
# the train lines of a run's metrics.jsonl as "step:loss_scale:skipped" words
scales() { python3 -c '
import json, sys
print(" ".join("%d:%d:%d" % (r["step"], r["loss_scale"], r["skipped"])
               for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"))' "$1"; }
attr() { h5dump -a "$2" "$1" | sed -n 's/^ *(0): //p'; } # FILE NAME: a root attribute's value

for P in 1 2; do
  run off$P $P
  run static$P $P --set train.loss_scale=static --set train.loss_scale_init=1024
  cmp -s "$WORK/off$P.bin" "$WORK/static$P.bin" && ok "P=$P: static 2^10: the parameters of the unscaled run, bit for bit" \
    || fail "P=$P: static 2^10 changed the parameters"
  run grow$P $P --set train.loss_scale=dynamic --set train.loss_scale_init=158456325028528675187087900672 \
    --set train.loss_scale_window=3
  cmp -s "$WORK/off$P.bin" "$WORK/grow$P.bin" && ok "P=$P: dynamic from 2^97: the parameters of the unscaled run" \
    || fail "P=$P: dynamic scaling from 2^97 changed the parameters"
  check_eq "P=$P: dynamic from 2^97, window 3: 2^98 after step 3, 2^99 after 6, capped at 2^100 from 9" \
    "$(scales "$WORK/grow$P/metrics.jsonl" | tr ' ' '\n' | sed -n '2p;3p;6p;9p;12p' | tr '\n' ' ')" \
    "2:158456325028528675187087900672:0 3:316912650057057350374175801344:0 6:633825300114114700748351602688:0 9:1267650600228229401496703205376:0 12:1267650600228229401496703205376:0 "
done

# dynamic, init 8, window 4, an infinite gradient in step 3: skipped, 4; 4 finite steps (4-7): 8;
# 8-11: 16
run skip 1 --set train.loss_scale=dynamic --set train.loss_scale_init=8 --set train.loss_scale_window=4
env TXL_TRAIN_FAULT=$FAULT $MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/fault" \
  --set train.loss_scale=dynamic --set train.loss_scale_init=8 --set train.loss_scale_window=4 \
  --dump-params "$WORK/fault.bin" > "$WORK/fault.out" 2>&1 && ok "dynamic: the run goes on past the infinite gradient" \
  || { sed 's/^/     | /' "$WORK/fault.out"; fail "dynamic: the infinite gradient stopped the run"; }
check_eq "dynamic: step 3 skipped (scale 8 -> 4), doubled after 4 finite steps (7: 8, 11: 16)" \
  "$(scales "$WORK/fault/metrics.jsonl")" \
  "1:8:0 2:8:0 3:4:1 4:4:0 5:4:0 6:4:0 7:8:0 8:8:0 9:8:0 10:8:0 11:16:0 12:16:0"
grep -q '^step  3/12 .* |g| inf | scale 2^2, 1 skipped' "$WORK/fault.out" \
  && ok "dynamic: the progress line of step 3 says the scale and the skipped step" \
  || fail "dynamic: no 'scale 2^2, 1 skipped' in the progress line of step 3: $(grep '^step  3' "$WORK/fault.out")"
last=$WORK/fault/$(cat "$WORK/fault/latest")
check_eq "dynamic: the last checkpoint's loss_scale, loss_scale_good, loss_scale_skipped" \
  "$(attr "$last" loss_scale) $(attr "$last" loss_scale_good) $(attr "$last" loss_scale_skipped)" "16 1 1"
cmp -s "$WORK/skip.bin" "$WORK/fault.bin" && fail "dynamic: the skipped step changed nothing (the fault had no effect)" \
  || ok "dynamic: skipping step 3's update changes the run (the fault took effect)"
env TXL_TRAIN_FAULT=$FAULT $MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/part" \
  --set train.loss_scale=dynamic --set train.loss_scale_init=8 --set train.loss_scale_window=4 --stop-at 5 \
  > "$WORK/part.out" 2>&1 || true # the requeue status
grep -q "stopped after step 5" "$WORK/part.out" && ok "dynamic: --stop-at 5 stopped after step 5" \
  || { sed 's/^/     | /' "$WORK/part.out"; fail "dynamic: --stop-at 5"; }
$MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/part" --resume "$WORK/part" \
  --set train.loss_scale=dynamic --set train.loss_scale_init=8 --set train.loss_scale_window=4 \
  --dump-params "$WORK/part.bin" > "$WORK/part2.out" 2>&1 || { sed 's/^/     | /' "$WORK/part2.out"; fail "resume"; }
cmp -s "$WORK/part.bin" "$WORK/fault.bin" \
  && ok "dynamic: --stop-at 5 and resume end with the parameters of the straight run" \
  || fail "dynamic: the resumed run differs from the straight run"
check_eq "dynamic: the resumed run's scales (the scaler's state came from the checkpoint)" \
  "$(scales "$WORK/part/metrics.jsonl")" \
  "1:8:0 2:8:0 3:4:1 4:4:0 5:4:0 6:4:0 7:8:0 8:8:0 9:8:0 10:8:0 11:16:0 12:16:0"

# no skipping where the scale is static, or already 1: the run stops as an unscaled one does
for setting in "static 8" "dynamic 1"; do
  set -- $setting
  expect_error_line "loss_scale = $1, init $2: an infinite gradient in step 3 stops the run" \
    "step 3: the loss is [0-9.]+ and the gradient norm inf \(first non-finite gradient: layers.1.w_ff2\[0\]\)" -- \
    env TXL_TRAIN_FAULT=$FAULT $MPI -n 1 "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/stop_$1" \
    --set train.loss_scale=$1 --set train.loss_scale_init=$2
done

expect_error "train.loss_scale_init = 1000: not a power of two" "train.loss_scale_init = 1000 is not a power of two" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad" --set train.loss_scale_init=1000
expect_error "train.loss_scale_init above 2^100 is out of range" "loss_scale_init" -- \
  "$BIN/txl-train" "$WORK/r.ini" --set run.work_dir="$WORK/bad" --set train.loss_scale_init=2.6e30
finish
