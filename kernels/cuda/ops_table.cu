/* The CUDA backend's tables of ops (see kernels/ops.h), one per activation type: "cuda" (TXL_F32),
 * "cuda-bf16" (TXL_BF16) and "cuda-fp16" (TXL_F16). Every member is the txl_cuda_ entry point of
 * the same name (kernels/cuda/cuda_ops.h), its _bf16 / _fp16 variant in the bf16 / fp16 table where
 * the op has them (kind ACT in kernels/ops.def: one template's instantiations, kernels/cuda/act.h).
 * Filled member by member (C++17 has no designated initialisers), once, on the first call
 * (function-local statics: thread-safe, and after the entry points' constant initialisation). */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

/* The function of an op of kind ONE or ACT (kernels/ops.def) for the table being made. */
#define TXL_CUDA_PICK_ONE(f) f
#define TXL_CUDA_PICK_ACT(f) (act == TXL_BF16 ? f##_bf16 : act == TXL_F16 ? f##_fp16 : f)

static TxlOps make_cuda_ops(TxlDtype act) {
  TxlOps t = {};
  t.name = txl_cuda_table_name(act);
  t.act = act;
  t.row_align = 8;
#define TXL_OP(kind, ret, name, params) t.name = TXL_CUDA_PICK_##kind(txl_cuda_##name);
#include "kernels/ops.def"
#undef TXL_OP
  return t;
}

extern "C" const TxlOps *txl_ops_cuda(TxlDtype act) {
  static const TxlOps f32 = make_cuda_ops(TXL_F32), bf16 = make_cuda_ops(TXL_BF16), fp16 = make_cuda_ops(TXL_F16);
  switch (act) {
    case TXL_F32: return &f32;
    case TXL_BF16: return &bf16;
    case TXL_F16: return &fp16;
  }
  txl_fatal("internal: no CUDA table for activations of type %d", (int)act);
}
