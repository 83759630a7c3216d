#!/usr/bin/env bash
# txl-train with run.device = cuda, end to end: the same run as the CPU backend (losses of 30
# steps with dropout and dropatt on, the evaluations), bit-identical when repeated, exact resume
# from a checkpoint, TF32 GEMMs close to fp32, bf16 and fp16 mixed precision close to fp32 and
# each bit-identical when repeated and resumed (fp16 on every architecture, sm_75 included), and
# with two GPUs, two ranks through NCCL equal to one. Prints "SKIPPED: no CUDA device" and passes where there is no GPU.
# usage: test_train.sh BIN_DIR SOURCE_DIR [emu]: with "emu", the tools built on the
# kernels' CPU emulator (txl-train-emu, txl-eval-emu, txl-generate-emu) take the tools' place.
source "$2/tests/train/lib.sh" "$1" "$2"
EMU=${3:-}
sfx=${EMU:+-emu}
TRAIN=$BIN/txl-train$sfx EVAL=$BIN/txl-eval$sfx GEN=$BIN/txl-generate$sfx
probe=$("$BIN/test_cuda_parity${EMU:+_emu}" 2>&1 || true)
if [ "$(head -n 1 <<< "$probe")" = "SKIPPED: no CUDA device" ]; then
  echo "SKIPPED: no CUDA device"
  exit 77
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ -z "$EMU" ] || gpus=1 # the emulator is one device
# TF32 and bf16 need sm_80 or newer (txl-train refuses them below: tests/cuda/test_precision_arch.sh);
# the parity test says so when the device is older (a T4, or TXL_EMU_ARCH=sm_75)
tc=1
if grep -q '^SKIPPED on sm_' <<< "$probe"; then
  tc=0
  echo "SKIPPED: the TF32 and bf16 runs ($(grep -m 1 '^SKIPPED on sm_' <<< "$probe" | cut -d: -f1 | sed 's/SKIPPED on //'))"
fi
make_corpus "$WORK/c.h5" 4000 300
{ small_model_ini "$WORK/c.h5"; ini_sections train.tgt_len=16 train.mem_len=16 train.batch_size=4 train.max_step=30 \
    train.lr=0.003 train.warmup_step=5 train.log_interval=1 train.eval_interval=10 eval.eval_tgt_len=16 \
    eval.eval_batch_size=4 eval.max_eval_steps=4; } > "$WORK/t.ini"
run() { # NAME RANKS ARGS...
  local name=$1 p=$2
  shift 2
  if $MPI -n "$p" "$TRAIN" "$WORK/t.ini" --set run.work_dir="$WORK/$name" --dump-params "$WORK/$name.bin" \
       "$@" > "$WORK/$name.txt" 2>&1; then
    ok "$name: trained"
  else
    cat "$WORK/$name.txt"
    fail "$name: the run failed"
  fi
}
# Under the sanitizers (TXL_TEST_SANITIZED=1: the build-asan tree's tests) the *_again repeats
# are left out: a repeat runs the very code of its first run again, so it finds no memory error
# the first one did not, and the determinism it checks is checked by the unsanitized build's
# run of this test (scripts/test.sh runs both).
repeat=1
[ "${TXL_TEST_SANITIZED:-0}" = 1 ] && { repeat=0; echo "note: the *_again repeats are left out under the sanitizers"; }
again() { [ "$repeat" = 1 ] && run "$@" || true; }
run cpu 1
run cuda 1 --set run.device=cuda
again cuda_again 1 --set run.device=cuda
if [ "$tc" = 1 ]; then
  run tf32 1 --set run.device=cuda --set run.precision=tf32
  run bf16 1 --set run.device=cuda --set run.precision=bf16
  again bf16_again 1 --set run.device=cuda --set run.precision=bf16
  # the fused attention (run.attn_impl = fused: forward and backward), also left out under the
  # sanitizers: its kernels run under them in cuda_rel_attn_emu
  again bf16_fused 1 --set run.device=cuda --set run.precision=bf16 --set run.attn_impl=fused
