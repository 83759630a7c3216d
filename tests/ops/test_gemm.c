/* gemm: C = alpha op(A) op(B) + beta C against a double reference, all four transpose
 * combinations, leading dimensions wider than the matrices, alpha and beta not 0 or 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void run_case(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad,
                     OtRng *rng) {
  /* stored shapes: A is [M, K] (or [K, M] when transposed), B is [K, N] (or [N, K]) */
  const int a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int lda = a_cols + pad, ldb = b_cols + pad + 1, ldc = N + pad + 2;
  float *A = ot_alloc((int64_t)a_rows * lda), *B = ot_alloc((int64_t)b_rows * ldb);
  float *C = ot_alloc((int64_t)M * ldc), *C0 = ot_alloc((int64_t)M * ldc);
  ot_fill(A, (int64_t)a_rows * lda, -1.0f, 1.0f, rng);
  ot_fill(B, (int64_t)b_rows * ldb, -1.0f, 1.0f, rng);
  ot_fill(C0, (int64_t)M * ldc, -1.0f, 1.0f, rng);
  for (int64_t i = 0; i < (int64_t)M * ldc; i++) C[i] = C0[i];

  txl_cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, TXL_F32);

  /* Reference in double. Per-element bound: a length-K fp32 dot product has error at most
   * gamma_K sum_k |a_k b_k| with gamma_K = K u / (1 - K u) ~ K u (u = 2^-24, any summation
   * order, FMA or not); scaling by alpha, beta C and the final add add 3 more roundings:
   * bound = (K + 3) u (|alpha| sum |a b| + |beta c|) * 1.01. */
  double *want = ot_alloc_d((int64_t)M * N), *bound = ot_alloc_d((int64_t)M * N);
  float *got = ot_alloc((int64_t)M * N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0.0, sa = 0.0;
      for (int k = 0; k < K; k++) {
        const double a = ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];
        const double b = tb ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j];
        s += a * b;
        sa += fabs(a * b);
      }
      const double c0 = C0[(int64_t)i * ldc + j];
      want[(int64_t)i * N + j] = alpha * s + beta * c0;
      bound[(int64_t)i * N + j] = 1.01 * (K + 3) * OT_U * (fabs(alpha) * sa + fabs(beta * c0));
      got[(int64_t)i * N + j] = C[(int64_t)i * ldc + j];
    }
  char name[96];
  snprintf(name, sizeof name, "C %c%c M=%d N=%d K=%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
  ot_check_bound(name, got, want, bound, (int64_t)M * N);

  /* the padding columns of C (beyond N) must be untouched */
  int pad_ok = 1;
  for (int i = 0; i < M; i++)
    for (int j = N; j < ldc; j++)
      if (C[(int64_t)i * ldc + j] != C0[(int64_t)i * ldc + j]) pad_ok = 0;
  snprintf(name, sizeof name, "C padding untouched (ldc=%d)", ldc);
  ot_check_true(name, pad_ok, NULL);
  free(A), free(B), free(C), free(C0), free(want), free(bound), free(got);
}

int main(void) {
  OtRng rng = ot_rng(1);
  printf("gemm: C = alpha op(A) op(B) + beta C\n");
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      run_case(ta, tb, 7, 13, 29, 0.75f, -1.25f, 3, &rng);
      run_case(ta, tb, 1, 5, 3, -2.0f, 0.5f, 1, &rng);
      run_case(ta, tb, 67, 45, 259, 1.5f, 0.25f, 5, &rng); /* past OpenBLAS's small-matrix path */
    }
  run_case(0, 0, 9, 11, 17, 0.5f, 0.0f, 2, &rng); /* beta = 0 */
  return ot_finish("test_op_gemm");
}
