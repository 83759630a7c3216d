/* The CPU backend's table of ops (see kernels/ops.h). */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ops.h"

static const TxlOps txl_cpu_ops = {
    .name = "cpu",
    .act = TXL_F32,
    .alloc = txl_cpu_alloc,
    .free = txl_cpu_free,
    .copy = txl_cpu_copy,
    .to_device = txl_cpu_to_device,
    .to_host = txl_cpu_to_host,
    .zero = txl_cpu_zero,
    .to_act = txl_cpu_to_act,
    .gemm = txl_cpu_gemm,
    .bias_fill = txl_cpu_bias_fill,
    .bias_backward = txl_cpu_bias_backward,
    .add = txl_cpu_add,
    .sumsq = txl_cpu_sumsq,
    .embedding_forward = txl_cpu_embedding_forward,
    .embedding_backward = txl_cpu_embedding_backward,
    .posemb_forward = txl_cpu_posemb_forward,
    .dropout = txl_cpu_dropout,
    .layernorm_forward = txl_cpu_layernorm_forward,
    .layernorm_backward = txl_cpu_layernorm_backward,
    .add_layernorm_forward = txl_cpu_add_layernorm_forward,
    .layernorm_backward_dropout = txl_cpu_layernorm_backward_dropout,
    .bias_relu_dropout_forward = txl_cpu_bias_relu_dropout_forward,
    .relu_dropout_backward = txl_cpu_relu_dropout_backward,
    .rel_attn_forward = txl_cpu_rel_attn_forward,
    .rel_attn_backward = txl_cpu_rel_attn_backward,
    .rel_attn_saved_floats = txl_cpu_rel_attn_saved_floats,
    .rel_attn_workspace = txl_cpu_rel_attn_workspace,
    .xent_forward_backward = txl_cpu_xent_forward_backward,
    .adam_update = txl_cpu_adam_update,
};

const TxlOps *txl_ops_cpu(void) { return &txl_cpu_ops; }
