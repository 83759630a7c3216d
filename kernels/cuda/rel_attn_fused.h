/* The fused forward of the relative attention (rel_attn_fused.cu): one kernel, scores on tensor
 * cores (mma.sync m16n8k16), online softmax, no score matrix in memory. Private to kernels/cuda;
 * rel_attn.cu calls it for the bf16 and fp16 tables when the route is fused
 * (txl_cuda_set_attn_impl) and rel_attn_fused_fits says the call can take it; otherwise the
 * GEMM route runs. Its outputs are the GEMM route's: vec, and the log-sum-exp of every row in
 * `saved` [B, H, L], from which the GEMM route's backward recomputes the probabilities. */
#ifndef TXL_KERNELS_CUDA_REL_ATTN_FUSED_H
#define TXL_KERNELS_CUDA_REL_ATTN_FUSED_H

#include "kernels/common/dropout.h"
#include "kernels/ops.h"

/* 1 when the fused forward takes this call: a 16-bit table (T is txl_bf16 or txl_fp16), a head
 * size of at most 128, a device of sm_80 or newer with the shared memory the tile needs. */
int rel_attn_fused_fits(const TxlAttnShape &s, size_t act_bytes);
/* Its part that depends on the shape and table alone (the cost count: no device asked). */
int rel_attn_fused_shape_fits(const TxlAttnShape &s, size_t act_bytes);

template <typename T>
void rel_attn_fused_forward(T *vec, float *lse, const T *q, const T *kv, const T *r, const float *u, const float *vb,
                            const float *rb, const TxlAttnShape &s, const TxlDropout &drop);

/* Bytes and FLOPs the fused forward moves and computes (bench_cuda_kernels --count): reads of q,
 * k, v, r per tile that needs them, the writes of vec and lse; tensor FLOPs of the three
 * products, core FLOPs of the softmax. */
void rel_attn_fused_cost(const TxlAttnShape &s, size_t act_bytes, int has_bd, double *bytes, double *tensor_flops,
                         double *core_flops);

#endif
