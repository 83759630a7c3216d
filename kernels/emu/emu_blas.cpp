/* cuBLAS and cuBLASLt of the emulator, on OpenBLAS (README.md): the GEMMs the kernels call, on
 * fp32, bf16 or fp16 operands, and the cuBLASLt matmul with its epilogues. Recorded into a
 * capture like any other stream operation (cuda_emu_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/emu/cuda_emu_internal.h"

using namespace txl_emu;

/* ---- cuBLAS ------------------------------------------------------------------------------ */
/* A GEMM call that succeeded is one launch (a GPU runs at least one kernel for it). */
static cublasStatus_t counted(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) launched();
  return st;
}

struct cublasContext {
  cublasMath_t math;
  cublasPointerMode_t pointer_mode;
  cudaStream_t stream;
  std::vector<float> a, b, c; /* fp32 copies of operands that are rounded (TF32) or widened (bf16, fp16) */
};

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

/* How an operand reaches the fp32 product: as it is (fp32), rounded to TF32 (fp32 operands of a
 * TF32 GEMM), or widened from bf16 or fp16 (exact). */
enum Operand { OPERAND_F32, OPERAND_TF32, OPERAND_BF16, OPERAND_F16 };

/* The storage of a C / D matrix or a bias: fp32, bf16 or fp16 (widened exactly when read, rounded
 * to nearest even once when stored: kernels/common/bf16.h, fp16.h). */
enum Store { STORE_F32, STORE_BF16, STORE_F16 };

static Store store_of(cudaDataType t) { return t == CUDA_R_16BF ? STORE_BF16 : t == CUDA_R_16F ? STORE_F16 : STORE_F32; }

static float load_elem(const void *X, size_t at, Store s) {
  switch (s) {
    case STORE_BF16: return txl_bf16_to_float(static_cast<const txl_bf16 *>(X)[at]);
    case STORE_F16: return txl_fp16_to_float(static_cast<const txl_fp16 *>(X)[at]);
    case STORE_F32: break;
  }
  return static_cast<const float *>(X)[at];
}

static void store_elem(void *X, size_t at, Store s, float v) {
  switch (s) {
    case STORE_BF16: static_cast<txl_bf16 *>(X)[at] = txl_bf16_from_float(v); return;
    case STORE_F16: static_cast<txl_fp16 *>(X)[at] = txl_fp16_from_float(v); return;
    case STORE_F32: break;
  }
  static_cast<float *>(X)[at] = v;
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
      buf[(size_t)j * rows + i] = kind == OPERAND_BF16  ? load_elem(X, at, STORE_BF16)
                                  : kind == OPERAND_F16 ? load_elem(X, at, STORE_F16)
                                                        : round_tf32(static_cast<const float *>(X)[at]);
    }
  return buf.data();
}

static CBLAS_TRANSPOSE cblas_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; /* C = T for real matrices */
}

/* What cublasLtMatmul's BIAS and RELU_BIAS epilogues add to the fp32 result before it is
 * stored: bias[i] (fp32, or bf16 / fp16 widened) on row i, then max(x, 0) if relu (a NaN stays
 * NaN). */
struct BiasEpilogue {
  const void *bias;
  Store bias_store;
  bool relu;
};

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

/* A cuBLAS / cuBLASLt call on `stream` (README.md, "Stream capture and graphs"): false when it
 * is to run now; true when it was handled here, with *st: refused (the stream cannot take work:
 * CUBLAS_STATUS_EXECUTION_FAILED, as when cuBLAS cannot launch its kernel; or `check` failed), or
 * recorded into the stream's capture. The record keeps a copy of the handle's settings (its own
 * scratch) and, in host pointer mode, the VALUES of alpha and beta read now; in device pointer
 * mode the pointers, read at each replay. `call(handle, alpha, beta)` runs the GEMM. */
template <class Check, class Call>
static bool blas_enqueue(cudaStream_t stream, const cublasContext &settings, const void *alpha, const void *beta,
                         Check check, Call call, cublasStatus_t *st) {
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
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
  auto h = std::make_shared<cublasContext>(
      cublasContext{settings.math, settings.pointer_mode, settings.stream, {}, {}, {}});
  const bool device = settings.pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  const float al = device ? 0.0f : *static_cast<const float *>(alpha);
  const float be = device ? 0.0f : *static_cast<const float *>(beta);
  record(stream, [h, device, alpha, beta, al, be, call]() {
    const cublasStatus_t s = call(h.get(), device ? alpha : &al, device ? beta : &be);
    if (s != CUBLAS_STATUS_SUCCESS) die("a GEMM of a graph failed at its replay: %s", cublasGetStatusName(s));
    g_graph_kernels++;
  });
  return true;
}

