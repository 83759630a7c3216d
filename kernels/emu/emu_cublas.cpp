/* The CPU emulator's cuBLAS: handles, cublasSgemm, cublasGemmEx and cublasGemmStridedBatchedEx on
 * OpenBLAS (fp32, TF32-rounded fp32, or bf16 / fp16 operands widened to fp32; README.md here), and
 * emu_gemm, the GEMM that cuBLASLt (emu_cublaslt.cpp) runs too (emu_blas.h). */
#include "kernels/emu/emu_blas.h"

#include <cblas.h>

/* ---- cuBLAS ------------------------------------------------------------------------------ */
cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, NULL, {}, {}, {}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_PEDANTIC_MATH &&
      mode != CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown status";
}

/* x rounded to TF32 (8-bit exponent, 10-bit mantissa: 13 bits dropped) to nearest, ties away
 * from zero. Infinities and NaNs pass unchanged; a value that rounds past FLT_MAX becomes
 * infinity. */
static float round_tf32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

/* A column-major rows x cols matrix X (leading dimension ld) as fp32 values, packed (ld = rows)
 * into buf: TF32-rounded or bf16- / fp16-widened per `kind` (not OPERAND_F32, which needs no
 * copy). */
static const float *operand_copy(std::vector<float> &buf, const void *X, int rows, int cols, int ld,
                                 Operand kind) {
  buf.resize((size_t)rows * (size_t)cols);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++) {
      const size_t at = (size_t)j * ld + i;
      buf[(size_t)j * rows + i] = kind == OPERAND_BF16  ? emu_load_elem(X, at, STORE_BF16)
                                  : kind == OPERAND_F16 ? emu_load_elem(X, at, STORE_F16)
                                                        : round_tf32(static_cast<const float *>(X)[at]);
    }
  return buf.data();
}

static CBLAS_TRANSPOSE cblas_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; /* C = T for real matrices */
}


/* The argument checks of a GEMM (what cuBLAS refuses before it launches anything). */
static cublasStatus_t gemm_args(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                int n, int k, const void *alpha, int lda, int ldb, const void *beta, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool op_ok = (transa == CUBLAS_OP_N || transa == CUBLAS_OP_T || transa == CUBLAS_OP_C) &&
                     (transb == CUBLAS_OP_N || transb == CUBLAS_OP_T || transb == CUBLAS_OP_C);
  const int a_rows = transa == CUBLAS_OP_N ? m : k;
  const int b_rows = transb == CUBLAS_OP_N ? k : n;
  if (!op_ok || m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
      ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}


/* Column-major C = alpha op(A) op(B) + beta C: A and B as `operand` says, C fp32 or (c_store)
 * bf16 / fp16: read widened (only when beta != 0, as BLAS reads C), the fp32 result (plus the
 * epilogue's bias, if any, in fp32) rounded to nearest even when stored (fp16: a result past
 * 65504 becomes infinity, a tiny one subnormal or zero, kernels/common/fp16.h). */
cublasStatus_t emu_gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                        int k, const float *alpha, const void *A, int lda, const void *B, int ldb,
                        const float *beta, void *C, int ldc, Operand operand, Store c_store,
                        const BiasEpilogue *epilogue) {
  const cublasStatus_t st = gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float al = *alpha, be = *beta; /* host or device pointer: the same memory here */
  /* C as fp32: C itself, or a packed widened copy (ld = m) of a bf16 / fp16 C */
  float *c32 = static_cast<float *>(C);
  int ld32 = ldc;
  if (c_store != STORE_F32) {
    handle->c.assign((size_t)m * (size_t)n, 0.0f);
    if (be != 0.0f)
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) handle->c[(size_t)j * m + i] = emu_load_elem(C, (size_t)j * ldc + i, c_store);
    c32 = handle->c.data();
    ld32 = m;
  }
  if (k == 0 || al == 0.0f) { /* C = beta C, without reading C when beta == 0 */
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        float *c = &c32[(size_t)j * ld32 + i];
        *c = be == 0.0f ? 0.0f : be * *c;
      }
  } else {
    const float *a32 = static_cast<const float *>(A), *b32 = static_cast<const float *>(B);
    if (operand != OPERAND_F32) {
      a32 = operand_copy(handle->a, A, a_rows, a_cols, lda, operand);
      lda = a_rows;
      b32 = operand_copy(handle->b, B, b_rows, b_cols, ldb, operand);
      ldb = b_rows;
    }
    cblas_sgemm(CblasColMajor, cblas_op(transa), cblas_op(transb), m, n, k, al, a32, lda, b32, ldb,
                be, c32, ld32);
  }
  if (epilogue)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        const float b = emu_load_elem(epilogue->bias, (size_t)i, epilogue->bias_store);
        float *c = &c32[(size_t)j * ld32 + i];
        const float x = *c + b;
        *c = epilogue->relu && x < 0.0f ? 0.0f : x;
      }
  if (c_store != STORE_F32)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) emu_store_elem(C, (size_t)j * ldc + i, c_store, c32[(size_t)j * m + i]);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Operand o = handle->math == CUBLAS_TF32_TENSOR_OP_MATH ? OPERAND_TF32 : OPERAND_F32;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return emu_gemm(h, transa, transb, m, n, k, (const float *)al, A, lda, B, ldb, (const float *)be, C, ldc, o,
                    STORE_F32);
  };
  auto check = [&]() { return gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc); };
  cublasStatus_t st;
  if (emu_blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return emu_counted(call(handle, alpha, beta));
}

