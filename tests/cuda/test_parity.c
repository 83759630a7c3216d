/* The first CUDA ops (memory, gemm, embedding, dropout, layer norm, cross-entropy, Adam) against its CPU op (kernels/cpu, itself tested against a
 * double-precision reference in tests/ops) on the same random inputs, odd sizes throughout.
 *
 * Where there is no CUDA device (or no driver) it prints "SKIPPED: no CUDA device" and exits 0.
 * Otherwise it prints one line per checked output: the max absolute and relative error and the
 * max ratio error / bound, and exits 1 if any element is outside its bound (a NaN is always
 * outside).
 *
 * Tolerances. u = 2^-24 is the unit roundoff of float. A float sum of k terms computed in any
 * order (pairwise, blocked, with or without FMA) is within gamma_k = k u / (1 - k u) ~ k u of
 * the exact sum, relative to the sum of the absolute values of the terms (Higham, "Accuracy
 * and Stability of Numerical Algorithms", 2nd ed., sec. 3.1). The GPU and the CPU are each
 * within that of the exact value, so they are within 2 gamma_k of each other. Each check below
 * therefore bounds element i by
 *     bound_i = c * (k + a) * u * mag_i,
 * where k is the length of the longest sum behind the element, a counts the few extra
 * roundings (products, divisions, sqrt, exp: at most 2 ulp each on either side), mag_i is the
 * element's "sum of absolute values", computed in double from the inputs, and c = 4 is the
 * factor 2 of the two backends times 2 of slack for the rounding of intermediate results used
 * in more than one place (the mean in layer norm, the max in softmax). These are worst-case
 * bounds, so a correct kernel sits far below them (the printed ratio shows how far), while a
 * wrong index, a missing term, a wrong constant or TF32 arithmetic (10-bit mantissa) is far
 * above. Ops that are one rounding of the same operation on both sides (embedding, dropout)
 * must be bit-identical; dropout masks must be bit-identical by design (Philox).
 *
 * The bf16 table (txl_ops_cuda(TXL_BF16): activations stored in bf16, computed in fp32) runs the
 * same cases. Its random inputs are rounded to bf16 on the host first and the CPU op runs in fp32
 * on them, so both sides start from identical values; the device then differs from the CPU by the
 * fp32 bound above plus one rounding to bf16 of each stored output (relative 2^-8 of the value:
 * bounds_act in parity.c; no op here reads back an intermediate it stored in bf16). Where the
 * fp32 check demands identical bits, the bf16 output must be the bits of the CPU's fp32 result
 * rounded once. Outputs that the op overwrites are poisoned with NaN (bf16 0x7fc0) first.
 * The fp16 table (txl_ops_cuda(TXL_F16)) runs them too, the same way with fp16's rounding: 2^-11
 * of the value, plus 2^-25 absolute for an output among fp16's subnormals (below 2^-14, where
 * the relative bound does not hold: bounds_act). Every input and output here stays far inside
 * fp16's range (|x| <= 65504): inputs within [-48, 48], layer-norm outputs O(1), embedding values
 * below 9, so nothing overflows. It runs on sm_75 too (fp16 tensor cores came with sm_70). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/dropout_sites.h"
#include "tests/cuda/parity.h"

/* ---- memory ------------------------------------------------------------------------------ */

static void test_memory(void) {
  const int64_t n = 1237;
  float *d = txl_cuda_alloc((size_t)n * sizeof(float), "test: zeroed");
  float *zeros = calloc((size_t)n, sizeof(float));
  float *h = host_from(d, n);
  check_bits("memory: alloc is zero-filled", h, zeros, n);
  free(h);

  float *x = host_rand(n, -1.0, 1.0);
  float *d2 = txl_cuda_alloc((size_t)n * sizeof(float), "test: copy");
  txl_cuda_to_device(d, x, (size_t)n * sizeof(float));
  txl_cuda_copy(d2, d, (size_t)n * sizeof(float));
  h = host_from(d2, n);
  check_bits("memory: to_device, copy, to_host", h, x, n);
  free(h);

  txl_cuda_zero(d2 + 5, (size_t)(n - 10) * sizeof(float)); /* an interior range */
  float *want = host_copy(x, n);
  memset(want + 5, 0, (size_t)(n - 10) * sizeof(float));
  h = host_from(d2, n);
  check_bits("memory: zero (interior range)", h, want, n);
  free(h);

  void *empty = txl_cuda_alloc(0, "test: empty");
  txl_cuda_free(empty);
  txl_cuda_free(NULL);
  txl_cuda_free(d);
  txl_cuda_free(d2);
  free(x);
  free(zeros);
  free(want);
}

/* ---- gemm -------------------------------------------------------------------------------- */