/* Column-major C = alpha op(A) op(B) + beta C: A and B as `operand` says, C fp32 or (c_store)
 * bf16 / fp16: read widened (only when beta != 0, as BLAS reads C), the fp32 result (plus the
 * epilogue's bias, if any, in fp32) rounded to nearest even when stored (fp16: a result past
 * 65504 becomes infinity, a tiny one subnormal or zero, kernels/common/fp16.h). */
static cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const void *A, int lda, const void *B, int ldb, const float *beta,
                           void *C, int ldc, Operand operand, Store c_store,
                           const BiasEpilogue *epilogue = NULL) {
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
        for (int i = 0; i < m; i++) handle->c[(size_t)j * m + i] = load_elem(C, (size_t)j * ldc + i, c_store);
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
        const float b = load_elem(epilogue->bias, (size_t)i, epilogue->bias_store);
        float *c = &c32[(size_t)j * ld32 + i];
        const float x = *c + b;
        *c = epilogue->relu && x < 0.0f ? 0.0f : x;
      }
  if (c_store != STORE_F32)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) store_elem(C, (size_t)j * ldc + i, c_store, c32[(size_t)j * m + i]);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Operand o = handle->math == CUBLAS_TF32_TENSOR_OP_MATH ? OPERAND_TF32 : OPERAND_F32;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return gemm(h, transa, transb, m, n, k, (const float *)al, A, lda, B, ldb, (const float *)be, C, ldc, o,
                STORE_F32);
  };
  auto check = [&]() { return gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc); };
  cublasStatus_t st;
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta));
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
  return gemm(handle, transa, transb, m, n, k, (const float *)alpha, A, lda, B, ldb,
              (const float *)beta, C, ldc, o, store_of(Ctype));
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
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta));
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
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta)); /* one launch for the batch */
}

/* ---- cuBLASLt ------------------------------------------------------------------------------ */
/* The descriptors are the real semi-opaque structs of cublasLt.h; the emulator keeps its own
 * state in them (memcpy in and out), tagged so that a descriptor that was never created, or
 * was destroyed, is refused. */
static const uint32_t LT_LAYOUT = 0x4c744c61u, LT_DESC = 0x4c744465u, LT_PREF = 0x4c745072u,
                      LT_ALGO = 0x4c74416cu;

