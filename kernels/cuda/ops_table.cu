/* The CUDA backend's tables of ops (see kernels/ops.h), one per activation type: "cuda" (TXL_F32)
 * and "cuda-bf16" (TXL_BF16). Every member is the txl_cuda_ function of the same name
 * (kernels/cuda/cuda_ops.h), its _bf16 variant in the bf16 table where the op has one. Filled
 * member by member (C++17 has no designated initialisers), once, on the first call (function-local
 * statics: thread-safe). */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

/* The function of op `f` for the table being made: f, or f_bf16 in the bf16 table. */
#define TXL_PICK(f) (bf16 ? f##_bf16 : f)

static TxlOps make_cuda_ops(TxlDtype act) {
  const bool bf16 = act == TXL_BF16;
  TxlOps t = {};
  t.name = bf16 ? "cuda-bf16" : "cuda";
  t.act = act;
  t.alloc = txl_cuda_alloc;
  t.free = txl_cuda_free;
  t.copy = txl_cuda_copy;
  t.to_device = txl_cuda_to_device;
  t.to_host = txl_cuda_to_host;
  t.zero = txl_cuda_zero;
  t.to_act = TXL_PICK(txl_cuda_to_act);
  t.gemm = TXL_PICK(txl_cuda_gemm);
  t.bias_fill = TXL_PICK(txl_cuda_bias_fill);
  t.bias_backward = TXL_PICK(txl_cuda_bias_backward);
  t.add = TXL_PICK(txl_cuda_add);
  t.sumsq = txl_cuda_sumsq;
  t.embedding_forward = TXL_PICK(txl_cuda_embedding_forward);
  t.embedding_backward = TXL_PICK(txl_cuda_embedding_backward);
  t.posemb_forward = TXL_PICK(txl_cuda_posemb_forward);
  t.dropout = TXL_PICK(txl_cuda_dropout);
  t.bias_relu_dropout_forward = TXL_PICK(txl_cuda_bias_relu_dropout_forward);
  t.relu_dropout_backward = TXL_PICK(txl_cuda_relu_dropout_backward);
  t.layernorm_forward = TXL_PICK(txl_cuda_layernorm_forward);
  t.layernorm_backward = TXL_PICK(txl_cuda_layernorm_backward);
  t.add_layernorm_forward = TXL_PICK(txl_cuda_add_layernorm_forward);
  t.layernorm_backward_dropout = TXL_PICK(txl_cuda_layernorm_backward_dropout);
  t.rel_attn_forward = TXL_PICK(txl_cuda_rel_attn_forward);
  t.rel_attn_backward = TXL_PICK(txl_cuda_rel_attn_backward);
  t.rel_attn_saved_floats = txl_cuda_rel_attn_saved_floats;
  t.rel_attn_workspace = txl_cuda_rel_attn_workspace;
  t.xent_forward_backward = TXL_PICK(txl_cuda_xent_forward_backward);
  t.adam_update = txl_cuda_adam_update;
  return t;
}

extern "C" const TxlOps *txl_ops_cuda(TxlDtype act) {
  static const TxlOps f32 = make_cuda_ops(TXL_F32), bf16 = make_cuda_ops(TXL_BF16);
  switch (act) {
    case TXL_F32: return &f32;
    case TXL_BF16: return &bf16;
  }
  txl_fatal("internal: no CUDA table for activations of type %d", (int)act);
}