/* C[M,N] = alpha op(A) op(B) + beta C, row-major with padded leading dimensions, by the table of
 * act: A and B in act, C in c_type.
 * Bound: the dot products have K terms: bound = c (K + 3) u (|alpha| |op(A)| |op(B)| + |beta| |C|).
 * u_in: the unit roundoff of the GEMM's operands inside the tensor cores beyond their storage
 * (0 for fp32 and for bf16, which the tensor cores take as they are; TF32: 2^-11). A product of
 * two rounded operands is within 2 u_in of the exact product, then the fp32 sum adds (K + 3) u:
 * bound = c ((K + 3) u + 2 u_in) (|alpha| |A| |B| + |beta| |C|). For TF32 the result must also
 * differ from the fp32 one somewhere (the mode took effect).
 * bf16 table: A, B (and a bf16 C) are rounded to bf16 on the host, so the CPU multiplies the same
 * values; products of bf16 values are exact in fp32 on both sides, and the tensor cores' fp32
 * sums may truncate instead of rounding (unit roundoff 2u: within 2 gamma_K, c = 4 covers that
 * and the CPU's gamma_K); a bf16 C adds its one rounding (bounds_act). A C = NaN with beta = 0
 * must not be read. fp16 table: the same with fp16 operands (exact products in fp32 too: 11-bit
 * significands) and an fp16 C's one rounding (2^-11 relative + 2^-25 absolute, bounds_act); the
 * values (|A|, |B|, |C| < 1, K <= 257) keep C far below 65504. */
static void test_gemm_case_math(TxlDtype act, TxlDtype c_type, int ta, int tb, int M, int N, int K,
                                float alpha, float beta, int nan_c, double u_in, const char *math_name) {
  const TxlOps *o = txl_ops_cuda(act);
  const int ar = ta ? K : M, ac = ta ? M : K; /* A as stored: [ar, ac] */
  const int br = tb ? N : K, bc = tb ? K : N;
  const int lda = ac + 3, ldb = bc + 1, ldc = N + 2;
  float *A = host_rand((int64_t)ar * lda, -1.0, 1.0);
  float *B = host_rand((int64_t)br * ldb, -1.0, 1.0);
  float *C = host_rand((int64_t)M * ldc, -1.0, 1.0);
  round_act(A, (int64_t)ar * lda, act);
  round_act(B, (int64_t)br * ldb, act);
  round_act(C, (int64_t)M * ldc, c_type);
  if (nan_c) /* beta = 0 must not read C, as BLAS */
    for (int64_t i = 0; i < (int64_t)M * ldc; i++) C[i] = NAN;
  float *Cc = host_copy(C, (int64_t)M * ldc);
  void *dA = dev_act(A, (int64_t)ar * lda, act, "test: A");
  void *dB = dev_act(B, (int64_t)br * ldb, act, "test: B");
  void *dC = dev_act(C, (int64_t)M * ldc, c_type, "test: C");

  txl_cpu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cc, ldc, TXL_F32);
  o->gemm(ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC, ldc, c_type);
  float *Cg = host_from_act(dC, (int64_t)M * ldc, c_type);

  /* compare the M x N window only (the padding columns are not part of C) */
  float *got = malloc((size_t)M * N * sizeof(float)), *want = malloc((size_t)M * N * sizeof(float));
  double *bound = ot_alloc_d((int64_t)M * N);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double mag = nan_c ? 0.0 : fabs((double)beta) * fabs((double)C[(int64_t)i * ldc + j]);
      for (int k = 0; k < K; k++) {
        const double a = A[ta ? (int64_t)k * lda + i : (int64_t)i * lda + k];
        const double b = B[tb ? (int64_t)j * ldb + k : (int64_t)k * ldb + j];
        mag += fabs((double)alpha) * fabs(a * b);
      }
      got[(int64_t)i * N + j] = Cg[(int64_t)i * ldc + j];
      want[(int64_t)i * N + j] = Cc[(int64_t)i * ldc + j];
      bound[(int64_t)i * N + j] = TOL_C * ((K + 3) * OT_U + 2.0 * u_in) * mag;
    }
  bounds_act(bound, want, (int64_t)M * N, c_type);
  char what[96];
  snprintf(what, sizeof what, "gemm %s %c%c M=%d N=%d K=%d beta=%g%s", math_name, ta ? 'T' : 'N', tb ? 'T' : 'N',
           M, N, K, (double)beta, nan_c ? " (C=NaN)" : "");
  check_close(what, got, want, bound, (int64_t)M * N);
  if (u_in > 0.0) { /* rounded operands: the result cannot be the fp32 one everywhere */
    double worst = 0.0;
    for (int64_t e = 0; e < (int64_t)M * N; e++) worst = fmax(worst, fabs((double)got[e] - want[e]));
    if (!(worst > 0.0)) check_fail("the reduced-precision GEMM gave the fp32 result: the mode had no effect");
  }

  txl_cuda_free(dA);
  txl_cuda_free(dB);
  txl_cuda_free(dC);
  free(A); free(B); free(C); free(Cc); free(Cg); free(got); free(want); free(bound);
}

/* The fp32 table, or the bf16 / fp16 table with C of type c_type, with fp32 sums. */
static void test_gemm_case(TxlDtype act, TxlDtype c_type, int ta, int tb, int M, int N, int K, float alpha,
                           float beta, int nan_c) {
  char name[32];
  snprintf(name, sizeof name, "%s->%s", act_name(act), act_name(c_type));
  if (act == TXL_F32) snprintf(name, sizeof name, "fp32");
  test_gemm_case_math(act, c_type, ta, tb, M, N, K, alpha, beta, nan_c, 0.0, name);
}