struct LtLayout {
  uint32_t tag;
  int32_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct LtDesc {
  uint32_t tag;
  int32_t compute, scale, transa, transb;
  uint32_t epilogue;
  int32_t bias_type;
  const void *bias;
};
struct LtPref {
  uint32_t tag;
  uint64_t max_workspace;
};
static_assert(sizeof(LtLayout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout state too large");
static_assert(sizeof(LtDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor state too large");
static_assert(sizeof(LtPref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference state too large");

template <class T, class O>
static bool lt_load(const O *opaque, uint32_t tag, T *out) {
  if (!opaque) return false;
  memcpy(out, opaque->data, sizeof *out);
  return out->tag == tag;
}
template <class T, class O>
static void lt_store(O *opaque, const T &state) {
  memset(opaque->data, 0, sizeof opaque->data);
  memcpy(opaque->data, &state, sizeof state);
}

struct cublasLtContext {
  cublasContext blas; /* the scratch copies of gemm() */
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, NULL, {}, {}, {}}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
  *matLayout = new cublasLtMatrixLayoutOpaque_t;
  lt_store(*matLayout, LtLayout{LT_LAYOUT, (int32_t)type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (matLayout) {
    memset(matLayout->data, 0, sizeof matLayout->data);
    delete matLayout;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
  *matmulDesc = new cublasLtMatmulDescOpaque_t;
  lt_store(*matmulDesc, LtDesc{LT_DESC, (int32_t)computeType, (int32_t)scaleType, CUBLAS_OP_N, CUBLAS_OP_N,
                               CUBLASLT_EPILOGUE_DEFAULT, -1, NULL});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  if (matmulDesc) {
    memset(matmulDesc->data, 0, sizeof matmulDesc->data);
    delete matmulDesc;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes) {
  LtDesc d;
  if (!lt_load(matmulDesc, LT_DESC, &d) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  void *field;
  size_t size;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: field = &d.transa, size = sizeof d.transa; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: field = &d.transb, size = sizeof d.transb; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &d.epilogue, size = sizeof d.epilogue; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &d.bias, size = sizeof d.bias; break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: field = &d.bias_type, size = sizeof d.bias_type; break;
    default: return CUBLAS_STATUS_INVALID_VALUE; /* not in the emulated subset */
  }
  if (sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(field, buf, size);
  lt_store(matmulDesc, d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  lt_store(*pref, LtPref{LT_PREF, 0});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (pref) {
    memset(pref->data, 0, sizeof pref->data);
    delete pref;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes) {
  LtPref p;
  if (!lt_load(pref, LT_PREF, &p) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || sizeInBytes != sizeof p.max_workspace)
    return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(&p.max_workspace, buf, sizeof p.max_workspace);
  lt_store(pref, p);
  return CUBLAS_STATUS_SUCCESS;
}

/* TXL_EMU_LT_EPILOGUES: on (the default) or off (every epilogue but DEFAULT unsupported), read
 * at every call so that a test can switch it with setenv. */
static bool lt_epilogues_on(void) {
  const char *env = getenv("TXL_EMU_LT_EPILOGUES");
  if (!env || !env[0] || strcmp(env, "on") == 0) return true;
  if (strcmp(env, "off") == 0) return false;
  die("TXL_EMU_LT_EPILOGUES=%s: expected on or off", env);
}

/* One matmul as cublasLtMatmul runs it, once its descriptors have been checked. */
struct LtProblem {
  cublasOperation_t transa, transb;
  int m, n, k, lda, ldb, ldd;
  Operand operand;
  Store ab_store, d_store; /* the operands' and D's (and the bias's) storage */
  uint32_t epilogue;
  const void *bias;
};

static bool lt_fits_int(uint64_t x) { return x <= (uint64_t)INT32_MAX; }

/* The checks that cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul share, in this order:
 * invalid descriptors, operations, shapes (op(A) m x k, op(B) k x n, D m x n) and leading
 * dimensions (ld >= max(1, rows)) are CUBLAS_STATUS_INVALID_VALUE; sizes beyond int, a C layout
 * other than D's, type combinations outside those of cublasGemmEx (A, B fp32 with D fp32 and
 * compute 32F, 32F_PEDANTIC or 32F_FAST_TF32; A, B bf16 with D fp32 or bf16, and A, B fp16 with
 * D fp32 or fp16, with compute 32F or 32F_PEDANTIC; scale type fp32), an epilogue outside the five (or any but DEFAULT under
 * TXL_EMU_LT_EPILOGUES=off) and a bias type other than D's are CUBLAS_STATUS_NOT_SUPPORTED; a
 * NULL bias pointer with an epilogue that uses it is CUBLAS_STATUS_INVALID_VALUE. */
static cublasStatus_t lt_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                 cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                 cublasLtMatrixLayout_t Ddesc, LtProblem *p) {
  LtDesc d;
  LtLayout a, b, c, o;
  if (!lt_load(desc, LT_DESC, &d) || !lt_load(Adesc, LT_LAYOUT, &a) || !lt_load(Bdesc, LT_LAYOUT, &b) ||
      !lt_load(Cdesc, LT_LAYOUT, &c) || !lt_load(Ddesc, LT_LAYOUT, &o))
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto op_ok = [](int32_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; };
  if (!op_ok(d.transa) || !op_ok(d.transb)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  const uint64_t m = o.rows, n = o.cols, k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto ld_ok = [](const LtLayout &l) { return l.ld >= 1 && (uint64_t)l.ld >= l.rows; };
  if (!ld_ok(a) || !ld_ok(b) || !ld_ok(c) || !ld_ok(o)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!lt_fits_int(m) || !lt_fits_int(n) || !lt_fits_int(k) || !lt_fits_int((uint64_t)a.ld) ||
      !lt_fits_int((uint64_t)b.ld) || !lt_fits_int((uint64_t)o.ld))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (c.type != o.type || c.rows != o.rows || c.cols != o.cols || c.ld != o.ld)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  const bool compute_ok = d.compute == CUBLAS_COMPUTE_32F || d.compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                          d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && o.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
                    (o.type == CUDA_R_32F || o.type == CUDA_R_16BF) && d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f16 = a.type == CUDA_R_16F && b.type == CUDA_R_16F && (o.type == CUDA_R_32F || o.type == CUDA_R_16F) &&
                   d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!compute_ok || d.scale != CUDA_R_32F || (!f32 && !bf16 && !f16)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = d.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU_BIAS &&
      e != CUBLASLT_EPILOGUE_BGRADA && e != CUBLASLT_EPILOGUE_BGRADB)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (e != CUBLASLT_EPILOGUE_DEFAULT) {
    if (!lt_epilogues_on()) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (d.bias_type != -1 && d.bias_type != o.type) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!d.bias) return CUBLAS_STATUS_INVALID_VALUE;
  }
  p->transa = (cublasOperation_t)d.transa;
  p->transb = (cublasOperation_t)d.transb;
  p->m = (int)m, p->n = (int)n, p->k = (int)k;
  p->lda = (int)a.ld, p->ldb = (int)b.ld, p->ldd = (int)o.ld;
  p->operand = bf16  ? OPERAND_BF16
               : f16 ? OPERAND_F16
               : d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? OPERAND_TF32
                                                          : OPERAND_F32;
  p->ab_store = store_of((cudaDataType)a.type);
  p->d_store = store_of((cudaDataType)o.type);
  p->epilogue = e;
  p->bias = d.bias;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
  if (returnAlgoCount) *returnAlgoCount = 0;
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  LtPref pref;
  if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount ||
      !lt_load(preference, LT_PREF, &pref))
    return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
  memset(&r, 0, sizeof r);
  r.algo.data[0] = LT_ALGO;
  r.workspaceSize = 0; /* the emulation needs none, within any MAX_WORKSPACE_BYTES */
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || (algo && algo->data[0] != LT_ALGO)) return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (C != D) return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  /* on a capturing stream: recorded with the problem as the descriptors give it now, alpha and
   * beta read now (the host pointer mode, cuBLASLt's default: its pointer-mode attribute is not
   * emulated), a scratch of its own */
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return lt_execute(h, p, al, A, B, be, D);
  };
  cublasStatus_t rec;
  if (blas_enqueue(stream, lightHandle->blas, alpha, beta, [] { return CUBLAS_STATUS_SUCCESS; }, call, &rec))
    return rec;
  return counted(call(&lightHandle->blas, alpha, beta));
}

/* One checked matmul: D = alpha op(A) op(B) + beta D and the epilogue. */
static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D) {
  /* The bias gradient, from the operands as stored (fp32 as they are, not TF32-rounded; bf16,
   * fp16 widened), summed in fp32 in increasing k, not scaled by alpha; computed before D is
   * written and stored (overwriting) after it, in D's type. */
  std::vector<float> grad;
  if (p.epilogue == CUBLASLT_EPILOGUE_BGRADA || p.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    const bool on_a = p.epilogue == CUBLASLT_EPILOGUE_BGRADA;
    const void *X = on_a ? A : B;
    /* grad[r] = sum over q < k of op(A)[r, q] (BGRADA) or op(B)[q, r] (BGRADB), the element at
     * X[r ld + q] when it lies along X's column r (op(A) = A^T, op(B) = B), else X[q ld + r] */
    const bool trans = on_a ? p.transa != CUBLAS_OP_N : p.transb == CUBLAS_OP_N;
    const int ld = on_a ? p.lda : p.ldb;
    grad.assign((size_t)(on_a ? p.m : p.n), 0.0f);
    for (size_t r = 0; r < grad.size(); r++) {
      float s = 0.0f;
      for (int q = 0; q < p.k; q++) {
        const size_t at = trans ? r * (size_t)ld + (size_t)q : (size_t)q * ld + r;
        s += load_elem(X, at, p.ab_store);
      }
      grad[r] = s;
    }
  }
  const BiasEpilogue bias{p.bias, p.d_store, p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS};
  const bool with_bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const cublasStatus_t g = gemm(blas, p.transa, p.transb, p.m, p.n, p.k, (const float *)alpha, A,
                                p.lda, B, p.ldb, (const float *)beta, D, p.ldd, p.operand, p.d_store,
                                with_bias ? &bias : NULL);
  if (g != CUBLAS_STATUS_SUCCESS) return g;
  for (size_t r = 0; r < grad.size(); r++) store_elem(const_cast<void *>(p.bias), r, p.d_store, grad[r]);
  return CUBLAS_STATUS_SUCCESS;
}
