/* The CUDA backend's ops written so far, one function per TxlOps member, each with exactly that
 * member's signature (see kernels/ops.h for what each computes, the shapes and the += / =
 * conventions), so that the backend table can take them directly. Plain C API (the rest of txl
 * is C11); every pointer argument of an op is device memory, except the host_* ones.
 *
 * Execution model: one host thread drives one device (dist/ picks it with cudaSetDevice before
 * the first op). All kernels and cuBLAS calls go to the legacy default stream, so ops run in
 * call order; to_host waits for the work before it. The cuBLAS handle and the small layer-norm
 * scratch buffer are made on first use, on the current device.
 *
 * Not written yet (later issue): bias_fill, bias_backward, relu_*, add, scale, sumsq,
 * embedding_backward, posemb_forward, rel_attn_*. */
#ifndef TXL_KERNELS_CUDA_OPS_H
#define TXL_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use; 0 (not an error) when there is no device, no
 * driver, or the driver is too old for the runtime. */
int txl_cuda_device_count(void);

/* ---- memory (memory.cu) ------------------------------------------------------------------ */
void *txl_cuda_alloc(size_t bytes, const char *what); /* zero-filled, 256-byte aligned */
void txl_cuda_free(void *p);
void txl_cuda_copy(void *dst, const void *src, size_t bytes);
void txl_cuda_to_device(void *dst, const void *host_src, size_t bytes);
void txl_cuda_to_host(void *host_dst, const void *src, size_t bytes);
void txl_cuda_zero(void *p, size_t bytes);

/* ---- dense algebra (gemm.cu) ------------------------------------------------------------- */
void txl_cuda_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* ---- embedding (embedding.cu) ------------------------------------------------------------ */
void txl_cuda_embedding_forward(float *out, const int32_t *tok, const float *emb, float scale,
                                int64_t n, int d);

/* ---- dropout (dropout.cu) ---------------------------------------------------------------- */
void txl_cuda_dropout(float *x, int rows, int cols, int feats, int col0, TxlDropout d);

/* ---- layer norm (layernorm.cu) ----------------------------------------------------------- */
void txl_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, int64_t n, int d, float eps);
void txl_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean,
                                 const float *rstd, int64_t n, int d);

/* ---- loss (xent.cu) ---------------------------------------------------------------------- */
void txl_cuda_xent_forward_backward(float *logits, float *loss, const int32_t *target,
                                    float grad_scale, int64_t n, int V);

/* ---- optimizer (adam.cu) ----------------------------------------------------------------- */
void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                          float beta1, float beta2, float eps, int step, float grad_scale);

/* Releases the cuBLAS handle and the scratch buffer (optional, at exit; ops may be called
 * again afterwards and will make them anew). */
void txl_cuda_release(void);

#ifdef __cplusplus
}
#endif

#endif
