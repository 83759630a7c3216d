/* Helpers shared by the CUDA kernels (private to kernels/cuda; C++ / CUDA only). */
#ifndef TXL_KERNELS_CUDA_UTIL_H
#define TXL_KERNELS_CUDA_UTIL_H

#include <stdint.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/ops.h"

/* Kernel launches and dynamic shared memory are written through these two macros, so the same
 * kernel source also runs under the CPU emulator of the tests (kernels/emu, built with
 * TXL_CUDA_EMU), which executes every thread of a block as a fiber:
 *   TXL_LAUNCH(kernel, grid, block, shared_bytes)(args...);
 *   TXL_DYNAMIC_SHARED(float, smem);   (in a kernel: smem points at the launch's dynamic shared memory)
 * A template kernel with several arguments is launched through a pointer:
 *   auto k = my_kernel<4, 8>; TXL_LAUNCH(k, grid, block, 0)(args...); */
/* The stream every op of the backend runs on (kernels/cuda/stream.cu): the kernels, the copies
 * and memsets, cuBLAS and cuBLASLt, the events. A non-blocking stream, made on the current device
 * by the first call, released by txl_cuda_release; never the legacy default stream 0. */
cudaStream_t txl_cuda_stream(void);

#ifdef TXL_CUDA_EMU
#define TXL_LAUNCH(kernel, grid, block, shared) \
  txl_emu_launch((grid), (block), (shared), txl_cuda_stream(), kernel, #kernel)
#define TXL_DYNAMIC_SHARED(T, name) T *name = reinterpret_cast<T *>(txl_emu_dynamic_shared())
#else
#define TXL_LAUNCH(kernel, grid, block, shared) kernel<<<(grid), (block), (shared), txl_cuda_stream()>>>
#define TXL_DYNAMIC_SHARED(T, name)                                                           \
  extern __shared__ __align__(16) unsigned char txl_dynamic_shared_[];                       \
  T *name = reinterpret_cast<T *>(txl_dynamic_shared_)
#endif

/* Threads per block of the element-wise and row-wise kernels (8 warps). */
#define TXL_CUDA_THREADS 256

/* Blocks of a 1-D grid covering n items with `threads` per block, capped: the element-wise
 * kernels use grid-stride loops, so a capped grid still covers everything, and 2^20 blocks of
 * 256 threads fill any GPU many times over. Host only. */
static inline unsigned int txl_cuda_blocks(int64_t n, int threads) {
  const int64_t cap = (int64_t)1 << 20;
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return (unsigned int)(b < cap ? b : cap);
}

/* Sum / max over the 32 lanes of a warp; every lane gets the result. The butterfly order is
 * fixed, so the result is deterministic. Device only. */
static __device__ __forceinline__ float txl_warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/* Loads and stores of an activation tensor whose storage type T is float, txl_bf16 or txl_fp16
 * (the three tables' act types, kernels/ops.h): a kernel written once as a template on T reads
 * through txl_ld (widening: exact) and writes through txl_st (rounding to nearest even, once), and
 * computes in fp32 in between. For T = float both are plain accesses, so the fp32 instantiation
 * is the same code as an untemplated fp32 kernel. Device only. */
static __device__ __forceinline__ float txl_ld(const float *p) { return *p; }
static __device__ __forceinline__ float txl_ld(const txl_bf16 *p) { return txl_bf16_to_float(*p); }
static __device__ __forceinline__ float txl_ld(const txl_fp16 *p) { return txl_fp16_to_float(*p); }
static __device__ __forceinline__ void txl_st(float *p, float v) { *p = v; }
static __device__ __forceinline__ void txl_st(txl_bf16 *p, float v) { *p = txl_bf16_from_float(v); }
static __device__ __forceinline__ void txl_st(txl_fp16 *p, float v) { *p = txl_fp16_from_float(v); }
/* Element i of a copy whose type is known at run time (the fused optimizer passes' copy of the
 * weights, kernels/ops.def): copy TXL_BF16 or TXL_F16, dst[i] = v rounded as txl_st rounds (as
 * to_act); TXL_F32, nothing (the fp32 table's weights are their own copy). Device only. */
static __device__ __forceinline__ void txl_st_copy(void *dst, TxlDtype copy, int64_t i, float v) {
  if (copy == TXL_BF16) txl_st(&static_cast<txl_bf16 *>(dst)[i], v);
  else if (copy == TXL_F16) txl_st(&static_cast<txl_fp16 *>(dst)[i], v);
}

/* The TxlDtype argument of an op (a GEMM's C, the embedding backward's destination, add): the
 * fp32 table ("cuda", act TXL_F32) stores everything in fp32 and accepts TXL_F32 only, the bf16
 * and fp16 tables ("cuda-bf16", "cuda-fp16") their act type or TXL_F32 (kernels/ops.h); anything
 * else is a bug of the caller. Host only. */
static inline const char *txl_cuda_table_name(TxlDtype act) {
  return act == TXL_BF16 ? "cuda-bf16" : act == TXL_F16 ? "cuda-fp16" : "cuda";
}
static inline void txl_cuda_require_dtype(TxlDtype t, TxlDtype act, const char *op) {
  if (t == TXL_F32 || t == act) return;
  txl_fatal("internal: %s on the %s backend with a tensor of type %d (%s)", op, txl_cuda_table_name(act), (int)t,
            act == TXL_BF16 ? "bf16 or fp32" : act == TXL_F16 ? "fp16 or fp32" : "fp32 only");
}

/* The fused optimizer passes' p_act (kernels/ops.def) on the table of activation type act: on the
 * fp32 table the weights are their own compute copy, so p_act must be p (the kernels then get no
 * copy to write); on the bf16 and fp16 tables a buffer of its own. Anything else ends the job as
 * an internal error naming op. Host only. */
static inline void txl_cuda_check_act_copy(const void *p_act, const float *p, TxlDtype act, const char *op) {
  if (act == TXL_F32 ? p_act != (const void *)p : !p_act || p_act == (const void *)p)
    txl_fatal("internal: %s on the %s table: the weights' compute copy must be %s", op, txl_cuda_table_name(act),
              act == TXL_F32 ? "p itself" : "a buffer of its own");
}

/* The cuBLAS / cuBLASLt data type of a tensor of type t: CUDA_R_32F, CUDA_R_16BF or CUDA_R_16F.
 * Host only. */
static inline cudaDataType txl_cuda_data_type(TxlDtype t) {
  return t == TXL_BF16 ? CUDA_R_16BF : t == TXL_F16 ? CUDA_R_16F : CUDA_R_32F;
}

/* batch row-major GEMMs (gemm.cu), as the gemm op (kernels/ops.def) with A and B of type ab
 * (TXL_F32: the arithmetic of txl_cuda_set_gemm_math, exact fp32 or TF32; TXL_BF16, TXL_F16:
 * fp32 sums of exact products) and C of type c_type; batch b reads A + b sA, B + b sB and writes
 * C + b sC (strides in elements). K >= 1. Host only. */
void txl_cuda_gemm_batched(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                           int64_t sA, const void *B, int ldb, int64_t sB, float beta, void *C, int ldc, int64_t sC,
                           int batch, TxlDtype ab, TxlDtype c_type);

/* Zeros the first row_bytes of each of `rows` rows that start pitch >= row_bytes bytes apart at p;
 * the gaps between them are not written (a tensor with padded rows). memory.cu. Host only. */
void txl_cuda_zero_rows(void *p, int64_t rows, size_t row_bytes, size_t pitch);

/* A device buffer of a reduction's partials, made by the op reserve (txl_cuda_reserve) with the
 * size of the largest call to come. memory.cu. */
struct TxlCudaScratch {
  void *p;
  size_t bytes;
  const char *what; /* for the out-of-memory message */
};
/* Makes s at least `bytes` long (a larger one is kept). */
void txl_cuda_scratch_reserve(TxlCudaScratch *s, size_t bytes);
/* s, which must hold `bytes`: more than reserved ends the job as an internal error. */
void *txl_cuda_scratch(TxlCudaScratch *s, size_t bytes);
void txl_cuda_scratch_release(TxlCudaScratch *s);

/* The scratch of each file, sized for the largest call (txl_cuda_reserve's arguments). */
void txl_cuda_elementwise_reserve(int64_t rows, int bias_n); /* column-sum and sumsq partials */
void txl_cuda_layernorm_reserve(int norm_d);                 /* the dw/db partials            */
void txl_cuda_embedding_reserve(int64_t rows);               /* the sort of positions by token */
void txl_cuda_gemm_lt_reserve(int bias_n);                   /* bias-gradient vector, cuBLASLt workspace */
void txl_cuda_gemm_lt_release(void);
/* 1 when the fp32 table's GEMMs run in TF32 (txl_cuda_set_gemm_math), else 0. gemm.cu. */
int txl_cuda_gemm_tf32(void);

/* 1 while a host wait is set (txl_cuda_set_host_wait, cuda_ops.h). host_wait.cu. */
int txl_cuda_host_wait_set(void);
/* 1 once the work before the event's record is complete, 0 while it is not (a cudaEventQuery,
 * which waits for nothing). host_wait.cu. */
int txl_cuda_event_done(void *event);

/* Resources made by txl_cuda_reserve (the scratch) or on first use (the cuBLAS handle), released
 * by txl_cuda_release (kernels/cuda/memory.cu). */
void txl_cuda_gemm_release(void);      /* gemm.cu: the cuBLAS handle        */
void txl_cuda_layernorm_release(void); /* layernorm.cu: the dw/db scratch   */
void txl_cuda_elementwise_release(void); /* elementwise.cu: column-sum and sumsq partials */
void txl_cuda_embedding_release(void);   /* embedding.cu: the sort of positions by token   */
void txl_cuda_upload_release(void);      /* upload.cu: the page-locked staging ring          */
void txl_cuda_host_wait_release(void);   /* host_wait.cu: its event                          */
void txl_cuda_stream_release(void);      /* stream.cu: the compute stream (the last to go)   */

#endif