/* The operands' path of cublasGemmEx's type combination (*o), or why it is refused. */
static cublasStatus_t gemm_ex_plan(cublasHandle_t handle, cudaDataType Atype, cudaDataType Btype, cudaDataType Ctype,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo, Operand *out) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_PEDANTIC &&
      computeType != CUBLAS_COMPUTE_32F_FAST_TF32)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  const bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
                    (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F) &&
                    computeType != CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f16 = Atype == CUDA_R_16F && Btype == CUDA_R_16F && (Ctype == CUDA_R_16F || Ctype == CUDA_R_32F) &&
                   computeType != CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!f32 && !bf16 && !f16) return CUBLAS_STATUS_NOT_SUPPORTED;
  Operand o = bf16 ? OPERAND_BF16 : OPERAND_F16;
  if (f32) {
    const bool tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                      (computeType == CUBLAS_COMPUTE_32F && handle->math == CUBLAS_TF32_TENSOR_OP_MATH);
    o = tf32 ? OPERAND_TF32 : OPERAND_F32;
  }
  *out = o;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                              const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                              cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  Operand o;
  const cublasStatus_t st = gemm_ex_plan(handle, Atype, Btype, Ctype, computeType, algo, &o);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return emu_gemm(handle, transa, transb, m, n, k, (const float *)alpha, A, lda, B, ldb,
                  (const float *)beta, C, ldc, o, emu_store_of(Ctype));
}

/* What gemm_ex would refuse, without running it. */
static cublasStatus_t gemm_ex_check(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void *alpha, cudaDataType Atype, int lda, cudaDataType Btype,
                                    int ldb, const void *beta, cudaDataType Ctype, int ldc,
                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  Operand o;
  const cublasStatus_t st = gemm_ex_plan(handle, Atype, Btype, Ctype, computeType, algo, &o);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return gemm_ex(h, transa, transb, m, n, k, al, A, Atype, lda, B, Btype, ldb, be, C, Ctype, ldc, computeType,
                   algo);
  };
  auto check = [&]() {
    return gemm_ex_check(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc,
                         computeType, algo);
  };
  cublasStatus_t st;
  if (emu_blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return emu_counted(call(handle, alpha, beta));
}

static size_t type_bytes(cudaDataType t) { return t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : 4; }

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (batchCount < 0 || strideA < 0 || strideB < 0 || strideC < 0) return CUBLAS_STATUS_INVALID_VALUE;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    for (int b = 0; b < batchCount; b++) {
      const cublasStatus_t st = gemm_ex(
          h, transa, transb, m, n, k, al,
          static_cast<const char *>(A) + (size_t)b * (size_t)strideA * type_bytes(Atype), Atype, lda,
          static_cast<const char *>(B) + (size_t)b * (size_t)strideB * type_bytes(Btype), Btype, ldb, be,
          static_cast<char *>(C) + (size_t)b * (size_t)strideC * type_bytes(Ctype), Ctype, ldc, computeType, algo);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  auto check = [&]() {
    return batchCount == 0 ? CUBLAS_STATUS_SUCCESS
                           : gemm_ex_check(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta,
                                           Ctype, ldc, computeType, algo);
  };
  cublasStatus_t st;
  if (emu_blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return emu_counted(call(handle, alpha, beta)); /* one launch for the batch */
}
