/* The CUDA backend's ops, one function per TxlOps member and activation type (see below), each
 * with exactly that member's signature (see kernels/ops.h for what each computes, the shapes and the += / =
 * conventions), so that the backend table can take them directly. Plain C API (the rest of txl
 * is C11); every pointer argument of an op is device memory, except the host_* ones.
 *
 * Execution model: one host thread drives one device (txl_cuda_set_device picks it before the
 * first op). All kernels and cuBLAS calls go to the legacy default stream, so ops run in call
 * order; to_host waits for the work before it. The cuBLAS handle and the scratch buffers of the
 * reductions (layer-norm dw/db partials, column-sum and sum-of-squares partials, the sort of the
 * embedding backward) are made on the first call, on the current device, and grown only if a
 * later call is larger (training's shapes are fixed after the first step).
 *
 * txl_ops_cuda(act) (ops_table.cu) is the backend table made of them. */
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

/* Makes `gpu` this host thread's device and describes it: name (into name[0, len)), memory in
 * bytes, streaming multiprocessors, the fp32 peak of its CUDA cores in FLOP/s (SMs x clock x
 * 128 FMA per SM and cycle, the figure of sm_80 / sm_90) and its compute capability. */
typedef struct {
  char name[256]; /* as cudaDeviceProp.name */
  size_t memory;
  size_t free_memory; /* free when set: what this process may still allocate (cudaMemGetInfo) */
  int sms, major, minor;
  double fp32_peak;  /* FLOP/s */
  double dram_peak;  /* bytes/s: 2 x memory clock x bus width (double data rate) */
} TxlCudaDevice;
void txl_cuda_set_device(int gpu, TxlCudaDevice *info);

/* Milliseconds per call of fn(ctx) (work queued on the default stream), timed with CUDA events
 * over `iters` calls after `warmup` untimed ones (benchmarks). */
double txl_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int warmup, int iters);

/* GEMM arithmetic of the fp32 table's txl_cuda_gemm (run.precision fp32 or tf32). Operands and
 * results stay fp32 in memory; TF32 rounds the operands inside the tensor cores (10-bit
 * mantissa) and accumulates in fp32. The bf16 table's txl_cuda_gemm_bf16 always computes in
 * fp32 on its bf16 operands (exactly widened) and is not affected. */
typedef enum { TXL_GEMM_FP32 = 0, TXL_GEMM_TF32 = 1 } TxlGemmMath;
void txl_cuda_set_gemm_math(TxlGemmMath math);

/* Every op with activation tensors (the `void *` of its TxlOps signature) comes twice: txl_cuda_X
 * for the "cuda" table (activations fp32) and txl_cuda_X_bf16 for the "cuda-bf16" table
 * (activations bf16), with the same signature. Where an op takes a TxlDtype, txl_cuda_X accepts
 * TXL_F32 only and txl_cuda_X_bf16 TXL_BF16 or TXL_F32; any other ends the job as an internal
 * error. */

/* ---- memory (memory.cu; to_act: elementwise.cu) ------------------------------------------ */
void *txl_cuda_alloc(size_t bytes, const char *what); /* zero-filled, 256-byte aligned */
void txl_cuda_free(void *p);
void txl_cuda_copy(void *dst, const void *src, size_t bytes);
void txl_cuda_to_device(void *dst, const void *host_src, size_t bytes);
void txl_cuda_to_host(void *host_dst, const void *src, size_t bytes);
void txl_cuda_zero(void *p, size_t bytes);
void txl_cuda_to_act(void *dst, const float *src, int64_t n);      /* a copy               */
void txl_cuda_to_act_bf16(void *dst, const float *src, int64_t n); /* rounded to bf16 (RNE) */

/* ---- dense algebra (gemm.cu) ------------------------------------------------------------- */
void txl_cuda_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A,
                   int lda, const void *B, int ldb, float beta, void *C, int ldc,
                   TxlDtype c_type);
void txl_cuda_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A,
                        int lda, const void *B, int ldb, float beta, void *C, int ldc,
                        TxlDtype c_type);

/* ---- element-wise and reductions (elementwise.cu) ------------------------------------------ */
void txl_cuda_bias_fill(void *x, const float *b, int64_t rows, int n);
void txl_cuda_bias_fill_bf16(void *x, const float *b, int64_t rows, int n);
void txl_cuda_bias_backward(float *db, const void *dy, int64_t rows, int n);
void txl_cuda_bias_backward_bf16(float *db, const void *dy, int64_t rows, int n);
void txl_cuda_add(void *out, const void *a, const void *b, int64_t n, TxlDtype t);
void txl_cuda_add_bf16(void *out, const void *a, const void *b, int64_t n, TxlDtype t);
double txl_cuda_sumsq(const float *x, int64_t n);

/* ---- fused FFN hidden layer (ffn.cu) ------------------------------------------------------ */
void txl_cuda_bias_relu_dropout_forward(void *a, void *ad, const float *b, int rows, int cols,
                                        int feats, int col0, TxlDropout drop);
void txl_cuda_bias_relu_dropout_forward_bf16(void *a, void *ad, const float *b, int rows,
                                             int cols, int feats, int col0, TxlDropout drop);
void txl_cuda_relu_dropout_backward(void *dx, const void *a, int rows, int cols, int feats,
                                    int col0, TxlDropout drop);
void txl_cuda_relu_dropout_backward_bf16(void *dx, const void *a, int rows, int cols, int feats,
                                         int col0, TxlDropout drop);

