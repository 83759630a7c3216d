/* gemm_bias and gemm_wgrad_bias (kernels/cpu/gemm_epilogue.c) against a double reference:
 *   gemm_bias        C = op(A) op(B) + bias [, ReLU], every transpose, C a column block (ldc > N:
 *                    the columns beyond N untouched), K = 0;
 *   gemm_wgrad_bias  dw += op(A) op(B), db += the column sums of dy, dy as B (W [in, out]) and as A
 *                    (W [out, in]).
 * Bounds (u = 2^-24; a float sum of k terms in any order is within ~k u of the exact one relative
 * to the sum of the absolute values of its terms, Higham sec. 3.1):
 *   C:  K products and the bias, K + 1 terms plus the final rounding: (K + 3) u (sum |a b| + |bias|);
 *       the ReLU is 1-Lipschitz. x 1.01 for gamma_k's denominator.
 *   dw: dw0 plus K products, as gemm with beta 1: (K + 3) u (|dw0| + sum |a b|) x 1.01.
 *   db: bias_backward sums groups of four rows in float (3 roundings, 3 u of the group's
 *       absolute sum), the groups and db0 in double ((K + 1) 2^-53), and rounds once to float
 *       (u): (4 u + (K + 1) 2^-53) (|db0| + sum |dy|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void bias_case(int ta, int tb, int M, int N, int K, int relu, int pad, OtRng *rng) {
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  const int lda = ac + 2, ldb = bc + 1, ldc = N + pad;
  float *A = ot_alloc((int64_t)ar * lda), *B = ot_alloc((int64_t)br * ldb), *bias = ot_alloc(N);
  float *C = ot_alloc((int64_t)M * ldc), *C0 = ot_alloc((int64_t)M * ldc);
  ot_fill(A, (int64_t)ar * lda, -1.0f, 1.0f, rng);
  ot_fill(B, (int64_t)br * ldb, -1.0f, 1.0f, rng);
  ot_fill(bias, N, -2.0f, 2.0f, rng);
  ot_fill(C0, (int64_t)M * ldc, -1.0f, 1.0f, rng);
  for (int64_t i = 0; i < (int64_t)M * ldc; i++) C[i] = C0[i];

  txl_cpu_gemm_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, relu, C, ldc);

  double *want = ot_alloc_d((int64_t)M * N), *bound = ot_alloc_d((int64_t)M * N);
  float *got = ot_alloc((int64_t)M * N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = bias[j], sa = fabs((double)bias[j]);
      for (int k = 0; k < K; k++) {
        const double p = (double)A[ta ? (int64_t)k * lda + i : (int64_t)i * lda + k] *
                         (double)B[tb ? (int64_t)j * ldb + k : (int64_t)k * ldb + j];
        s += p;
        sa += fabs(p);
      }
      want[(int64_t)i * N + j] = relu && s < 0.0 ? 0.0 : s;
      bound[(int64_t)i * N + j] = 1.01 * (K + 3) * OT_U * sa;
      got[(int64_t)i * N + j] = C[(int64_t)i * ldc + j];
    }
  char name[96];
  snprintf(name, sizeof name, "gemm_bias %c%c M=%d N=%d K=%d ldc=%d%s", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, ldc,
           relu ? " relu" : "");
  ot_check_bound(name, got, want, bound, (int64_t)M * N);
  int pad_ok = 1;
  for (int i = 0; i < M; i++)
    for (int j = N; j < ldc; j++)
      if (C[(int64_t)i * ldc + j] != C0[(int64_t)i * ldc + j]) pad_ok = 0;
  snprintf(name, sizeof name, "gemm_bias columns beyond N untouched (ldc=%d)", ldc);
  ot_check_true(name, pad_ok, NULL);
  free(A), free(B), free(bias), free(C), free(C0), free(want), free(bound), free(got);
}

/* K rows of x [K, nx] and dy [K, ny]; dy_is_a 0: dw [nx, ny] += x^T dy; 1: dw [ny, nx] += dy^T x. */
static void wgrad_case(int dy_is_a, int K, int nx, int ny, OtRng *rng) {
  const int M = dy_is_a ? ny : nx, N = dy_is_a ? nx : ny;
  float *x = ot_alloc((int64_t)K * nx), *dy = ot_alloc((int64_t)K * ny);
  float *dw = ot_alloc((int64_t)M * N), *dw0 = ot_alloc((int64_t)M * N), *db = ot_alloc(ny), *db0 = ot_alloc(ny);
  ot_fill(x, (int64_t)K * nx, -1.0f, 1.0f, rng);
  ot_fill(dy, (int64_t)K * ny, -1.0f, 1.0f, rng);
  ot_fill(dw0, (int64_t)M * N, -1.0f, 1.0f, rng);
  ot_fill(db0, ny, -1.0f, 1.0f, rng);
  for (int64_t i = 0; i < (int64_t)M * N; i++) dw[i] = dw0[i];
  for (int j = 0; j < ny; j++) db[j] = db0[j];
  const float *A = dy_is_a ? dy : x, *B = dy_is_a ? x : dy;

  txl_cpu_gemm_wgrad_bias(1, 0, M, N, K, A, M, B, N, dw, N, db, dy_is_a);

  double *ww = ot_alloc_d((int64_t)M * N), *bw = ot_alloc_d((int64_t)M * N), *wb = ot_alloc_d(ny);
  double *bb = ot_alloc_d(ny);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = dw0[(int64_t)i * N + j], sa = fabs(s);
      for (int k = 0; k < K; k++) {
        const double p = (double)A[(int64_t)k * M + i] * (double)B[(int64_t)k * N + j];
        s += p;
        sa += fabs(p);
      }
      ww[(int64_t)i * N + j] = s;
      bw[(int64_t)i * N + j] = 1.01 * (K + 3) * OT_U * sa;
    }
  for (int j = 0; j < ny; j++) {
    double s = db0[j], sa = fabs(s);
    for (int k = 0; k < K; k++) {
      s += dy[(int64_t)k * ny + j];
      sa += fabs((double)dy[(int64_t)k * ny + j]);
    }
    wb[j] = s;
    bb[j] = (4.0 * OT_U + (K + 1) * ldexp(1.0, -53)) * sa;
  }
  char name[96];
  snprintf(name, sizeof name, "gemm_wgrad_bias dy as %c K=%d: dw [%d, %d]", dy_is_a ? 'A' : 'B', K, M, N);
  ot_check_bound(name, dw, ww, bw, (int64_t)M * N);
  snprintf(name, sizeof name, "gemm_wgrad_bias dy as %c K=%d: db [%d]", dy_is_a ? 'A' : 'B', K, ny);
  ot_check_bound(name, db, wb, bb, ny);
  free(x), free(dy), free(dw), free(dw0), free(db), free(db0), free(ww), free(bw), free(wb), free(bb);
}

int main(void) {
  OtRng rng = ot_rng(7);
  printf("gemm_bias, gemm_wgrad_bias: GEMMs with a bias epilogue\n");
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      bias_case(ta, tb, 7, 13, 29, 0, 3, &rng);
      bias_case(ta, tb, 67, 45, 259, 0, 5, &rng); /* past OpenBLAS's small-matrix path */
      bias_case(ta, tb, 19, 23, 31, 1, 0, &rng);
      bias_case(ta, tb, 19, 23, 31, 1, 4, &rng); /* ReLU into padded rows */
    }
  bias_case(0, 1, 5, 3, 0, 0, 2, &rng); /* K = 0: C = bias */
  bias_case(0, 0, 5, 3, 0, 1, 0, &rng); /* K = 0: C = max(bias, 0) */
  for (int dy_is_a = 0; dy_is_a < 2; dy_is_a++) {
    wgrad_case(dy_is_a, 41, 9, 17, &rng);
    wgrad_case(dy_is_a, 600, 33, 70, &rng);
    wgrad_case(dy_is_a, 0, 3, 4, &rng);
  }
  return ot_finish("test_op_gemm_epilogue");
}
