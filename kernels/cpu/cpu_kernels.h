/* The CPU backend's ops, one function per TxlOps member, with exactly the member's signature
 * (see kernels/ops.h for what each computes, the shapes and the += / = conventions).
 * Host memory throughout. Threads: OpenMP for the element-wise and row-wise ops, OpenBLAS for
 * gemm (kernels/cpu/threads.h sets both). Every op is deterministic: its result does not depend
 * on the number of threads or on their timing (fixed partitions, fixed reduction orders). */
#ifndef TXL_KERNELS_CPU_KERNELS_H
#define TXL_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

/* ---- memory (memory.c) ------------------------------------------------------------------- */
void *txl_cpu_alloc(size_t bytes, const char *what); /* 64-byte aligned, zero-filled */
void txl_cpu_free(void *p);
void txl_cpu_copy(void *dst, const void *src, size_t bytes);
void txl_cpu_to_device(void *dst, const void *host_src, size_t bytes);
void txl_cpu_to_host(void *host_dst, const void *src, size_t bytes);
void txl_cpu_zero(void *p, size_t bytes);
void txl_cpu_to_act(void *dst, const float *src, int64_t n); /* fp32 activations: a copy */

/* ---- dense algebra (gemm.c, elementwise.c) ----------------------------------------------- */
void txl_cpu_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A,
                  int lda, const void *B, int ldb, float beta, void *C, int ldc, TxlDtype c_type);
void txl_cpu_bias_fill(void *x, const float *b, int64_t rows, int n);
void txl_cpu_bias_backward(float *db, const void *dy, int64_t rows, int n);
void txl_cpu_add(void *out, const void *a, const void *b, int64_t n, TxlDtype t);
double txl_cpu_sumsq(const float *x, int64_t n);

/* ---- embedding and positions (embedding.c, posemb.c) ------------------------------------- */
void txl_cpu_embedding_forward(void *out, const int32_t *tok, const void *emb, float scale,
                               int64_t n, int d);
void txl_cpu_embedding_backward(void *demb, TxlDtype demb_type, const void *dout,
                                const int32_t *tok, float scale, int64_t n, int d);
void txl_cpu_posemb_forward(void *R, int K, int d, int clamp_len);

/* ---- dropout (dropout.c) ----------------------------------------------------------------- */
void txl_cpu_dropout(void *x, int rows, int cols, int feats, int col0, TxlDropout d);
/* The same on rows [row0, row0 + rows) of a larger tensor: x points at row row0 (the masks are
 * those of the whole tensor's rows). Used by the fused ops, one row at a time. */
void txl_cpu_dropout_rows(float *x, int row0, int rows, int cols, int feats, int col0, TxlDropout d);

/* ---- fused FFN hidden layer (ffn.c) ---------------------------------------------------------- */
void txl_cpu_bias_relu_dropout_forward(void *a, void *ad, const float *b, int rows, int cols,
                                       int feats, int col0, TxlDropout drop);
void txl_cpu_relu_dropout_backward(void *dx, const void *a, int rows, int cols, int feats,
                                   int col0, TxlDropout drop);

/* ---- layer norm (layernorm.c) ------------------------------------------------------------ */
void txl_cpu_layernorm_forward(void *out, float *mean, float *rstd, const void *inp,
                               const float *w, const float *b, int64_t n, int d, float eps);
void txl_cpu_add_layernorm_forward(void *res, void *out, float *mean, float *rstd,
                                   const void *x, const void *y, const float *w, const float *b,
                                   int64_t n, int d, float eps);
void txl_cpu_layernorm_backward_dropout(void *dinp, void *dbranch, float *dw, float *db,
                                        const void *dout, const void *inp, const float *w,
                                        const float *mean, const float *rstd, int rows, int cols,
                                        int d, int col0, TxlDropout drop);
void txl_cpu_layernorm_backward(void *dinp, float *dw, float *db, const void *dout,
                                const void *inp, const float *w, const float *mean,
                                const float *rstd, int64_t n, int d);

/* ---- relative attention (rel_attn.c) ----------------------------------------------------- */
void txl_cpu_rel_attn_forward(void *vec, float *prob, const void *q, const void *kv,
                              const void *r, const float *u, const float *vb, TxlAttnShape s,
                              TxlDropout drop, void *work);
void txl_cpu_rel_attn_backward(void *dq, void *dkv, void *dr, float *du, float *dvb,
                               const void *dvec, const void *vec, const void *q, const void *kv,
                               const void *r, const float *u, const float *vb, const float *prob,
                               TxlAttnShape s, TxlDropout drop, void *work);
/* The CPU backend saves the probabilities before dropatt: [B, H, L, K]. */
size_t txl_cpu_rel_attn_saved_floats(int L, int K, int B, int H);
size_t txl_cpu_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward);

/* ---- loss (xent.c) ----------------------------------------------------------------------- */
void txl_cpu_xent_forward_backward(void *logits, float *loss, const int32_t *target,
                                   float grad_scale, int64_t n, int V);

/* ---- optimizer (adam.c) ------------------------------------------------------------------ */
void txl_cpu_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                         float beta1, float beta2, float eps, int step, float grad_scale);

#endif