fi
# fp16: fp16 tensor cores came with sm_70, so it runs on every architecture txl supports
run fp16 1 --set run.device=cuda --set run.precision=fp16
again fp16_again 1 --set run.device=cuda --set run.precision=fp16
again fp16_fused 1 --set run.device=cuda --set run.precision=fp16 --set run.attn_impl=fused
# --stop-at 9 on the GPU in precision PREC (a checkpoint, exit 75), then a resume to the end:
# $WORK/stopNAME, its parameters in $WORK/resumedNAME.bin
stop_and_resume() { # PREC NAME
  local prec=$1 name=$2 rc=0
  $MPI -n 1 "$TRAIN" "$WORK/t.ini" --set run.device=cuda --set run.precision="$prec" --set run.work_dir="$WORK/stop$name" \
    --stop-at 9 > "$WORK/stop$name.txt" 2>&1 || rc=$?
  [ "$rc" -eq 75 ] && ok "$prec: --stop-at 9 on the GPU: checkpoint, exit 75" \
    || { cat "$WORK/stop$name.txt"; fail "$prec --stop-at: status $rc"; }
  if $MPI -n 1 "$TRAIN" "$WORK/t.ini" --set run.device=cuda --set run.precision="$prec" --set run.work_dir="$WORK/stop$name" \
       --resume "$WORK/stop$name" --dump-params "$WORK/resumed$name.bin" > "$WORK/resumed$name.txt" 2>&1; then
    ok "$prec: resumed on the GPU"
  else
    cat "$WORK/resumed$name.txt"; fail "$prec: resume on the GPU failed"
  fi
}
stop_and_resume fp32 ""
if [ "$tc" = 1 ]; then stop_and_resume bf16 16; fi
stop_and_resume fp16 h
if [ "$gpus" -ge 2 ]; then run cuda2 2 --set run.device=cuda; fi
# the adaptive input's clusters of their own (div_val 2) in column groups: the evaluation run's
# scatter of its cluster rows sorts more rows than a training group (its scratch reserved when the
# run is made; it once ended the first validation with an internal error)
run ad_chunk 1 --set run.device=cuda --set model.cutoffs=20,40 --set model.div_val=2 --set train.batch_chunk=2 \
  --set train.max_step=4 --set train.warmup_step=0 --set train.eval_interval=2

# the trained checkpoint evaluated and sampled on both devices
for dev in cpu cuda; do
  "$EVAL" "$WORK/cuda" --split test --device "$dev" > "$WORK/eval_$dev.txt" 2>&1 || { cat "$WORK/eval_$dev.txt"; fail "txl-eval --device $dev failed"; }
  # long memory, same_length and clamp_len, as the paper evaluates (the key/value cache across segments)
  "$EVAL" "$WORK/cuda" --split valid --tgt-len 8 --mem-len 20,40 --clamp-len 10 --same-length --device "$dev" \
    >> "$WORK/eval_$dev.txt" 2>&1 || { cat "$WORK/eval_$dev.txt"; fail "txl-eval sweep --device $dev failed"; }
  "$GEN" "$WORK/cuda" --length 40 --seed 5 --device "$dev" > "$WORK/gen_$dev.txt" 2>&1 || { cat "$WORK/gen_$dev.txt"; fail "txl-generate --device $dev failed"; }
done
# the sampled text: the lines that are not figures (timings differ)
text() { grep -v "tok/s\|tokens/s\|txl-generate:" "$1" | grep -v '^$' || true; }
if [ "$(text "$WORK/gen_cpu.txt" | wc -c)" -gt 20 ] && diff <(text "$WORK/gen_cpu.txt") <(text "$WORK/gen_cuda.txt") > /dev/null; then
  ok "txl-generate: the same text from the checkpoint on both devices ($(text "$WORK/gen_cuda.txt" | wc -c) bytes)"
else
  diff "$WORK/gen_cpu.txt" "$WORK/gen_cuda.txt"; fail "txl-generate: different text on the two devices"
fi
[ "$repeat" = 0 ] || { cmp -s "$WORK/cuda.bin" "$WORK/cuda_again.bin" && ok "the GPU run repeats bit for bit (final parameters)" \
  || fail "two identical GPU runs ended with different parameters"; }
cmp -s "$WORK/cuda.bin" "$WORK/resumed.bin" && ok "stopped at step 9 and resumed = uninterrupted, bit for bit" \
  || fail "the resumed GPU run differs from the uninterrupted one"
if [ "$tc" = 1 ]; then
  [ "$repeat" = 0 ] || { cmp -s "$WORK/bf16.bin" "$WORK/bf16_again.bin" && ok "bf16: the run repeats bit for bit (final parameters)" \
    || fail "bf16: two identical runs ended with different parameters"; }
  cmp -s "$WORK/bf16.bin" "$WORK/resumed16.bin" && ok "bf16: stopped at step 9 and resumed = uninterrupted, bit for bit" \
    || fail "bf16: the resumed run differs from the uninterrupted one"
  # the bf16 checkpoint: evaluated in bf16 on the GPU, and in fp32 on the CPU (txl-eval's default
  # there) with the same result up to the activations' rounding
  "$EVAL" "$WORK/bf16" --split test > "$WORK/eval_16_cuda.txt" 2>&1 || { cat "$WORK/eval_16_cuda.txt"; fail "txl-eval of the bf16 run failed"; }
  "$EVAL" "$WORK/bf16" --split test --device cpu > "$WORK/eval_16_cpu.txt" 2>&1 || { cat "$WORK/eval_16_cpu.txt"; fail "txl-eval --device cpu of the bf16 run failed"; }
  "$GEN" "$WORK/bf16" --length 40 --seed 5 > "$WORK/gen16.txt" 2>&1 && [ "$(text "$WORK/gen16.txt" | wc -c)" -gt 20 ] \
    && ok "bf16: txl-generate samples ($(text "$WORK/gen16.txt" | wc -c) bytes)" || { cat "$WORK/gen16.txt"; fail "bf16: txl-generate failed"; }
