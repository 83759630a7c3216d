/* The GEMMs with a fused epilogue (kernels/cuda/gemm_lt.cu: gemm_bias, gemm_wgrad_bias) against
 * the CPU ops (kernels/cpu/gemm_epilogue.c: the unfused passes), in the fp32, TF32, bf16 and fp16
 * tables,
 * every transpose the model uses, odd sizes, C a column block of a wider matrix (ldc > N: the
 * columns beyond N must stay as they were), K = 0, NaN-poisoned outputs where the op overwrites.
 *
 * Which path ran: txl_cuda_gemm_epilogue_counts. The ctest runs set TXL_TEST_EPILOGUE_PATH:
 * "fused" (the emulator's cuBLASLt takes every combination used here) or "unfused" (with
 * TXL_EMU_LT_EPILOGUES=off the emulator refuses every epilogue, so the fallback passes ran). On a
 * GPU (variable unset) the counts are printed only: which combinations its cuBLASLt takes is its
 * own answer, and either path must pass the same bounds.
 *
 * Bounds (the argument of test_parity.c's file comment; u = 2^-24, c = TOL_C = 4):
 *   gemm_bias   each element is a K-term dot product plus the bias: a float sum of K + 1 terms in
 *               any order, plus the product roundings, so c ((K + 4) u + 2 u_in) (sum_k |a b| +
 *               |bias|), u_in the operand rounding inside the tensor cores (TF32 2^-11; 0 for fp32
 *               and for bf16 operands, exact in fp32 products). The ReLU is 1-Lipschitz: the same
 *               bound. bf16 table: A, B and the bias are rounded to bf16 on the host first (the
 *               bias is the model's bf16 compute copy), and C is stored once in bf16 (bounds_act).
 *               The unfused bf16 path also rounds the product to bf16 before it adds the bias
 *               (relu) or reads the bf16 bias back in the GEMM (beta = 1): one more rounding of
 *               the product, 2^-8 |sum|, is inside bounds_act's 2^-8 (|want| + b) only when
 *               |sum| <= |want| + b, which a cancelling bias breaks; so the bf16 bound adds
 *               2^-8 sum_k |a b| (the product's rounding, any path) to b before bounds_act.
 *               fp16 table: the same with fp16's rounding, 2^-11 relative plus 2^-25 absolute
 *               (a product or C among fp16's subnormals): 2^-11 sum_k |a b| + 2^-25 added
 *               before bounds_act, which adds fp16's store (act_unit, act_eta). The values
 *               (|A|, |B| <= 1, |bias| <= 2, K <= 257) stay far below 65504. Runs on sm_75 too.
 *   gemm_wgrad_bias  dw: dw0 + a K-term dot product, c ((K + 4) u + 2 u_in) (|dw0| + sum |a b|);
 *               db: db0 + the K-term column sum of dy (cuBLASLt's own sum, then one addition; or
 *               bias_backward's double sums): c (K + 2) u (|db0| + sum_k |dy|). dw and db are fp32
 *               in every table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/parity.h"

/* ---- gemm_bias ------------------------------------------------------------------------------- */