static void test_gemm(void) {
  const int tc = parity_has_tf32_bf16("the TF32 and bf16 GEMMs");
  if (tc) {
    txl_cuda_set_gemm_math(TXL_GEMM_TF32);
    test_gemm_case_math(TXL_F32, TXL_F32, 0, 1, 64, 96, 128, 1.0f, 0.0f, 0, 1.0 / 2048.0, "tf32");
    /* the bf16 table's GEMM is fp32 arithmetic whatever the fp32 table's setting */
    test_gemm_case(TXL_BF16, TXL_BF16, 1, 0, 64, 96, 128, 1.0f, 1.0f, 0);
    txl_cuda_set_gemm_math(TXL_GEMM_FP32);
  }
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      test_gemm_case(TXL_F32, TXL_F32, ta, tb, 37, 53, 29, 0.7f, 0.3f, 0);
      if (!tc) continue;
      test_gemm_case(TXL_BF16, TXL_BF16, ta, tb, 37, 53, 29, 0.7f, 0.3f, 0);
      test_gemm_case(TXL_BF16, TXL_F32, ta, tb, 37, 53, 29, 0.7f, 0.3f, 0);
    }
  test_gemm_case(TXL_F32, TXL_F32, 0, 1, 131, 67, 257, 1.0f, 0.0f, 1);
  /* K = 0: C = beta C */
  test_gemm_case(TXL_F32, TXL_F32, 1, 0, 5, 3, 0, 1.0f, 0.5f, 0);
  if (!tc) return;
  test_gemm_case(TXL_BF16, TXL_BF16, 0, 1, 131, 67, 257, 1.0f, 0.0f, 1);
  test_gemm_case(TXL_BF16, TXL_F32, 1, 0, 67, 131, 257, 1.0f, 0.0f, 1);
  test_gemm_case(TXL_BF16, TXL_BF16, 1, 0, 5, 3, 0, 1.0f, 0.5f, 0);
  test_gemm_case(TXL_BF16, TXL_F32, 0, 0, 5, 3, 0, 1.0f, 0.0f, 1);
}

/* The fp16 table's GEMMs: every architecture (sm_75 included), fp32 arithmetic whatever the fp32
 * table's setting (checked under TF32 where there is TF32). */
static void test_gemm_fp16(void) {
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      test_gemm_case(TXL_F16, TXL_F16, ta, tb, 37, 53, 29, 0.7f, 0.3f, 0);
      test_gemm_case(TXL_F16, TXL_F32, ta, tb, 37, 53, 29, 0.7f, 0.3f, 0);
    }
  test_gemm_case(TXL_F16, TXL_F16, 0, 1, 131, 67, 257, 1.0f, 0.0f, 1);
  test_gemm_case(TXL_F16, TXL_F32, 1, 0, 67, 131, 257, 1.0f, 0.0f, 1);
  test_gemm_case(TXL_F16, TXL_F16, 1, 0, 5, 3, 0, 1.0f, 0.5f, 0); /* K = 0: C = beta C */
  test_gemm_case(TXL_F16, TXL_F32, 0, 0, 5, 3, 0, 1.0f, 0.0f, 1);
  TxlCudaDevice dev;
  txl_cuda_set_device(0, &dev);
  if (dev.major >= 8) {
    txl_cuda_set_gemm_math(TXL_GEMM_TF32);
    test_gemm_case(TXL_F16, TXL_F16, 1, 0, 64, 96, 128, 1.0f, 1.0f, 0);
    txl_cuda_set_gemm_math(TXL_GEMM_FP32);
  }
}

/* ---- embedding --------------------------------------------------------------------------- */

/* One float multiply per element on both sides: bit-identical (bf16, fp16: the CPU's bits rounded). */
static void test_embedding(TxlDtype act) {
  const TxlOps *o = txl_ops_cuda(act);
  const int V = 101, d = 67, lde = 72; /* the table's rows padded, as a weight's (values in the gaps) */
  const int64_t n = 45;
  const float scale = sqrtf((float)d);
  float *emb = host_rand((int64_t)V * lde, -1.0, 1.0);
  round_act(emb, (int64_t)V * lde, act);
  int32_t tok[45];
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)(parity_urand() * V);
  tok[0] = 0;
  tok[1] = V - 1;
  tok[7] = tok[30] = -1; /* adaptive_group's padding: rows of zeros */
  float *want = host_rand(n * d, -1.0, 1.0);
  txl_cpu_embedding_forward(want, tok, emb, scale, n, d, lde, d);
  round_act(want, n * d, act);

  void *demb = dev_act(emb, (int64_t)V * lde, act, "test: emb");
  int32_t *dtok = dev_from(tok, sizeof tok, "test: tok");
  void *dout = dev_poison_act(n * d, act, "test: out");
  o->embedding_forward(dout, dtok, demb, scale, n, d, lde, d);
  float *got = host_from_act(dout, n * d, act);
  char what[96];
  snprintf(what, sizeof what, "embedding_forward %s n=45 d=67 lde=72 V=101, 2 ids -1", act_name(act));
  check_bits(what, got, want, n * d);
  txl_cuda_free(demb);
  txl_cuda_free(dtok);
  txl_cuda_free(dout);
  free(emb); free(want); free(got);
}

/* ---- dropout ----------------------------------------------------------------------------- */

/* Masks bit-identical (checked on ones, where the output is the mask times the scale), and the
 * values too (one float multiply per element on both sides; bf16: the CPU's bits rounded). */