fi
[ "$repeat" = 0 ] || { cmp -s "$WORK/fp16.bin" "$WORK/fp16_again.bin" && ok "fp16: the run repeats bit for bit (final parameters)" \
  || fail "fp16: two identical runs ended with different parameters"; }
cmp -s "$WORK/fp16.bin" "$WORK/resumedh.bin" && ok "fp16: stopped at step 9 and resumed = uninterrupted, bit for bit" \
  || fail "fp16: the resumed run differs from the uninterrupted one"
grep -q "fp16 activations and GEMMs" "$WORK/fp16.txt" && ok "fp16: the device line says fp16" \
  || { cat "$WORK/fp16.txt"; fail "fp16: no 'fp16 activations and GEMMs' on the device line"; }
grep -q "| scale 2^16, 0 skipped |" "$WORK/fp16.txt" && ! grep -Eq "scale 2\^[0-9]+, [1-9][0-9]* skipped" "$WORK/fp16.txt" \
  && ok "fp16: dynamic loss scaling at 2^16 (train.loss_scale = auto), no step skipped" \
  || { grep "^step" "$WORK/fp16.txt"; fail "fp16: not the dynamic scale 2^16 without skipped steps"; }
# the fp16 checkpoint: evaluated in fp16 on the GPU (txl-eval's default: the checkpoint's
# precision) and in fp32 on the CPU
"$EVAL" "$WORK/fp16" --split test > "$WORK/eval_h_cuda.txt" 2>&1 || { cat "$WORK/eval_h_cuda.txt"; fail "txl-eval of the fp16 run failed"; }
"$EVAL" "$WORK/fp16" --split test --device cpu > "$WORK/eval_h_cpu.txt" 2>&1 || { cat "$WORK/eval_h_cpu.txt"; fail "txl-eval --device cpu of the fp16 run failed"; }
"$GEN" "$WORK/fp16" --length 40 --seed 5 > "$WORK/genh.txt" 2>&1 && [ "$(text "$WORK/genh.txt" | wc -c)" -gt 20 ] \
  && ok "fp16: txl-generate samples ($(text "$WORK/genh.txt" | wc -c) bytes)" || { cat "$WORK/genh.txt"; fail "fp16: txl-generate failed"; }
# Tolerances (relative, per printed loss). CPU against GPU: the step test (test_step.c)
# bounds one step's loss and gradients at 1e-3 relative by the ops' rounding; over 30 Adam steps
# the two runs drift apart by the accumulated parameter differences, each step adding at most
# lr * (relative gradient error) ~ 3e-3 * 1e-3 to parameters of scale ~0.1: 30 * 3e-6 / 0.1 ~ 1e-3
# more. TOL_GPU = 3e-3. TF32 (10-bit mantissa, u = 2^-11 ~ 4.9e-4 per input against 6e-8) is
# ~8000x coarser per product; its sums of up to 64 terms give ~64 * 4.9e-4 ~ 3e-2 relative per
# GEMM at worst, averaged down by the random signs of the errors: TOL_TF32 = 3e-2.
# bf16 against fp32: every stored activation is rounded to an 8-bit mantissa (u = 2^-8 = 3.9e-3).
# Along the path from the embedding to the logits this model stores each value about 8 times per
# layer (q/k/v, the attention vectors, its projection, the residual and its norm, the FFN hidden
# and output, the next residual and norm): 2 layers + embedding + logits ~ 18 roundings, whose
# relative errors add at worst linearly, 18 u ~ 7e-2 on a hidden value, and like a random walk,
# sqrt(18) u ~ 1.7e-2, in the typical case. The loss, log-sum-exp of logits of size ~1 minus the
# target's, moves by the logits' absolute error, ~1.7e-2 nats, on losses of ~5 nats: 3.4e-3
# relative per forward; training for 30 steps on gradients with the same relative error (~1e-2)
# adds lr * 1e-2 per step to parameters of scale 0.1 (3e-4 relative per step, 1e-2 over 30 steps).
# TOL_BF16 = 2e-2, and 5e-3 for txl-eval's one forward (bf16 on the GPU against fp32 on the CPU,
# the same parameters).
# fp16 against fp32: the same count of roundings with fp16's u = 2^-11, eight times finer than
# bf16's, every term of the estimate above scaling with u: TOL_FP16 = 2e-2 / 8 = 2.5e-3, and
# 5e-3 / 8 = 6.25e-4 for txl-eval's one forward. The values stay inside fp16's range: activations
# and logits of order 10 (far below 65504); the gradients carry train.loss_scale = auto's dynamic
# scale 2^16 (src/optim/loss_scale.h; the loss gradient 2^16 / (tgt_len batch_size) = 1024, far
# from fp16's largest value, and no step of these runs is skipped: the progress lines say so), so
# they are above fp16's subnormals; a few that are not still feed Adam, which steps by lr whatever
# a gradient's size, so they change the direction of those few steps, not their length: inside the
# parameter drift above.
# Two ranks against one: only the order of the gradient sums changes (see tests/train/test_ranks.sh),
# TOL_RANKS = 2e-5 as there.
python3 - "$WORK" "$gpus" "$tc" "$repeat" <<'PY' && ok "GPU = CPU run, TF32, bf16 and fp16 close, ranks equal" || fail "runs disagree"
import json, sys
w, gpus, tc, fused = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def losses(name):
    return [(r["kind"], r["loss"]) for r in map(json.loads, open(f"{w}/{name}/metrics.jsonl"))
            if r["kind"] in ("train", "valid", "test")]
