/* C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C, row-major, op(X) = X or X^T, through cuBLAS.
 *
 * cuBLAS is column-major. A row-major matrix X [r, c] with leading dimension ld is, read
 * column-major with the same ld, the matrix X^T [c, r]. So the row-major C is the column-major
 * C^T [N, M], and
 *     C^T = alpha op(B)^T op(A)^T + beta C^T,
 * which is one column-major cuBLAS GEMM with the operands swapped (B first), the same
 * transpose flags (the column-major view of B already is B^T; transposing it again gives
 * op(B)^T when trans_b), m = N, n = M, and the same leading dimensions.
 *
 * Arithmetic, by table (kernels/ops.h: A and B in the table's act type, C in c_type):
 *   txl_cuda_gemm       fp32 operands and C (CUDA_R_32F), the compute type of
 *                       txl_cuda_set_gemm_math: CUBLAS_COMPUTE_32F (true fp32, the default; the
 *                       parity test would notice anything less: a 10-bit mantissa is far outside
 *                       the fp32 tolerance) or CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores on
 *                       operands rounded to TF32, fp32 sums);
 *   txl_cuda_gemm_bf16  bf16 operands (CUDA_R_16BF), C bf16 (an activation) or fp32 (a parameter
 *                       gradient), always CUBLAS_COMPUTE_32F: the tensor cores take the bf16
 *                       operands as they are (exact products) and sum in fp32; a bf16 C is
 *                       rounded once when stored (beta reads it widened);
 *   txl_cuda_gemm_fp16  the same with IEEE fp16 operands and C (CUDA_R_16F): fp16 tensor cores
 *                       (from sm_70) with CUBLAS_COMPUTE_32F, exact products and fp32 sums; an
 *                       fp16 C is rounded once when stored, a value past 65504 to infinity.
 * alpha and beta are floats in all three (the scale type of CUBLAS_COMPUTE_32F).
 * Determinism: cuBLAS gives bit-identical results run to run for one stream on one
 * architecture. */
#include "kernels/cuda/act.h"

/* One handle for the process, made lazily on the current device (see cuda_ops.h: one host
 * thread drives one device). */
static cublasHandle_t g_handle = NULL;
static cublasComputeType_t g_compute = CUBLAS_COMPUTE_32F;

extern "C" void txl_cuda_set_gemm_math(TxlGemmMath math) {
  switch (math) {
    case TXL_GEMM_FP32: g_compute = CUBLAS_COMPUTE_32F; break;
    case TXL_GEMM_TF32: g_compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    default: txl_fatal("internal: GEMM arithmetic %d", (int)math);
  }
}

int txl_cuda_gemm_tf32(void) { return g_compute == CUBLAS_COMPUTE_32F_FAST_TF32; }

/* The compute type of a GEMM whose operands are of type ab: the fp32 table's arithmetic
 * (txl_cuda_set_gemm_math) for fp32 operands, fp32 sums of the exact products for bf16 / fp16 ones. */
static cublasComputeType_t compute_type(TxlDtype ab) { return ab == TXL_F32 ? g_compute : CUBLAS_COMPUTE_32F; }

static cublasHandle_t handle(void) {
  if (!g_handle) {
    CUBLAS_CHECK(cublasCreate(&g_handle));
    CUBLAS_CHECK(cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH)); /* the compute type decides */
    CUBLAS_CHECK(cublasSetPointerMode(g_handle, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(cublasSetStream(g_handle, txl_cuda_stream())); /* the compute stream, as every op */
  }
  return g_handle;
}

void txl_cuda_gemm_release(void) {
  if (g_handle) {
    CUBLAS_CHECK(cublasDestroy(g_handle));
    g_handle = NULL;
  }
}

/* C = beta C (C = 0 when beta == 0, without reading C, as BLAS does).   C [M, N] (ldc), TC float,
 * txl_bf16 or txl_fp16 */
template <typename TC>
static __global__ void scale_matrix_kernel(TC *C, int M, int N, int ldc, float beta) {
  const int64_t total = (int64_t)M * N;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / N, j = e % N;
    TC *c = C + i * ldc + j;
    txl_st(c, beta == 0.0f ? 0.0f : beta * txl_ld(c));
  }
}

/* C = beta C for K = 0 (BLAS implementations differ on K = 0). */
template <typename TC>
static void scale_matrix(TC *C, int M, int N, int ldc, float beta) {
  TXL_LAUNCH(scale_matrix_kernel<TC>, txl_cuda_blocks((int64_t)M * N, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      C, M, N, ldc, beta);
  CUDA_LAUNCH_CHECK();
}

/* The tables' GEMM: A and B of the table's act type ab, C of type c_type. */
static void gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                 const void *B, int ldb, TxlDtype ab, float beta, void *C, int ldc, TxlDtype c_type) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { /* no product: C = beta C */
    if (c_type == TXL_BF16)
      scale_matrix(static_cast<txl_bf16 *>(C), M, N, ldc, beta);
    else if (c_type == TXL_F16)
      scale_matrix(static_cast<txl_fp16 *>(C), M, N, ldc, beta);
    else
      scale_matrix(static_cast<float *>(C), M, N, ldc, beta);
    return;
  }
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType at = txl_cuda_data_type(ab), ct = txl_cuda_data_type(c_type);
  CUBLAS_CHECK(cublasGemmEx(handle(), op_b, op_a, N, M, K, &alpha, B, at, ldb, A, at, lda, &beta, C, ct, ldc,
                            compute_type(ab), CUBLAS_GEMM_DEFAULT));
}

template <TxlDtype AT>
void txl_act_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                  const void *B, int ldb, float beta, void *C, int ldc, TxlDtype c_type) {
  txl_cuda_require_dtype(c_type, AT, "gemm");
  gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, AT, beta, C, ldc, c_type);
}
TXL_CUDA_ACT_ENTRIES(gemm)

/* Row-major strided-batched GEMM (kernels/cuda/cuda_util.h), the same operand swap as gemm():
 * batch b takes A + b sA, B + b sB, C + b sC. cuBLAS launches at most 65,535 batches per call on
 * some architectures (the grid's z extent), so larger batches go in chunks of that many, in
 * batch order (each batch's result does not depend on the chunking). */
void txl_cuda_gemm_batched(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                           int64_t sA, const void *B, int ldb, int64_t sB, float beta, void *C, int ldc, int64_t sC,
                           int batch, TxlDtype ab, TxlDtype c_type) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  if (K <= 0) txl_fatal("internal: batched GEMM with K = %d", K);
  const cudaDataType at = txl_cuda_data_type(ab), ct = txl_cuda_data_type(c_type);
  const cublasComputeType_t compute = compute_type(ab);
  const size_t ea = txl_dtype_size(ab), ec = txl_dtype_size(c_type);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int chunk = 65535;
  for (int b0 = 0; b0 < batch; b0 += chunk) {
    const int nb = batch - b0 < chunk ? batch - b0 : chunk;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle(), op_b, op_a, N, M, K, &alpha, static_cast<const char *>(B) + (size_t)b0 * sB * ea, at, ldb,
        (long long)sB, static_cast<const char *>(A) + (size_t)b0 * sA * ea, at, lda, (long long)sA, &beta,
        static_cast<char *>(C) + (size_t)b0 * sC * ec, ct, ldc, (long long)sC, nb, compute, CUBLAS_GEMM_DEFAULT));
  }
}

