/* The CUDA backend's table of ops (see kernels/ops.h): every member is the txl_cuda_ function of
 * the same name (kernels/cuda/cuda_ops.h). Filled member by member (C++17 has no designated
 * initialisers), once, on the first call (a function-local static: thread-safe). */
#include "kernels/cuda/cuda_ops.h"

static TxlOps make_cuda_ops(void) {
  TxlOps t = {};
  t.name = "cuda";
  t.alloc = txl_cuda_alloc;
  t.free = txl_cuda_free;
  t.copy = txl_cuda_copy;
  t.to_device = txl_cuda_to_device;
  t.to_host = txl_cuda_to_host;
  t.zero = txl_cuda_zero;
  t.gemm = txl_cuda_gemm;
  t.bias_fill = txl_cuda_bias_fill;
  t.bias_backward = txl_cuda_bias_backward;
  t.add = txl_cuda_add;
  t.sumsq = txl_cuda_sumsq;
  t.embedding_forward = txl_cuda_embedding_forward;
  t.embedding_backward = txl_cuda_embedding_backward;
  t.posemb_forward = txl_cuda_posemb_forward;
  t.dropout = txl_cuda_dropout;
  t.bias_relu_dropout_forward = txl_cuda_bias_relu_dropout_forward;
  t.relu_dropout_backward = txl_cuda_relu_dropout_backward;
  t.layernorm_forward = txl_cuda_layernorm_forward;
  t.layernorm_backward = txl_cuda_layernorm_backward;
  t.add_layernorm_forward = txl_cuda_add_layernorm_forward;
  t.layernorm_backward_dropout = txl_cuda_layernorm_backward_dropout;
  t.rel_attn_forward = txl_cuda_rel_attn_forward;
  t.rel_attn_backward = txl_cuda_rel_attn_backward;
  t.rel_attn_saved_floats = txl_cuda_rel_attn_saved_floats;
  t.rel_attn_workspace = txl_cuda_rel_attn_workspace;
  t.xent_forward_backward = txl_cuda_xent_forward_backward;
  t.adam_update = txl_cuda_adam_update;
  return t;
}

extern "C" const TxlOps *txl_ops_cuda(void) {
  static const TxlOps table = make_cuda_ops();
  return &table;
}