static void test_dropout_case(TxlDtype act, int rows, int cols, int feats, int col0, TxlDropout d) {
  const TxlOps *o = txl_ops_cuda(act);
  const int64_t n = (int64_t)rows * cols * feats;
  char what[96];
  for (int ones = 1; ones >= 0; ones--) {
    float *x = host_rand(n, -2.0, 2.0);
    if (ones)
      for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
    round_act(x, n, act);
    void *dx = dev_act(x, n, act, "test: dropout x");
    txl_cpu_dropout(x, rows, cols, feats, feats, col0, d);
    round_act(x, n, act);
    o->dropout(dx, rows, cols, feats, feats, col0, d);
    float *got = host_from_act(dx, n, act);
    snprintf(what, sizeof what, "dropout %s %s %dx%dx%d col0=%d p=%g", act_name(act), ones ? "mask" : "values",
             rows, cols, feats, col0, (double)d.p);
    check_bits(what, got, x, n);
    if (ones && d.p > 0.0f) { /* sanity: the kept fraction is near 1 - p */
      int64_t kept = 0;
      for (int64_t i = 0; i < n; i++) kept += got[i] != 0.0f;
      const double frac = (double)kept / (double)n;
      if (fabs(frac - (1.0 - d.p)) > 0.05) {
        char msg[96];
        snprintf(msg, sizeof msg, "kept fraction %.4f, expected about %.4f", frac, 1.0 - d.p);
        check_fail(msg);
      }
    }
    txl_cuda_free(dx);
    free(x);
    free(got);
  }
}

static void test_dropout(TxlDtype act) {
  TxlDropout d = {0.3f, 1234u, txl_layer_site(2, TXL_LSITE_FF_HIDDEN), 77u, NULL};
  test_dropout_case(act, 7, 5, 203, 3, d);  /* feats not a multiple of 4 */
  d.p = 0.1f;
  d.site = TXL_SITE_EMBED;
  test_dropout_case(act, 3, 11, 4, 100, d); /* exactly one Philox group per row */
  d.p = 0.0f;
  test_dropout_case(act, 2, 3, 9, 0, d);    /* identity */
}

/* ---- layer norm -------------------------------------------------------------------------- */

/* Forward: the mean and the variance are sums of d terms; out_i depends on them through
 * (x_i - mean) * rstd. Bounds (k = d, a = 6):
 *   mean:  c (d + a) u mean|x|
 *   rstd:  c (d + a) u rstd                  (relative error of var, halved by the sqrt)
 *   out:   c (d + a) u ((|x_i| + mean|x|) rstd |w_i| + |b_i|)
 * Backward (given the same mean, rstd): dinp sums d terms per row, dw and db sum n terms per
 * column:
 *   dinp:  c (d + a) u (|dinp0_i| + rstd (|g_i| + mean|g| + |xhat_i| mean|g xhat|)),  g = dout w
 *   dw:    c (n + a) u (|dw0_j| + sum_r |dout xhat|),   db: the same with |dout|.
 * bf16, fp16: out and dinp (activations, dinp0 rounded on the host like every input) add their
 * one rounding (bounds_act); mean, rstd, dw and db are fp32 in every table. */