static void test_bias_case(TxlDtype act, double u_in, const char *math, int ta, int tb, int M, int N, int K,
                           int relu, int pad_c) {
  const TxlOps *o = txl_ops_cuda(act);
  const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
  const int lda = ac + 1, ldb = bc + 3, ldc = N + pad_c;
  float *A = host_rand((int64_t)ar * lda, -1.0, 1.0), *B = host_rand((int64_t)br * ldb, -1.0, 1.0);
  float *bias = host_rand(N, -2.0, 2.0);
  float *C = host_rand((int64_t)M * ldc, -1.0, 1.0); /* the columns beyond N: must stay */
  round_act(A, (int64_t)ar * lda, act);
  round_act(B, (int64_t)br * ldb, act);
  round_act(bias, N, act);
  round_act(C, (int64_t)M * ldc, act);
  for (int i = 0; i < M; i++) /* the op overwrites the M x N block: poisoned */
    for (int j = 0; j < N; j++) C[(int64_t)i * ldc + j] = NAN;
  float *Cc = host_copy(C, (int64_t)M * ldc);
  void *dA = dev_act(A, (int64_t)ar * lda, act, "test: A"), *dB = dev_act(B, (int64_t)br * ldb, act, "test: B");
  void *db = dev_act(bias, N, act, "test: bias"), *dC = dev_act(C, (int64_t)M * ldc, act, "test: C");

  txl_cpu_gemm_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, relu, Cc, ldc);
  o->gemm_bias(ta, tb, M, N, K, dA, lda, dB, ldb, db, relu, dC, ldc);
  float *Cg = host_from_act(dC, (int64_t)M * ldc, act);

  const int64_t n = (int64_t)M * N;
  float *got = malloc((size_t)n * sizeof(float)), *want = malloc((size_t)n * sizeof(float));
  double *bound = ot_alloc_d(n);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double prod = 0.0;
      for (int k = 0; k < K; k++)
        prod += fabs((double)A[ta ? (int64_t)k * lda + i : (int64_t)i * lda + k] *
                     (double)B[tb ? (int64_t)j * ldb + k : (int64_t)k * ldb + j]);
      const int64_t e = (int64_t)i * N + j;
      got[e] = Cg[(int64_t)i * ldc + j];
      want[e] = Cc[(int64_t)i * ldc + j];
      bound[e] = TOL_C * ((K + 4) * OT_U + 2.0 * u_in) * (prod + fabs((double)bias[j])) +
                 (act != TXL_F32 ? act_unit(act) * prod + act_eta(act) : 0.0);
    }
  bounds_act(bound, want, n, act);
  char what[112];
  snprintf(what, sizeof what, "gemm_bias %s %c%c M=%d N=%d K=%d ldc=%d%s", math, ta ? 'T' : 'N', tb ? 'T' : 'N', M,
           N, K, ldc, relu ? " relu" : "");
  check_close(what, got, want, bound, n);
  /* the columns beyond N of each row are not C's: unchanged, bit for bit */
  for (int i = 0; i < M; i++)
    for (int j = N; j < ldc; j++)
      if (memcmp(&Cg[(int64_t)i * ldc + j], &C[(int64_t)i * ldc + j], sizeof(float)) != 0) {
        check_fail("gemm_bias wrote outside its column block");
        i = M;
        break;
      }

  txl_cuda_free(dA);
  txl_cuda_free(dB);
  txl_cuda_free(db);
  txl_cuda_free(dC);
  free(A); free(B); free(bias); free(C); free(Cc); free(Cg); free(got); free(want); free(bound);
}

/* ---- gemm_wgrad_bias --------------------------------------------------------------------------- */

/* dy_is_a 0: dw [in, out] += x^T dy (the W [in, out] layers); 1: dw [out, in] += dy^T x (the
 * output layers). K rows; x [K, nx], dy [K, ny], their rows `pad` further apart than their
 * widths (padded activations; the gaps NaN, never to be read). */
static void test_wgrad_case(TxlDtype act, double u_in, const char *math, int dy_is_a, int K, int nx, int ny, int pad) {
  const TxlOps *o = txl_ops_cuda(act);
  const int M = dy_is_a ? ny : nx, N = dy_is_a ? nx : ny, lddw = N + 2;
  const int ldx = nx + pad, ldy = ny + pad;
  float *x = host_rand((int64_t)K * ldx, -1.0, 1.0), *dy = host_rand((int64_t)K * ldy, -1.0, 1.0);
  for (int64_t k = 0; k < K; k++) {
    for (int j = nx; j < ldx; j++) x[k * ldx + j] = NAN;
    for (int j = ny; j < ldy; j++) dy[k * ldy + j] = NAN;
  }
  round_act(x, (int64_t)K * ldx, act);
  round_act(dy, (int64_t)K * ldy, act);
  float *dw = host_rand((int64_t)M * lddw, -1.0, 1.0), *db = host_rand(ny, -1.0, 1.0);
  float *dwc = host_copy(dw, (int64_t)M * lddw), *dbc = host_copy(db, ny);
  void *dx = dev_act(x, (int64_t)K * ldx, act, "test: x"), *ddy = dev_act(dy, (int64_t)K * ldy, act, "test: dy");
  float *ddw = dev_from(dw, (size_t)M * lddw * sizeof(float), "test: dw");
  float *ddb = dev_from(db, (size_t)ny * sizeof(float), "test: db");
  const float *hA = dy_is_a ? dy : x, *hB = dy_is_a ? x : dy;
  const void *dA = dy_is_a ? ddy : dx, *dB = dy_is_a ? dx : ddy;

  const int lda = dy_is_a ? ldy : ldx, ldb = dy_is_a ? ldx : ldy;
  txl_cpu_gemm_wgrad_bias(1, 0, M, N, K, hA, lda, hB, ldb, dwc, lddw, dbc, dy_is_a);
  o->gemm_wgrad_bias(1, 0, M, N, K, dA, lda, dB, ldb, ddw, lddw, ddb, dy_is_a);
  float *gw = host_from(ddw, (int64_t)M * lddw), *gb = host_from(ddb, ny);

  const int64_t n = (int64_t)M * N;
  float *got = malloc((size_t)n * sizeof(float)), *want = malloc((size_t)n * sizeof(float));
  double *bw = ot_alloc_d(n), *bb = ot_alloc_d(ny);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double mag = fabs((double)dw[(int64_t)i * lddw + j]);
      for (int k = 0; k < K; k++) mag += fabs((double)hA[(int64_t)k * lda + i] * (double)hB[(int64_t)k * ldb + j]);
      got[(int64_t)i * N + j] = gw[(int64_t)i * lddw + j];
      want[(int64_t)i * N + j] = dwc[(int64_t)i * lddw + j];
      bw[(int64_t)i * N + j] = TOL_C * ((K + 4) * OT_U + 2.0 * u_in) * mag;
    }
  for (int j = 0; j < ny; j++) {
    double mag = fabs((double)db[j]);
    for (int k = 0; k < K; k++) mag += fabs((double)dy[(int64_t)k * ldy + j]);
    bb[j] = TOL_C * (K + 2) * OT_U * mag;
  }
  char what[112];
  snprintf(what, sizeof what, "gemm_wgrad_bias %s dy as %c K=%d pad %d: dw [%d, %d]", math, dy_is_a ? 'A' : 'B', K, pad,
           M, N);
  check_close(what, got, want, bw, n);
  snprintf(what, sizeof what, "gemm_wgrad_bias %s dy as %c K=%d: db [%d]", math, dy_is_a ? 'A' : 'B', K, ny);
  check_close(what, gb, dbc, bb, ny);

  txl_cuda_free(dx);
  txl_cuda_free(ddy);
  txl_cuda_free(ddw);
  txl_cuda_free(ddb);
  free(x); free(dy); free(dw); free(db); free(dwc); free(dbc); free(gw); free(gb); free(got); free(want);
  free(bw); free(bb);
}

