/* The fused relative attention (rel_attn_fused.cu, the forward; rel_attn_fused_bwd.cu, the
 * backward): scores on tensor cores (mma.sync m16n8k16), online softmax, no score matrix in
 * memory. Private to kernels/cuda; rel_attn.cu calls them for the bf16 and fp16 tables when the
 * route is fused (txl_cuda_set_attn_impl) and the *_fits functions say the call can take them;
 * otherwise the GEMM route runs (each direction on its own: the outputs are the GEMM route's, vec
 * and the log-sum-exp of every row in `saved` [B, H, L], so either backward follows either
 * forward). */
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

/* The fused backward (rel_attn_fused_bwd.cu): 1 when it takes this call (a 16-bit table, a head
 * size of at most 64, sm_80 or newer with the shared memory its kernels need). */
int rel_attn_fused_backward_fits(const TxlAttnShape &s, size_t act_bytes);
int rel_attn_fused_backward_shape_fits(const TxlAttnShape &s, size_t act_bytes);
/* Its workspace: D [B, H, L] and the partial sums of du, dvb, dr, drb; it covers every call of the
 * same L, B, H, dh and at most the same K (the model's workspace serves shorter memories). */
size_t rel_attn_fused_backward_workspace(const TxlAttnShape &s);

template <typename T>
void rel_attn_fused_backward(T *dq, T *dkv, T *dr, float *du, float *dvb, float *drb, const T *dvec, const T *vec,
                             const T *q, const T *kv, const T *r, const float *u, const float *vb, const float *rb,
                             const float *lse, const TxlAttnShape &s, const TxlDropout &drop, void *work);

/* Bytes, FLOPs and launches of the fused backward (bench_cuda_kernels --count). */
void rel_attn_fused_backward_cost(const TxlAttnShape &s, size_t act_bytes, int has_bd, int has_rb, double *bytes,
                                  double *tensor_flops, double *core_flops, double *launches);

#endif