static void test_layernorm_case(TxlDtype act, int64_t n, int d) {
  const TxlOps *o = txl_ops_cuda(act);
  const float eps = 1e-5f;
  const double k_d = TOL_C * (d + 6) * OT_U, k_n = TOL_C * ((double)n + 6) * OT_U;
  float *x = host_rand(n * d, -1.0, 1.0);
  for (int64_t r = 0; r < n; r++) /* a per-row offset: exercises the mean subtraction */
    for (int j = 0; j < d; j++) x[r * d + j] += (float)(r % 7) - 3.0f;
  round_act(x, n * d, act);
  float *w = host_rand(d, 0.5, 1.5), *b = host_rand(d, -0.2, 0.2);
  float *out = host_rand(n * d, -1, 1), *mean = host_rand(n, -1, 1), *rstd = host_rand(n, -1, 1);
  txl_cpu_layernorm_forward(out, mean, rstd, x, w, b, n, d, d, eps);

  void *dx = dev_act(x, n * d, act, "test: ln x");
  float *dw_ = dev_from(w, (size_t)d * sizeof(float), "test: ln w");
  float *db_ = dev_from(b, (size_t)d * sizeof(float), "test: ln b");
  void *dout = dev_poison_act(n * d, act, "test: ln out");
  float *dmean = dev_poison(n, "test: ln mean");
  float *drstd = dev_poison(n, "test: ln rstd");
  o->layernorm_forward(dout, dmean, drstd, dx, dw_, db_, n, d, d, eps);
  float *gout = host_from_act(dout, n * d, act), *gmean = host_from(dmean, n), *grstd = host_from(drstd, n);

  double *bo = ot_alloc_d(n * d), *bm = ot_alloc_d(n), *br = ot_alloc_d(n);
  layernorm_forward_bounds(bo, bm, br, x, w, b, rstd, n, d, k_d);
  bounds_act(bo, out, n * d, act);
  char what[96];
  snprintf(what, sizeof what, "layernorm_forward %s n=%lld d=%d: out", act_name(act), (long long)n, d);
  check_close(what, gout, out, bo, n * d);
  snprintf(what, sizeof what, "layernorm_forward %s n=%lld d=%d: mean", act_name(act), (long long)n, d);
  check_close(what, gmean, mean, bm, n);
  snprintf(what, sizeof what, "layernorm_forward %s n=%lld d=%d: rstd", act_name(act), (long long)n, d);
  check_close(what, grstd, rstd, br, n);

  /* backward, from the CPU's mean and rstd on both sides; dinp, dw, db start non-zero (+=) */
  float *dy = host_rand(n * d, -1.0, 1.0);
  float *dinp = host_rand(n * d, -1.0, 1.0), *dwp = host_rand(d, -1.0, 1.0), *dbp = host_rand(d, -1.0, 1.0);
  round_act(dy, n * d, act);
  round_act(dinp, n * d, act);
  float *dinp0 = host_copy(dinp, n * d), *dw0 = host_copy(dwp, d), *db0 = host_copy(dbp, d);
  void *d_dy = dev_act(dy, n * d, act, "test: ln dy");
  void *d_dinp = dev_act(dinp, n * d, act, "test: ln dinp");
  float *d_dw = dev_from(dwp, (size_t)d * sizeof(float), "test: ln dw");
  float *d_db = dev_from(dbp, (size_t)d * sizeof(float), "test: ln db");
  txl_cuda_to_device(dmean, mean, (size_t)n * sizeof(float));
  txl_cuda_to_device(drstd, rstd, (size_t)n * sizeof(float));
  txl_cpu_layernorm_backward(dinp, dwp, dbp, dy, x, w, mean, rstd, n, d, d);
  o->layernorm_backward(d_dinp, d_dw, d_db, d_dy, dx, dw_, dmean, drstd, n, d, d);
  float *g_dinp = host_from_act(d_dinp, n * d, act), *g_dw = host_from(d_dw, d), *g_db = host_from(d_db, d);

  double *bdi = ot_alloc_d(n * d), *bdw = ot_alloc_d(d), *bdb = ot_alloc_d(d);
  layernorm_backward_bounds(bdi, bdw, bdb, dy, x, w, mean, rstd, dinp0, dw0, db0, n, d, k_d, k_n);
  bounds_act(bdi, dinp, n * d, act);
  snprintf(what, sizeof what, "layernorm_backward %s n=%lld d=%d: dinp (+=)", act_name(act), (long long)n, d);
  check_close(what, g_dinp, dinp, bdi, n * d);
  snprintf(what, sizeof what, "layernorm_backward %s n=%lld d=%d: dw (+=)", act_name(act), (long long)n, d);
  check_close(what, g_dw, dwp, bdw, d);
  snprintf(what, sizeof what, "layernorm_backward %s n=%lld d=%d: db (+=)", act_name(act), (long long)n, d);
  check_close(what, g_db, dbp, bdb, d);

  /* determinism: the same call again from the same state gives the same bits */
  to_device_act(d_dinp, dinp0, n * d, act);
  txl_cuda_to_device(d_dw, dw0, (size_t)d * sizeof(float));
  txl_cuda_to_device(d_db, db0, (size_t)d * sizeof(float));
  o->layernorm_backward(d_dinp, d_dw, d_db, d_dy, dx, dw_, dmean, drstd, n, d, d);
  float *g2_dw = host_from(d_dw, d), *g2_db = host_from(d_db, d);
  snprintf(what, sizeof what, "layernorm_backward %s n=%lld d=%d: dw rerun", act_name(act), (long long)n, d);
  check_bits(what, g2_dw, g_dw, d);
  snprintf(what, sizeof what, "layernorm_backward %s n=%lld d=%d: db rerun", act_name(act), (long long)n, d);
  check_bits(what, g2_db, g_db, d);

  txl_cuda_free(dx); txl_cuda_free(dw_); txl_cuda_free(db_); txl_cuda_free(dout);
  txl_cuda_free(dmean); txl_cuda_free(drstd); txl_cuda_free(d_dy); txl_cuda_free(d_dinp);
  txl_cuda_free(d_dw); txl_cuda_free(d_db);
  free(x); free(w); free(b); free(out); free(mean); free(rstd); free(gout); free(gmean);
  free(grstd); free(bo); free(bm); free(br); free(dy); free(dinp); free(dwp); free(dbp);
  free(dinp0); free(dw0); free(db0); free(g_dinp); free(g_dw); free(g_db); free(bdi);
  free(bdw); free(bdb); free(g2_dw); free(g2_db);
}

static void test_layernorm(TxlDtype act) {
  test_layernorm_case(act, 77, 333);  /* d over one 256-column tile, a few row chunks */
  test_layernorm_case(act, 9001, 67); /* many rows: the chunk count reaches its cap */
  test_layernorm_case(act, 1, 5);
}

/* ---- cross-entropy ----------------------------------------------------------------------- */

/* loss = log(s) + (m - x_t), s = sum_j exp(x_j - m) (V terms, each with an exp: a = 8):
 *   loss:  c (V + a) u (1 + |log s| + |m - x_t|)    (|log s| error ~ relative error of s)
 *   grad:  c (V + a + |x_j - m|) u |grad_scale| p_j  (+ the same for the -grad_scale at the
 *          target), p_j = softmax; |x_j - m| u is the relative error that rounding the argument
 *          of exp brings. With grad_scale = 0 the logits must come back untouched (bits).
 * bf16, fp16: the logits are rounded on the host; the loss is fp32 (the same bound), the gradient
 * stored over the logits adds its one rounding (bounds_act). */
