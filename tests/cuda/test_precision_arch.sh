#!/usr/bin/env bash
# run.precision tf32 and bf16 need TF32 / bf16 tensor arithmetic (compute capability 8.0 or
# newer): on an older GPU txl-train must refuse them at start with one line naming run.precision,
# the device and its sm_XY, and saying to use fp32. Runs txl-train-emu, the CUDA backend on the
# kernels' CPU emulator, as a T4 (TXL_EMU_ARCH=sm_75).
# usage: test_precision_arch.sh BIN_DIR SOURCE_DIR
source "$2/tests/train/lib.sh" "$1" "$2"
TRAIN=$BIN/txl-train-emu
make_corpus "$WORK/c.h5" 400 100
small_run_ini "$WORK/c.h5" > "$WORK/t.ini"
for p in bf16 tf32; do
  expect_error_line "run.precision = $p on sm_75" \
    "run\.precision = $p needs compute capability 8\.0" "cuda:0 \(Tesla T4 .*\) is sm_75" "use run\.precision = fp32" \
    -- env TXL_EMU_ARCH=sm_75 "$TRAIN" "$WORK/t.ini" --set run.device=cuda --set run.precision=$p \
    --set run.work_dir="$WORK/$p"
done
finish
