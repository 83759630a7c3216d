/* C[M,N] = alpha op(A) op(B) + beta C, row-major, through OpenBLAS (its own thread pool). */
#include <cblas.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A_,
                  int lda, const void *B_, int ldb, float beta, void *C_, int ldc, TxlDtype c_type) {
  txl_cpu_require_f32(c_type, "gemm");
  const float *A = A_, *B = B_;
  float *C = C_;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) { /* no product: C = beta C (BLAS implementations differ on K = 0) */
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) C[(int64_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(int64_t)i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