static void test_xent_case(TxlDtype act, int64_t n, int V, float grad_scale, double spread, int pad) {
  const TxlOps *o = txl_ops_cuda(act);
  float *x = host_rand(n * V, -spread, spread);
  for (int64_t t = 0; t < n; t++) /* shifted rows: the max shift matters */
    for (int j = 0; j < V; j++) x[t * V + j] += (float)(40.0 * (double)(t % 3) - 40.0);
  round_act(x, n * V, act);
  int32_t *tg = malloc((size_t)n * sizeof(int32_t));
  for (int64_t t = 0; t < n; t++) tg[t] = (int32_t)(parity_urand() * V);
  tg[0] = 0;
  if (n > 1) tg[n - 1] = V - 1;
  if (pad) /* adaptive_group's padding: loss 0 and a zero gradient on both sides (bound 0) */
    for (int64_t t = 1; t < n; t += 3) tg[t] = -1;
  float *x0 = host_copy(x, n * V);
  float *loss = host_rand(n, -1, 1);

  void *dx = dev_act(x, n * V, act, "test: logits");
  int32_t *dtg = dev_from(tg, (size_t)n * sizeof(int32_t), "test: target");
  float *dloss = dev_poison(n, "test: loss");
  txl_cpu_xent_forward_backward(x, loss, tg, grad_scale, n, V, V);
  o->xent_forward_backward(dx, dloss, dtg, grad_scale, n, V, V);
  float *gx = host_from_act(dx, n * V, act), *gloss = host_from(dloss, n);

  double *bl = ot_alloc_d(n), *bg = ot_alloc_d(n * V);
  for (int64_t t = 0; t < n; t++) {
    const float *xr = x0 + t * V;
    if (tg[t] < 0) {
      bl[t] = 0.0;
      for (int j = 0; j < V; j++) bg[t * V + j] = 0.0;
      continue;
    }
    double m = xr[0];
    for (int j = 0; j < V; j++) m = fmax(m, xr[j]);
    double s = 0.0;
    for (int j = 0; j < V; j++) s += exp((double)xr[j] - m);
    bl[t] = TOL_C * (V + 8) * OT_U * (1.0 + fabs(log(s)) + fabs(m - xr[tg[t]]));
    for (int j = 0; j < V; j++) {
      const double p = exp((double)xr[j] - m) / s;
      bg[t * V + j] = TOL_C * (V + 8 + fabs((double)xr[j] - m)) * OT_U * fabs((double)grad_scale) *
                      (p + (j == tg[t] ? 1.0 : 0.0));
    }
  }
  bounds_act(bg, x, n * V, act);
  char what[96];
  snprintf(what, sizeof what, "xent %s n=%lld V=%d grad_scale=%g%s: loss", act_name(act), (long long)n, V,
           (double)grad_scale, pad ? " targets -1 among them" : "");
  check_close(what, gloss, loss, bl, n);
  snprintf(what, sizeof what, "xent %s n=%lld V=%d grad_scale=%g: dlogits", act_name(act), (long long)n, V,
           (double)grad_scale);
  if (grad_scale != 0.0f) {
    check_close(what, gx, x, bg, n * V);
  } else {
    check_bits(what, gx, x0, n * V);
  }
  txl_cuda_free(dx); txl_cuda_free(dtg); txl_cuda_free(dloss);
  free(x); free(tg); free(x0); free(loss); free(gx); free(gloss); free(bl); free(bg);
}

static void test_xent(TxlDtype act) {
  test_xent_case(act, 13, 1001, 1.0f / 13.0f, 3.0, 0);
  test_xent_case(act, 5, 30011, 0.25f, 8.0, 0);
  test_xent_case(act, 7, 33, 0.0f, 3.0, 0); /* loss only */
  test_xent_case(act, 3, 1, 1.0f, 3.0, 0);  /* a single class: loss 0, gradient 0 */
  test_xent_case(act, 13, 1001, 1.0f / 13.0f, 3.0, 1);
  test_xent_case(act, 7, 33, 0.0f, 3.0, 1);
}

/* ---- Adam -------------------------------------------------------------------------------- */

/* The same sequence of float operations on both sides (the bias corrections are computed in
 * double on the host by both, then rounded to float); they may differ only where a compiler
 * contracts a * b + c into an FMA (one rounding fewer). A few roundings each (a = 8, k = 0):
 *   m:  c a u (b1 |m0| + (1 - b1) |g'|)       v:  c a u (b2 v0 + (1 - b2) g'^2)
 *   p:  c a u (|p0| + |update|)  */
/* Bounds of the first and second moments m = b1 m0 + (1-b1) g', v = b2 v0 + (1-b2) g'^2 of Adam and
 * LAMB (g' = g gs): k times the magnitudes of their terms. */
static void moment_bounds(double *bm, double *bv, const float *m0, const float *v0, const float *g, float gs,
                          float b1, float b2, double k, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double gi = (double)g[i] * gs;
    bm[i] = k * (b1 * fabs((double)m0[i]) + (1.0 - b1) * fabs(gi));
    bv[i] = k * (b2 * (double)v0[i] + (1.0 - b2) * gi * gi);
  }
}

