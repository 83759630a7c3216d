/* The GEMM that the CPU emulator's cuBLAS (emu_cublas.cpp) and cuBLASLt (emu_cublaslt.cpp) share:
 * a handle's settings and scratch, the operand and storage types, the fp32 GEMM on OpenBLAS with
 * an optional bias epilogue (emu_gemm, defined in emu_cublas.cpp), and how a call on a capturing
 * stream is recorded (emu_blas_enqueue). Internal to the emulator. */
#ifndef TXL_KERNELS_EMU_BLAS_H
#define TXL_KERNELS_EMU_BLAS_H

#include <memory>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/emu/emu_internal.h"

struct cublasContext {
  cublasMath_t math;
  cublasPointerMode_t pointer_mode;
  cudaStream_t stream;
  std::vector<float> a, b, c; /* fp32 copies of operands that are rounded (TF32) or widened (bf16, fp16) */
};

/* How an operand reaches the fp32 product: as it is (fp32), rounded to TF32 (fp32 operands of a
 * TF32 GEMM), or widened from bf16 or fp16 (exact). */
enum Operand { OPERAND_F32, OPERAND_TF32, OPERAND_BF16, OPERAND_F16 };

/* The storage of a C / D matrix or a bias: fp32, bf16 or fp16 (widened exactly when read, rounded
 * to nearest even once when stored: kernels/common/bf16.h, fp16.h). */
enum Store { STORE_F32, STORE_BF16, STORE_F16 };

inline Store emu_store_of(cudaDataType t) {
  return t == CUDA_R_16BF ? STORE_BF16 : t == CUDA_R_16F ? STORE_F16 : STORE_F32;
}

inline float emu_load_elem(const void *X, size_t at, Store s) {
  switch (s) {
    case STORE_BF16: return txl_bf16_to_float(static_cast<const txl_bf16 *>(X)[at]);
    case STORE_F16: return txl_fp16_to_float(static_cast<const txl_fp16 *>(X)[at]);
    case STORE_F32: break;
  }
  return static_cast<const float *>(X)[at];
}

inline void emu_store_elem(void *X, size_t at, Store s, float v) {
  switch (s) {
    case STORE_BF16: static_cast<txl_bf16 *>(X)[at] = txl_bf16_from_float(v); return;
    case STORE_F16: static_cast<txl_fp16 *>(X)[at] = txl_fp16_from_float(v); return;
    case STORE_F32: break;
  }
  static_cast<float *>(X)[at] = v;
}

/* What cublasLtMatmul's BIAS and RELU_BIAS epilogues add to the fp32 result before it is
 * stored: bias[i] (fp32, or bf16 / fp16 widened) on row i, then max(x, 0) if relu (a NaN stays
 * NaN). */
struct BiasEpilogue {
  const void *bias;
  Store bias_store;
  bool relu;
};

/* Column-major C = alpha op(A) op(B) + beta C: A and B as `operand` says, C fp32 or (c_store)
 * bf16 / fp16 (emu_cublas.cpp). */
cublasStatus_t emu_gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                        int k, const float *alpha, const void *A, int lda, const void *B, int ldb,
                        const float *beta, void *C, int ldc, Operand operand, Store c_store,
                        const BiasEpilogue *epilogue = NULL);

/* A GEMM call that succeeded is one launch (a GPU runs at least one kernel for it). */
inline cublasStatus_t emu_counted(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) emu_launched();
  return st;
}

/* A cuBLAS / cuBLASLt call on `stream` (README.md, "Stream capture and graphs"): false when it
 * is to run now; true when it was handled here, with *st: refused (the stream cannot take work:
 * CUBLAS_STATUS_EXECUTION_FAILED, as when cuBLAS cannot launch its kernel; or `check` failed), or
 * recorded into the stream's capture. The record keeps a copy of the handle's settings (its own
 * scratch) and, in host pointer mode, the VALUES of alpha and beta read now; in device pointer
 * mode the pointers, read at each replay. `call(handle, alpha, beta)` runs the GEMM. */
template <class Check, class Call>
bool emu_blas_enqueue(cudaStream_t stream, const cublasContext &settings, const void *alpha, const void *beta,
                      Check check, Call call, cublasStatus_t *st) {
  cudaError_t err;
  const Enqueue q = emu_enqueue(stream, &err);
  if (q == ENQ_RUN) return false;
  if (q == ENQ_FAIL) {
    *st = CUBLAS_STATUS_EXECUTION_FAILED;
    return true;
  }
  *st = check();
  if (*st != CUBLAS_STATUS_SUCCESS) return true;
  if (!alpha || !beta) {
    *st = CUBLAS_STATUS_INVALID_VALUE;
    return true;
  }
  const bool deferred = q == ENQ_DEFER;
  auto h = std::make_shared<cublasContext>(
      cublasContext{settings.math, settings.pointer_mode, settings.stream, {}, {}, {}});
  const bool device = settings.pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  const float al = device ? 0.0f : *static_cast<const float *>(alpha);
  const float be = device ? 0.0f : *static_cast<const float *>(beta);
  Node n = [h, device, alpha, beta, al, be, call, deferred]() {
    const cublasStatus_t s = call(h.get(), device ? alpha : &al, device ? beta : &be);
    if (s != CUBLAS_STATUS_SUCCESS)
      emu_die("a GEMM %s failed when it ran: %s", deferred ? "queued behind a stream's work" : "of a graph",
              cublasGetStatusName(s));
    if (!deferred) emu_graph_kernel();
  };
  if (deferred) {
    emu_launched(); /* the host issued it now */
    emu_defer(stream, std::move(n));
  } else {
    emu_record(stream, std::move(n));
  }
  return true;
}

#endif