/* ---- embedding and positions (embedding.cu, posemb.cu) ------------------------------------ */
void txl_cuda_embedding_forward(void *out, const int32_t *tok, const void *emb, float scale,
                                int64_t n, int d);
void txl_cuda_embedding_forward_bf16(void *out, const int32_t *tok, const void *emb, float scale,
                                     int64_t n, int d);
void txl_cuda_embedding_backward(void *demb, TxlDtype demb_type, const void *dout,
                                 const int32_t *tok, float scale, int64_t n, int d);
void txl_cuda_embedding_backward_bf16(void *demb, TxlDtype demb_type, const void *dout,
                                      const int32_t *tok, float scale, int64_t n, int d);
void txl_cuda_posemb_forward(void *R, int K, int d, int clamp_len);
void txl_cuda_posemb_forward_bf16(void *R, int K, int d, int clamp_len);

/* ---- dropout (dropout.cu) ---------------------------------------------------------------- */
void txl_cuda_dropout(void *x, int rows, int cols, int feats, int col0, TxlDropout d);
void txl_cuda_dropout_bf16(void *x, int rows, int cols, int feats, int col0, TxlDropout d);

/* ---- layer norm (layernorm.cu) ----------------------------------------------------------- */
void txl_cuda_layernorm_forward(void *out, float *mean, float *rstd, const void *inp,
                                const float *w, const float *b, int64_t n, int d, float eps);
void txl_cuda_layernorm_forward_bf16(void *out, float *mean, float *rstd, const void *inp,
                                     const float *w, const float *b, int64_t n, int d, float eps);
void txl_cuda_layernorm_backward(void *dinp, float *dw, float *db, const void *dout,
                                 const void *inp, const float *w, const float *mean,
                                 const float *rstd, int64_t n, int d);
void txl_cuda_layernorm_backward_bf16(void *dinp, float *dw, float *db, const void *dout,
                                      const void *inp, const float *w, const float *mean,
                                      const float *rstd, int64_t n, int d);

void txl_cuda_add_layernorm_forward(void *res, void *out, float *mean, float *rstd,
                                    const void *x, const void *y, const float *w, const float *b,
                                    int64_t n, int d, float eps);
void txl_cuda_add_layernorm_forward_bf16(void *res, void *out, float *mean, float *rstd,
                                         const void *x, const void *y, const float *w,
                                         const float *b, int64_t n, int d, float eps);
void txl_cuda_layernorm_backward_dropout(void *dinp, void *dbranch, float *dw, float *db,
                                         const void *dout, const void *inp, const float *w,
                                         const float *mean, const float *rstd, int rows, int cols,
                                         int d, int col0, TxlDropout drop);
void txl_cuda_layernorm_backward_dropout_bf16(void *dinp, void *dbranch, float *dw, float *db,
                                              const void *dout, const void *inp, const float *w,
                                              const float *mean, const float *rstd, int rows,
                                              int cols, int d, int col0, TxlDropout drop);

/* ---- relative attention (rel_attn.cu) ----------------------------------------------------- */
void txl_cuda_rel_attn_forward(void *vec, float *saved, const void *q, const void *kv,
                               const void *r, const float *u, const float *vb, TxlAttnShape s,
                               TxlDropout drop, void *work);
void txl_cuda_rel_attn_forward_bf16(void *vec, float *saved, const void *q, const void *kv,
                                    const void *r, const float *u, const float *vb,
                                    TxlAttnShape s, TxlDropout drop, void *work);
void txl_cuda_rel_attn_backward(void *dq, void *dkv, void *dr, float *du, float *dvb,
                                const void *dvec, const void *vec, const void *q, const void *kv,
                                const void *r, const float *u, const float *vb,
                                const float *saved, TxlAttnShape s, TxlDropout drop, void *work);
void txl_cuda_rel_attn_backward_bf16(void *dq, void *dkv, void *dr, float *du, float *dvb,
                                     const void *dvec, const void *vec, const void *q,
                                     const void *kv, const void *r, const float *u,
                                     const float *vb, const float *saved, TxlAttnShape s,
                                     TxlDropout drop, void *work);
size_t txl_cuda_rel_attn_saved_floats(int L, int K, int B, int H);
size_t txl_cuda_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward);

/* ---- loss (xent.cu) ---------------------------------------------------------------------- */
void txl_cuda_xent_forward_backward(void *logits, float *loss, const int32_t *target,
                                    float grad_scale, int64_t n, int V);
void txl_cuda_xent_forward_backward_bf16(void *logits, float *loss, const int32_t *target,
                                         float grad_scale, int64_t n, int V);

/* ---- optimizer (adam.cu) ----------------------------------------------------------------- */
void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                          float beta1, float beta2, float eps, int step, float grad_scale);

/* ---- the backend ------------------------------------------------------------------------- */
/* The table of the ops above for activations of type act (ops_table.cu): "cuda" (TXL_F32: the
 * txl_cuda_X functions) or "cuda-bf16" (TXL_BF16: the txl_cuda_X_bf16 ones where an op has two).
 * Any other act ends the job as an internal error. */
const TxlOps *txl_ops_cuda(TxlDtype act);

/* Releases the cuBLAS handle and the scratch buffers (optional, at exit; ops may be called
 * again afterwards and will make them anew). */
void txl_cuda_release(void);

#ifdef __cplusplus
}
#endif

#endif