/* ---- every case, in one table's arithmetic ------------------------------------------------------ */

static void test_table(TxlDtype act, double u_in, const char *math) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int relu = 0; relu < 2; relu++) test_bias_case(act, u_in, math, ta, tb, 37, 29, 53, relu, 5);
  test_bias_case(act, u_in, math, 0, 1, 131, 67, 257, 0, 3); /* the output layer's arrangement */
  test_bias_case(act, u_in, math, 0, 0, 64, 96, 41, 1, 0);   /* the FFN's first layer */
  test_bias_case(act, u_in, math, 0, 1, 5, 3, 0, 0, 2);      /* K = 0: C = bias */
  test_bias_case(act, u_in, math, 0, 0, 5, 3, 0, 1, 0);      /* K = 0: C = max(bias, 0) */
  for (int dy_is_a = 0; dy_is_a < 2; dy_is_a++) {
    test_wgrad_case(act, u_in, math, dy_is_a, 77, 19, 43, 0);
    test_wgrad_case(act, u_in, math, dy_is_a, 77, 19, 43, 5); /* padded rows */
    test_wgrad_case(act, u_in, math, dy_is_a, 300, 33, 130, 0);
    test_wgrad_case(act, u_in, math, dy_is_a, 0, 3, 5, 0); /* no rows: dw and db unchanged */
  }
}

int main(void) {
  parity_begin("cuda GEMMs with fused epilogues (gemm_bias, gemm_wgrad_bias)");
  txl_ops_cuda(TXL_F32)->reserve(1024, 256, 1); /* the bias-gradient vector (<= 130 here), the workspace */
  test_table(TXL_F32, 0.0, "fp32");
  if (parity_has_tf32_bf16("the TF32 and bf16 epilogue GEMMs")) {
    txl_cuda_set_gemm_math(TXL_GEMM_TF32);
    test_table(TXL_F32, 1.0 / 2048.0, "tf32");
    txl_cuda_set_gemm_math(TXL_GEMM_FP32);
    test_table(TXL_BF16, 0.0, "bf16");
  }
  test_table(TXL_F16, 0.0, "fp16"); /* fp16 tensor cores from sm_70: every architecture */
  long fused = 0, unfused = 0;
  txl_cuda_gemm_epilogue_counts(&fused, &unfused);
  printf("epilogue paths: %ld calls fused (cuBLASLt), %ld unfused\n", fused, unfused);
  const char *expect = getenv("TXL_TEST_EPILOGUE_PATH");
  if (expect && !strcmp(expect, "fused") && !(fused > 0 && unfused == 0))
    check_fail("expected every call to run fused (cuBLASLt epilogue)");
  if (expect && !strcmp(expect, "unfused") && !(unfused > 0 && fused == 0))
    check_fail("expected every call to run unfused (epilogues refused)");
  return parity_end();
}