static void test_adam_case(int64_t n, int step) {
  const float lr = 2.5e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, gs = 0.37f;
  float *p = host_rand(n, -1, 1), *g = host_rand(n, -1, 1), *m = host_rand(n, -0.1, 0.1);
  float *v = host_rand(n, 0.0, 0.01);
  v[0] = 0.0f; /* sqrt(0): the eps path */
  g[0] = 0.0f;
  m[0] = 0.0f;
  float *p0 = host_copy(p, n), *m0 = host_copy(m, n), *v0 = host_copy(v, n);
  float *dp = dev_from(p, (size_t)n * sizeof(float), "test: p");
  float *dg = dev_from(g, (size_t)n * sizeof(float), "test: g");
  float *dm = dev_from(m, (size_t)n * sizeof(float), "test: m");
  float *dv = dev_from(v, (size_t)n * sizeof(float), "test: v");
  txl_cpu_adam_update(p, g, m, v, n, lr, b1, b2, eps, step, gs);
  txl_cuda_adam_update(dp, dg, dm, dv, n, lr, b1, b2, eps, step, gs);
  float *gp = host_from(dp, n), *gm = host_from(dm, n), *gv = host_from(dv, n);

  const double k = TOL_C * 8 * OT_U;
  double *bp = ot_alloc_d(n), *bm = ot_alloc_d(n), *bv = ot_alloc_d(n);
  moment_bounds(bm, bv, m0, v0, g, gs, b1, b2, k, n);
  for (int64_t i = 0; i < n; i++) bp[i] = k * (fabs((double)p0[i]) + fabs((double)p0[i] - (double)p[i]));
  char what[96];
  snprintf(what, sizeof what, "adam n=%lld step=%d: p", (long long)n, step);
  check_close(what, gp, p, bp, n);
  snprintf(what, sizeof what, "adam n=%lld step=%d: m", (long long)n, step);
  check_close(what, gm, m, bm, n);
  snprintf(what, sizeof what, "adam n=%lld step=%d: v", (long long)n, step);
  check_close(what, gv, v, bv, n);
  txl_cuda_free(dp); txl_cuda_free(dg); txl_cuda_free(dm); txl_cuda_free(dv);
  free(p); free(g); free(m); free(v); free(p0); free(m0); free(v0); free(gp); free(gm); free(gv);
  free(bp); free(bm); free(bv);
}

static void test_adam(void) {
  test_adam_case(1001, 1);
  test_adam_case(100003, 7);
}

/* SGD, LAMB's moments and axpy: the same float operations on both sides (kernels/common/
 * sgd_lamb.h; LAMB's bias corrections in double on the host by both, rounded to float); they may
 * differ only where a compiler contracts a * b + c into an FMA (one rounding fewer), a few
 * roundings of each term (a = 8 as Adam's, k = 0):
 *   sgd buf: c a u (|mom buf0| + |g'|)      p: c a u (|p0| + |p0 - p|) (lr buf's error on top)
 *   lamb m, v: as Adam's;   direction u: the moments' bounds carried through it (below), plus
 *                           c a u (|u| + |wd p|)
 *   axpy: c a u (|y0| + |a x|) */
static void test_sgd_case(int64_t n, float mom, int first) {
  const float lr = 0.05f, gs = 0.37f;
  float *p = host_rand(n, -1, 1), *g = host_rand(n, -1, 1), *b = host_rand(n, -0.3, 0.3);
  float *p0 = host_copy(p, n), *b0 = host_copy(b, n);
  float *dp = dev_from(p, (size_t)n * sizeof(float), "test: p");
  float *dg = dev_from(g, (size_t)n * sizeof(float), "test: g");
  float *db = dev_from(b, (size_t)n * sizeof(float), "test: buf");
  txl_cpu_sgd_update(p, g, b, n, lr, mom, gs, first);
  txl_cuda_sgd_update(dp, dg, db, n, lr, mom, gs, first);
  float *gp = host_from(dp, n), *gb = host_from(db, n);
  const double k = TOL_C * 8 * OT_U;
  double *bp = ot_alloc_d(n), *bb = ot_alloc_d(n);
  for (int64_t i = 0; i < n; i++) {
    bb[i] = k * ((first ? 0.0 : fabs((double)mom * b0[i])) + fabs((double)g[i] * gs));
    bp[i] = k * (fabs((double)p0[i]) + fabs((double)p0[i] - (double)p[i])) + lr * bb[i];
  }
  char what[96];
  snprintf(what, sizeof what, "sgd n=%lld mom=%g first=%d: p", (long long)n, mom, first);
  check_close(what, gp, p, bp, n);
  snprintf(what, sizeof what, "sgd n=%lld mom=%g first=%d: buf", (long long)n, mom, first);
  check_close(what, gb, b, bb, n);
  txl_cuda_free(dp); txl_cuda_free(dg); txl_cuda_free(db);
  free(p); free(g); free(b); free(p0); free(b0); free(gp); free(gb); free(bp); free(bb);
}