def compare(a, b, tol):
    la, lb = losses(a), losses(b)
    if [k for k, _ in la] != [k for k, _ in lb] or sum(k == "train" for k, _ in la) != 30:
        print(f"{a} vs {b}: different rows"); return False
    worst = max(abs(x - y) / abs(y) for (_, x), (_, y) in zip(la, lb))
    print(f"{a} vs {b}: {len(la)} losses, largest relative difference {worst:.2e} (tolerance {tol:.2g})")
    return worst <= tol
def eval_losses(dev):
    import re
    return [float(x) for x in re.findall(r"loss ([0-9.]+) nats", open(f"{w}/eval_{dev}.txt").read())]
def compare_eval(prec, tag, tol):
    """txl-eval of the `prec` run on the GPU (in prec) against the CPU (fp32): eval_<tag>_{cuda,cpu}.txt"""
    g, c = eval_losses(tag + "_cuda"), eval_losses(tag + "_cpu")
    if len(g) != 1 or len(c) != 1:
        print(f"txl-eval of the {prec} run: expected one loss per device, got {g} and {c}")
        return False
    rel = abs(g[0] - c[0]) / c[0]
    print(f"txl-eval of the {prec} run: {prec} on the GPU {g[0]}, fp32 on the CPU {c[0]}: relative "
          f"difference {rel:.2e} (tolerance {tol:g})")
    return rel <= tol
ok = compare("cuda", "cpu", 3e-3)
if tc:
    ok = compare("tf32", "cuda", 3e-2) and ok
    ok = compare("bf16", "cpu", 2e-2) and ok
    ok = compare_eval("bf16", "16", 5e-3) and ok
else:
    print("no TF32 / bf16 on this device: those runs are not compared")
ok = compare("fp16", "cpu", 2.5e-3) and ok
# the fused route rounds the same operands once as the gemm route (q + u, q + vb, P~, dS, dBD), and
# its backward's D_i = dvec_i . vec_i reads the stored vec (one rounding of a forward output): the
# same tolerances
if fused:
    if tc:
        ok = compare("bf16_fused", "cpu", 2e-2) and ok
    ok = compare("fp16_fused", "cpu", 2.5e-3) and ok
ok = compare_eval("fp16", "h", 6.25e-4) and ok
e_cpu, e_gpu = eval_losses("cpu"), eval_losses("cuda")
if len(e_cpu) != 3 or len(e_gpu) != 3:
    print(f"txl-eval: expected 3 losses per device (test; valid with memory 20 and 40), got {e_cpu} and {e_gpu}")
    ok = False
else:
    rel = max(abs(g - c) / c for g, c in zip(e_gpu, e_cpu))
    print(f"txl-eval losses (test; valid at memory 20, 40): cuda {e_gpu}, cpu {e_cpu}: largest relative "
          f"difference {rel:.2e} (tolerance 1e-3, one forward: see test_step.c)")
    ok = ok and rel <= 1e-3
if gpus >= 2:
    ok = compare("cuda2", "cuda", 2e-5) and ok
else:
    print("one GPU: the two-rank NCCL comparison needs two (not run)")
sys.exit(0 if ok else 1)
PY
finish
