#!/usr/bin/env bash
# run.precision tf32 and bf16 need TF32 / bf16 tensor arithmetic (compute capability 8.0 or
# newer): on an older GPU txl-train must refuse them at start with one line naming run.precision,
# the device and its sm_XY, and saying to use fp32 (or fp16). fp16 needs only fp16 tensor cores
# (sm_70 and newer): it must train there, and say so on its device line. Runs txl-train-emu, the
# CUDA backend on the kernels' CPU emulator, as a T4 (TXL_EMU_ARCH=sm_75).
# usage: test_precision_arch.sh BIN_DIR SOURCE_DIR
source "$2/tests/train/lib.sh" "$1" "$2"
TRAIN=$BIN/txl-train-emu
make_corpus "$WORK/c.h5" 400 100
small_run_ini "$WORK/c.h5" train.max_step=2 > "$WORK/t.ini"
for p in bf16 tf32; do
  expect_error_line "run.precision = $p on sm_75" \
    "run\.precision = $p needs compute capability 8\.0" "cuda:0 \(Tesla T4 .*\) is sm_75" "use run\.precision = fp32" \
    -- env TXL_EMU_ARCH=sm_75 "$TRAIN" "$WORK/t.ini" --set run.device=cuda --set run.precision=$p \
    --set run.work_dir="$WORK/$p"
done
if TXL_EMU_ARCH=sm_75 timeout 300 "$TRAIN" "$WORK/t.ini" --set run.device=cuda --set run.precision=fp16 \
     --set run.work_dir="$WORK/fp16" > "$WORK/fp16.txt" 2>&1 &&
   grep -q "sm_75.*fp16 activations and GEMMs" "$WORK/fp16.txt"; then
  ok "run.precision = fp16 on sm_75: trained ($(grep -m 1 -o 'cuda:0 (.*fp16 activations and GEMMs)' "$WORK/fp16.txt"))"
else
  cat "$WORK/fp16.txt"
  fail "run.precision = fp16 on sm_75: refused, failed, or no fp16 device line"
fi
finish