static void test_lamb_case(int64_t n, int step, float wd) {
  const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, gs = 0.37f;
  float *p = host_rand(n, -1, 1), *g = host_rand(n, -1, 1), *m = host_rand(n, -0.1, 0.1);
  float *v = host_rand(n, 0.0, 0.01);
  v[0] = 0.0f, g[0] = 0.0f, m[0] = 0.0f; /* the eps path: u = wd p */
  float *m0 = host_copy(m, n), *v0 = host_copy(v, n), *g0 = host_copy(g, n);
  float *dp = dev_from(p, (size_t)n * sizeof(float), "test: p");
  float *dg = dev_from(g, (size_t)n * sizeof(float), "test: g");
  float *dm = dev_from(m, (size_t)n * sizeof(float), "test: m");
  float *dv = dev_from(v, (size_t)n * sizeof(float), "test: v");
  txl_cpu_lamb_moments(g, p, m, v, n, b1, b2, eps, wd, step, gs);
  txl_cuda_lamb_moments(dg, dp, dm, dv, n, b1, b2, eps, wd, step, gs);
  float *gu = host_from(dg, n), *gm = host_from(dm, n), *gv = host_from(dv, n);
  const double k = TOL_C * 8 * OT_U;
  double *bu = ot_alloc_d(n), *bm = ot_alloc_d(n), *bv = ot_alloc_d(n);
  moment_bounds(bm, bv, m0, v0, g0, gs, b1, b2, k, n);
  /* The direction u = (m / bc1) / D + wd p, D = sqrt(v / bc2) + eps, is made from moments that may
   * differ by their own bounds bm, bv (an FMA on one side only), and a small m is the difference
   * of two terms, so its error is not relative to it. |sqrt a - sqrt b| is at most sqrt |a - b|
   * and at most |a - b| / sqrt a, so |D - D'| <= dD = min(sqrt(bv / bc2), (bv / bc2) / sqrt(v / bc2))
   * and D' >= D_lo = max(D - dD, eps):
   *   |m'/D' - m/D| <= |m' - m| / D' + |m| |D - D'| / (D D')
   *                 <= bm / D_lo + |m| dD / (D D_lo)     (each over bc1),
   * plus the roundings of u's own operations, k (|u| + |wd p|). */
  const double bc1 = 1.0 - pow((double)b1, step), bc2 = 1.0 - pow((double)b2, step);
  for (int64_t i = 0; i < n; i++) {
    const double sv = sqrt((double)v[i] / bc2), d = sv + eps;
    const double dv = sv > 0 ? fmin(sqrt(bv[i] / bc2), bv[i] / bc2 / sv) : sqrt(bv[i] / bc2);
    const double d_lo = fmax(d - dv, (double)eps);
    bu[i] = bm[i] / (bc1 * d_lo) + fabs((double)m[i]) * dv / (bc1 * d * d_lo) +
            k * (fabs((double)g[i]) + fabs((double)wd * p[i])) + 1e-30;
  }
  char what[96];
  snprintf(what, sizeof what, "lamb n=%lld step=%d wd=%g: direction", (long long)n, step, wd);
  check_close(what, gu, g, bu, n);
  snprintf(what, sizeof what, "lamb n=%lld step=%d wd=%g: m", (long long)n, step, wd);
  check_close(what, gm, m, bm, n);
  snprintf(what, sizeof what, "lamb n=%lld step=%d wd=%g: v", (long long)n, step, wd);
  check_close(what, gv, v, bv, n);
  txl_cuda_free(dp); txl_cuda_free(dg); txl_cuda_free(dm); txl_cuda_free(dv);
  free(p); free(g); free(m); free(v); free(m0); free(v0); free(g0); free(gu); free(gm); free(gv);
  free(bu); free(bm); free(bv);
}

static void test_axpy_case(int64_t n, float a) {
  float *y = host_rand(n, -1, 1), *x = host_rand(n, -3, 3), *y0 = host_copy(y, n);
  float *dy = dev_from(y, (size_t)n * sizeof(float), "test: y");
  float *dx = dev_from(x, (size_t)n * sizeof(float), "test: x");
  txl_cpu_axpy(y, x, a, n);
  txl_cuda_axpy(dy, dx, a, n);
  float *gy = host_from(dy, n);
  const double k = TOL_C * 8 * OT_U;
  double *b = ot_alloc_d(n);
  for (int64_t i = 0; i < n; i++) b[i] = k * (fabs((double)y0[i]) + fabs((double)a * x[i])) + 1e-30;
  char what[96];
  snprintf(what, sizeof what, "axpy n=%lld a=%g", (long long)n, a);
  check_close(what, gy, y, b, n);
  txl_cuda_free(dy); txl_cuda_free(dx);
  free(y); free(x); free(y0); free(gy); free(b);
}

static void test_sgd_lamb(void) {
  test_sgd_case(1001, 0.9f, 1);
  test_sgd_case(100003, 0.9f, 0);
  test_sgd_case(1001, 0.0f, 0);
  test_lamb_case(1001, 1, 0.0f);
  test_lamb_case(100003, 7, 0.01f);
  test_axpy_case(100003, -3e-3f);
}

int main(void) {
  parity_begin("cuda parity (memory, gemm, embedding, dropout, layernorm, xent, adam, sgd, lamb)");
  txl_cuda_reserve(9001, 0, 333); /* the largest layer-norm backward: rows, d */
  test_memory();
  test_gemm();
  test_gemm_fp16();
  TxlDtype acts[3];
  const int n_acts = parity_acts(acts, "the bf16 table");
  for (int a = 0; a < n_acts; a++) {
    test_embedding(acts[a]);
    test_dropout(acts[a]);
    test_layernorm(acts[a]);
    test_xent(acts[a]);
  }
  test_adam();
  test_sgd_lamb();
  return parity_end();
}
