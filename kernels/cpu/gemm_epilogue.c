/* The GEMMs with a fused epilogue (kernels/ops.def: gemm_bias, gemm_wgrad_bias). OpenBLAS has no
 * epilogues, so the CPU runs the separate passes the model ran before the ops existed, in the same
 * order, and gives the same bits:
 *   gemm_bias        relu 0: the bias written into C, then C += op(A) op(B) (gemm, beta = 1)
 *                    relu 1: C = op(A) op(B) (gemm, beta = 0), then C = max(C + bias, 0)
 *   gemm_wgrad_bias  db += column sums of dy (bias_backward), then dw += op(A) op(B) (beta = 1) */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                       int ldb, const void *bias_, int relu, void *C_, int ldc) {
  const float *bias = bias_;
  float *C = C_;
  if (M <= 0 || N <= 0) return;
  if (relu) {
    txl_cpu_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, TXL_F32);
    const TxlDropout none = {0.0f, 0, 0, 0, NULL};
    txl_cpu_bias_relu_dropout_forward(C, NULL, bias, M, 1, N, ldc, 0, none);
    return;
  }
  if (ldc == N) {
    txl_cpu_bias_fill(C, bias, M, N);
  } else {
#pragma omp parallel for schedule(static) if ((int64_t)M * N >= TXL_CPU_PAR_MIN_ELEMS)
    for (int r = 0; r < M; r++) memcpy(C + (int64_t)r * ldc, bias, (size_t)N * sizeof(float));
  }
  txl_cpu_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc, TXL_F32);
}

void txl_cpu_gemm_wgrad_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                             int ldb, float *dw, int lddw, float *db, int dy_is_a) {
  if (dy_is_a) {
    if (!trans_a || lda < M) txl_fatal("internal: gemm_wgrad_bias: dy as A needs trans_a and lda >= M");
    txl_cpu_bias_backward(db, A, K, M, lda);
  } else {
    if (trans_b || ldb < N) txl_fatal("internal: gemm_wgrad_bias: dy as B needs no trans_b and ldb >= N");
    txl_cpu_bias_backward(db, B, K, N, ldb);
  }
  txl_cpu_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, dw, lddw, TXL_F32);
}
