/* The CUDA backend's ops written so far, one function per TxlOps member, each with exactly that
 * member's signature (see kernels/ops.h for what each computes, the shapes and the += / =
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
 * txl_ops_cuda() (ops_table.cu) is the backend table made of them. */
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
  int sms, major, minor;
  double fp32_peak;  /* FLOP/s */
  double dram_peak;  /* bytes/s: 2 x memory clock x bus width (double data rate) */
} TxlCudaDevice;
void txl_cuda_set_device(int gpu, TxlCudaDevice *info);

/* Milliseconds per call of fn(ctx) (work queued on the default stream), timed with CUDA events
 * over `iters` calls after `warmup` untimed ones (benchmarks). */
double txl_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int warmup, int iters);

/* GEMM arithmetic of txl_cuda_gemm (run.precision). Operands and results stay fp32 in memory;
 * TF32 and BF16 round the operands inside the tensor cores (10-bit / 7-bit mantissas) and
 * accumulate in fp32. */
typedef enum { TXL_GEMM_FP32 = 0, TXL_GEMM_TF32 = 1, TXL_GEMM_BF16 = 2 } TxlGemmMath;
void txl_cuda_set_gemm_math(TxlGemmMath math);

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

/* ---- element-wise and reductions (elementwise.cu) ------------------------------------------ */
void txl_cuda_bias_fill(float *x, const float *b, int64_t rows, int n);
void txl_cuda_bias_backward(float *db, const float *dy, int64_t rows, int n);
void txl_cuda_add(float *out, const float *a, const float *b, int64_t n);
double txl_cuda_sumsq(const float *x, int64_t n);

/* ---- fused FFN hidden layer (ffn.cu) ------------------------------------------------------ */
void txl_cuda_bias_relu_dropout_forward(float *a, float *ad, const float *b, int rows, int cols,
                                        int feats, int col0, TxlDropout drop);
void txl_cuda_relu_dropout_backward(float *dx, const float *a, int rows, int cols, int feats,
                                    int col0, TxlDropout drop);

/* ---- embedding and positions (embedding.cu, posemb.cu) ------------------------------------ */
void txl_cuda_embedding_forward(float *out, const int32_t *tok, const float *emb, float scale,
                                int64_t n, int d);
void txl_cuda_embedding_backward(float *demb, const float *dout, const int32_t *tok, float scale,
                                 int64_t n, int d);
void txl_cuda_posemb_forward(float *R, int K, int d, int clamp_len);

/* ---- dropout (dropout.cu) ---------------------------------------------------------------- */
void txl_cuda_dropout(float *x, int rows, int cols, int feats, int col0, TxlDropout d);

/* ---- layer norm (layernorm.cu) ----------------------------------------------------------- */
void txl_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, int64_t n, int d, float eps);
void txl_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean,
                                 const float *rstd, int64_t n, int d);

void txl_cuda_add_layernorm_forward(float *res, float *out, float *mean, float *rstd,
                                    const float *x, const float *y, const float *w, const float *b,
                                    int64_t n, int d, float eps);
void txl_cuda_layernorm_backward_dropout(float *dinp, float *dbranch, float *dw, float *db,
                                         const float *dout, const float *inp, const float *w,
                                         const float *mean, const float *rstd, int rows, int cols,
                                         int d, int col0, TxlDropout drop);

/* ---- relative attention (rel_attn.cu) ----------------------------------------------------- */
void txl_cuda_rel_attn_forward(float *vec, float *saved, const float *q, const float *kv,
                               const float *r, const float *u, const float *vb, TxlAttnShape s,
                               TxlDropout drop, void *work);
void txl_cuda_rel_attn_backward(float *dq, float *dkv, float *dr, float *du, float *dvb,
                                const float *dvec, const float *vec, const float *q,
                                const float *kv, const float *r, const float *u, const float *vb,
                                const float *saved, TxlAttnShape s, TxlDropout drop, void *work);
size_t txl_cuda_rel_attn_saved_floats(int L, int K, int B, int H);
size_t txl_cuda_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward);

/* ---- loss (xent.cu) ---------------------------------------------------------------------- */
void txl_cuda_xent_forward_backward(float *logits, float *loss, const int32_t *target,
                                    float grad_scale, int64_t n, int V);

/* ---- optimizer (adam.cu) ----------------------------------------------------------------- */
void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                          float beta1, float beta2, float eps, int step, float grad_scale);

/* ---- the backend ------------------------------------------------------------------------- */
/* The table of every op above (ops_table.cu). */
const TxlOps *txl_ops_cuda(void);

/* Releases the cuBLAS handle and the scratch buffers (optional, at exit; ops may be called
 * again afterwards and will make them anew). */
void txl_cuda_release(void);

#ifdef __cplusplus
}
#endif

#endif
