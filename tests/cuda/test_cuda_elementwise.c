/* The CUDA backend's table (txl_ops_cuda) and its element-wise, reduction, embedding, position,
 * fused FFN and fused layer-norm ops against the CPU op of the same name (kernels/cpu, itself
 * tested against double-precision references in tests/ops), on the same random non-zero inputs,
 * odd sizes throughout.
 *
 * The table check needs no device and runs first. Where there is no CUDA device (or no driver)
 * the rest prints "SKIPPED: no CUDA device". Otherwise one line per checked output (max absolute
 * and relative error, max ratio error / bound); the exit status is 1 if any element is outside
 * its bound (a NaN always is). Outputs that an op overwrites are poisoned with NaN before the
 * call (every element must be written); outputs that it accumulates into (+=) start from random
 * values.
 *
 * Tolerances (see tests/cuda/test_cuda_parity.c for the argument): u = 2^-24, and a float sum of
 * k terms is within about k u of the exact sum relative to the sum of the absolute values of its
 * terms, whatever the order, so each check bounds element i by c (k + a) u mag_i with c = TOL_C
 * (2 backends x 2 of slack), a the few extra roundings, mag_i the sum of absolute values (in
 * double, from the inputs). Where a sum is accumulated in double on both sides its k terms only
 * cost k 2^-53 = k u 2^-29 each. Where both sides do the same single float operation per element
 * (bias_fill, relu, add, scale, the dropout parts of the fused ops, the residual sum), the check
 * demands identical bits. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/parity.h"

#define U_F64 (1.0 / 9007199254740992.0) /* 2^-53: the unit roundoff of double */

/* ---- the table --------------------------------------------------------------------------- */

typedef void (*AnyFn)(void); /* -Wcast-function-type lets any function pointer become this */

/* Every member of TxlOps is the txl_cuda_ function of its name, and none is forgotten (the size
 * of the struct is the name plus one pointer per member listed here, as tests/ops/test_table.c
 * checks for the CPU table). Returns the number of failures. */
static int test_table(void) {
  const TxlOps *o = txl_ops_cuda();
  int bad = 0;
  if (!o || !o->name || strcmp(o->name, "cuda") != 0) {
    printf("    table: name is \"%s\", not \"cuda\"  FAIL\n", o && o->name ? o->name : "(null)");
    return 1;
  }
  const struct {
    const char *name;
    AnyFn got, want;
  } m[] = {
      {"alloc", (AnyFn)o->alloc, (AnyFn)txl_cuda_alloc},
      {"free", (AnyFn)o->free, (AnyFn)txl_cuda_free},
      {"copy", (AnyFn)o->copy, (AnyFn)txl_cuda_copy},
      {"to_device", (AnyFn)o->to_device, (AnyFn)txl_cuda_to_device},
      {"to_host", (AnyFn)o->to_host, (AnyFn)txl_cuda_to_host},
      {"zero", (AnyFn)o->zero, (AnyFn)txl_cuda_zero},
      {"gemm", (AnyFn)o->gemm, (AnyFn)txl_cuda_gemm},
      {"bias_fill", (AnyFn)o->bias_fill, (AnyFn)txl_cuda_bias_fill},
      {"bias_backward", (AnyFn)o->bias_backward, (AnyFn)txl_cuda_bias_backward},
      {"add", (AnyFn)o->add, (AnyFn)txl_cuda_add},
      {"sumsq", (AnyFn)o->sumsq, (AnyFn)txl_cuda_sumsq},
      {"embedding_forward", (AnyFn)o->embedding_forward, (AnyFn)txl_cuda_embedding_forward},
      {"embedding_backward", (AnyFn)o->embedding_backward, (AnyFn)txl_cuda_embedding_backward},
      {"posemb_forward", (AnyFn)o->posemb_forward, (AnyFn)txl_cuda_posemb_forward},
      {"dropout", (AnyFn)o->dropout, (AnyFn)txl_cuda_dropout},
      {"bias_relu_dropout_forward", (AnyFn)o->bias_relu_dropout_forward,
       (AnyFn)txl_cuda_bias_relu_dropout_forward},
      {"relu_dropout_backward", (AnyFn)o->relu_dropout_backward,
       (AnyFn)txl_cuda_relu_dropout_backward},
      {"layernorm_forward", (AnyFn)o->layernorm_forward, (AnyFn)txl_cuda_layernorm_forward},
      {"layernorm_backward", (AnyFn)o->layernorm_backward, (AnyFn)txl_cuda_layernorm_backward},
      {"add_layernorm_forward", (AnyFn)o->add_layernorm_forward,
       (AnyFn)txl_cuda_add_layernorm_forward},
      {"layernorm_backward_dropout", (AnyFn)o->layernorm_backward_dropout,
       (AnyFn)txl_cuda_layernorm_backward_dropout},
      {"rel_attn_forward", (AnyFn)o->rel_attn_forward, (AnyFn)txl_cuda_rel_attn_forward},
      {"rel_attn_backward", (AnyFn)o->rel_attn_backward, (AnyFn)txl_cuda_rel_attn_backward},
      {"rel_attn_saved_floats", (AnyFn)o->rel_attn_saved_floats,
       (AnyFn)txl_cuda_rel_attn_saved_floats},
      {"rel_attn_workspace", (AnyFn)o->rel_attn_workspace, (AnyFn)txl_cuda_rel_attn_workspace},
      {"xent_forward_backward", (AnyFn)o->xent_forward_backward,
       (AnyFn)txl_cuda_xent_forward_backward},
      {"adam_update", (AnyFn)o->adam_update, (AnyFn)txl_cuda_adam_update},
  };
  const int n = (int)(sizeof m / sizeof m[0]);
  for (int k = 0; k < n; k++)
    if (m[k].got == NULL || m[k].got != m[k].want) {
      printf("    table: member %s is %s  FAIL\n", m[k].name,
             m[k].got ? "another function" : "NULL");
      bad++;
    }
  if (sizeof(TxlOps) != sizeof(const char *) + (size_t)n * sizeof(AnyFn)) {
    printf("    table: sizeof(TxlOps) = %zu, but %d members are listed here: one is forgotten  FAIL\n",
           sizeof(TxlOps), n);
    bad++;
  }
  printf("%-50s %d members, each the txl_cuda_ function of its name  %s\n", "txl_ops_cuda table",
         n, bad ? "FAIL" : "ok");
  return bad;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static float *dev_copy_of(const float *host, int64_t n, const char *what) {
  return dev_from(host, (size_t)(n ? n : 1) * sizeof(float), what);
}

/* Random non-zero values in [lo, hi) (a draw of exactly 0 is replaced by lo). */
static float *host_rand_nz(int64_t n, double lo, double hi) {
  float *x = host_rand(n, lo, hi);
  for (int64_t i = 0; i < n; i++)
    if (x[i] == 0.0f) x[i] = (float)lo;
  return x;
}

/* ---- bias_fill, bias_backward -------------------------------------------------------------- */

/* bias_fill: a copy on both sides, bits.
 * bias_backward: db_j + sum_r dy[r, j]. The CPU adds groups of four rows in float (two roundings
 * per term, a = 2) into a double accumulator and rounds once at the end; the GPU sums in double
 * and rounds once. Both are within (3 + rows 2^-29) u (|db0_j| + sum_r |dy_rj|) of the exact value:
 *   bound_j = c (3 + rows 2^-29) u (|db0_j| + sum_r |dy_rj|).
 * A second call from the same db0 must give the same bits (determinism). */
static void test_bias_case(int64_t rows, int n) {
  char what[96];
  const int64_t total = rows * n;
  float *b = host_rand_nz(n, -1.0, 1.0);
  float *want = host_rand(total, -1.0, 1.0);
  txl_cpu_bias_fill(want, b, rows, n);
  float *db_dev = dev_copy_of(b, n, "test: b");
  float *dx = dev_poison(total, "test: x");
  txl_cuda_bias_fill(dx, db_dev, rows, n);
  float *got = host_from(dx, total);
  snprintf(what, sizeof what, "bias_fill rows=%lld n=%d", (long long)rows, n);
  check_bits(what, got, want, total);
  free(got);

  float *dy = host_rand_nz(total, -1.0, 1.0);
  float *acc0 = host_rand_nz(n, -1.0, 1.0), *acc = host_copy(acc0, n);
  txl_cpu_bias_backward(acc, dy, rows, n);
  txl_cuda_to_device(dx, dy, (size_t)total * sizeof(float));
  txl_cuda_to_device(db_dev, acc0, (size_t)n * sizeof(float));
  txl_cuda_bias_backward(db_dev, dx, rows, n);
  got = host_from(db_dev, n);
  double *bound = bounds_alloc(n);
  for (int j = 0; j < n; j++) bound[j] = fabs((double)acc0[j]);
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < n; j++) bound[j] += fabs((double)dy[r * n + j]);
  const double k = TOL_C * (3.0 + (double)rows * U_F64 / U_F32) * U_F32;
  for (int j = 0; j < n; j++) bound[j] *= k;
  snprintf(what, sizeof what, "bias_backward rows=%lld n=%d (+=)", (long long)rows, n);
  check_close(what, got, acc, bound, n);

  txl_cuda_to_device(db_dev, acc0, (size_t)n * sizeof(float));
  txl_cuda_bias_backward(db_dev, dx, rows, n);
  float *again = host_from(db_dev, n);
  snprintf(what, sizeof what, "bias_backward rows=%lld n=%d rerun", (long long)rows, n);
  check_bits(what, again, got, n);

  txl_cuda_free(db_dev);
  txl_cuda_free(dx);
  free(b); free(want); free(got); free(dy); free(acc0); free(acc); free(bound); free(again);
}

static void test_bias(void) {
  test_bias_case(1, 1);
  test_bias_case(37, 33);
  test_bias_case(1001, 1025);
  test_bias_case(20011, 33);  /* the chunk count reaches its cap (512) */
  test_bias_case(7, 5000);    /* the CPU's wide-row path */
  test_bias_case(112, 300007); /* a vocabulary-wide output: the partials' size caps the chunks */
}

/* ---- add ---------------------------------------------------------------------------------- */

/* One float addition per element on both sides: bits. */
static void test_add_case(int64_t n) {
  char what[96];
  float *x = host_rand_nz(n, -1.0, 1.0), *y = host_rand_nz(n, -1.0, 1.0);
  if (n > 1) x[1] = -0.0f, y[1] = 0.0f;
  if (n > 2) y[2] = -0.0f;
  float *dx = dev_copy_of(x, n, "test: x"), *dy = dev_copy_of(y, n, "test: y");

  float *want = host_copy(x, n), *got;
  /* add into a poisoned output, then in place (out aliases a, then b) */
  float *dout = dev_poison(n, "test: out");
  txl_cpu_add(want, x, y, n);
  txl_cuda_add(dout, dx, dy, n);
  got = host_from(dout, n);
  snprintf(what, sizeof what, "add n=%lld", (long long)n);
  check_bits(what, got, want, n);
  free(got);
  txl_cuda_add(dx, dx, dy, n);
  got = host_from(dx, n);
  snprintf(what, sizeof what, "add n=%lld (out = a)", (long long)n);
  check_bits(what, got, want, n);
  free(got);
  txl_cuda_to_device(dx, x, (size_t)n * sizeof(float));
  txl_cuda_add(dy, dx, dy, n);
  got = host_from(dy, n);
  snprintf(what, sizeof what, "add n=%lld (out = b)", (long long)n);
  check_bits(what, got, want, n);
  free(got);

  txl_cuda_free(dx); txl_cuda_free(dy); txl_cuda_free(dout);
  free(x); free(y); free(want);
}

static void test_add(void) {
  const int64_t sizes[] = {1, 7, 1000, 12345, 1000003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) test_add_case(sizes[k]);
}

/* ---- sumsq -------------------------------------------------------------------------------- */

/* The squares of floats are exact in double, so each side's only error is its double summation
 * of n non-negative terms: within (n - 1) 2^-53 S of the exact S = sum x^2 in any order. The two
 * are within 2 (n - 1) 2^-53 S of each other; bound = c n 2^-53 S (c = TOL_C: 2 x 2 of slack).
 * A second call must give the same bits. */
static void test_sumsq_case(int64_t n, double spread) {
  float *x = host_rand_nz(n, -spread, spread);
  float *dx = dev_copy_of(x, n, "test: sumsq x");
  const double want = txl_cpu_sumsq(x, n);
  const double got = txl_cuda_sumsq(dx, n), again = txl_cuda_sumsq(dx, n);
  double exact_ish = 0.0; /* S for the bound (its own rounding is far below the bound) */
  for (int64_t i = 0; i < n; i++) exact_ish += (double)x[i] * (double)x[i];
  const double bound = TOL_C * (double)n * U_F64 * exact_ish, err = fabs(got - want);
  const int ok = err <= bound; /* NaN fails */
  const int same = memcmp(&got, &again, sizeof got) == 0;
  char what[96];
  snprintf(what, sizeof what, "sumsq n=%lld", (long long)n);
  printf("%-50s cuda %.17g cpu %.17g  err/bound %.2e  rerun %s  %s\n", what, got, want,
         err / bound, same ? "same bits" : "OTHER BITS", ok && same ? "ok" : "FAIL");
  if (!ok) check_fail("sumsq: outside the bound");
  if (!same) check_fail("sumsq: a second call gave other bits");
  txl_cuda_free(dx);
  free(x);
}

static void test_sumsq(void) {
  test_sumsq_case(1, 1.0);
  test_sumsq_case(7, 3.0);
  test_sumsq_case(1000, 1.0);
  test_sumsq_case(12345, 100.0);
  test_sumsq_case(1000003, 1.0);   /* many chunks of the minimum size */
  test_sumsq_case(33566777, 1.0);  /* past 4096 chunks of 8192: larger chunks */
}

/* ---- embedding_backward ------------------------------------------------------------------- */

/* 1 when the CPU's `g += o * scale` is one fused multiply-add (as the compiler contracts it where
 * the CPU has FMA). Probe: o = scale = 1 + 2^-12, g = -(1 + 2^-11): the product
 * 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 (a tie, to even), so unfused g becomes 0, fused 2^-24. */
static int cpu_embedding_fuses(void) {
  const float o = 1.0f + 0x1p-12f, g0 = -(1.0f + 0x1p-11f);
  float g = g0;
  const int32_t tok = 0;
  txl_cpu_embedding_backward(&g, &o, &tok, o, 1, 1);
  return g != 0.0f;
}

/* The GPU adds each token's occurrences in increasing t, each as fmaf(dout, scale, acc), as the
 * CPU does where it fuses (checked above): then the bits must be the same. Where the CPU does not
 * fuse, element (v, j) is a sum of 1 + k_v terms (k_v occurrences of v, one extra rounding each
 * for the product): bound = c (k_v + 2) u (|demb0| + |scale| sum_t |dout_tj|).
 * Rows of tokens that do not occur must come back untouched (part of the comparison).
 * A second call from the same demb0 must give the same bits. */
static void test_embedding_backward_case(int64_t n, int d, int V, int skew, int fused) {
  char what[128];
  const float scale = 0.731f;
  int32_t *tok = malloc((size_t)n * sizeof(int32_t));
  for (int64_t t = 0; t < n; t++) {
    /* skew: half the positions are token V / 2 (a run longer than the GPU's batch of 256) */
    tok[t] = skew && parity_urand() < 0.5 ? V / 2 : (int32_t)(parity_urand() * V);
    if (tok[t] >= V) tok[t] = V - 1;
  }
  tok[0] = V - 1; /* the largest id: the highest digits of the sort */
  if (n > 2) tok[n - 1] = 0, tok[n / 2] = V - 1;
  float *dout = host_rand_nz(n * d, -1.0, 1.0);
  float *e0 = host_rand_nz((int64_t)V * d, -1.0, 1.0), *want = host_copy(e0, (int64_t)V * d);
  txl_cpu_embedding_backward(want, dout, tok, scale, n, d);

  float *d_emb = dev_copy_of(e0, (int64_t)V * d, "test: demb");
  float *d_out = dev_copy_of(dout, n * d, "test: dout");
  int32_t *d_tok = dev_from(tok, (size_t)n * sizeof(int32_t), "test: tok");
  txl_cuda_embedding_backward(d_emb, d_out, d_tok, scale, n, d);
  float *got = host_from(d_emb, (int64_t)V * d);
  snprintf(what, sizeof what, "embedding_backward n=%lld d=%d V=%d%s (+=)", (long long)n, d, V,
           skew ? " skewed" : "");
  if (fused) {
    check_bits(what, got, want, (int64_t)V * d);
  } else {
    double *bound = bounds_alloc((int64_t)V * d);
    int64_t *count = calloc((size_t)V, sizeof(int64_t));
    for (int64_t i = 0; i < (int64_t)V * d; i++) bound[i] = fabs((double)e0[i]);
    for (int64_t t = 0; t < n; t++) {
      count[tok[t]]++;
      for (int j = 0; j < d; j++)
        bound[(int64_t)tok[t] * d + j] += fabs((double)scale) * fabs((double)dout[t * d + j]);
    }
    for (int v = 0; v < V; v++)
      for (int j = 0; j < d; j++) bound[(int64_t)v * d + j] *= TOL_C * ((double)count[v] + 2.0) * U_F32;
    check_close(what, got, want, bound, (int64_t)V * d);
    free(bound);
    free(count);
  }

  txl_cuda_to_device(d_emb, e0, (size_t)V * d * sizeof(float));
  txl_cuda_embedding_backward(d_emb, d_out, d_tok, scale, n, d);
  float *again = host_from(d_emb, (int64_t)V * d);
  snprintf(what, sizeof what, "embedding_backward n=%lld d=%d V=%d rerun", (long long)n, d, V);
  check_bits(what, again, got, (int64_t)V * d);

  txl_cuda_free(d_emb); txl_cuda_free(d_out); txl_cuda_free(d_tok);
  free(tok); free(dout); free(e0); free(want); free(got); free(again);
}

static void test_embedding_backward(void) {
  const int fused = cpu_embedding_fuses();
  printf("embedding_backward: the CPU %s multiply-adds: %s\n", fused ? "fuses" : "does not fuse",
         fused ? "bits required" : "bounded");
  test_embedding_backward_case(1, 1, 1, 0, fused);
  test_embedding_backward_case(7, 33, 3, 0, fused);
  test_embedding_backward_case(1000, 67, 50, 0, fused);
  test_embedding_backward_case(1001, 300, 1000, 1, fused);    /* two column tiles, a long run */
  test_embedding_backward_case(12345, 33, 300007, 0, fused);  /* ids of 19 bits, mostly unique */
  test_embedding_backward_case(12345, 7, 37, 1, fused);       /* runs of thousands */
}

/* ---- posemb ------------------------------------------------------------------------------- */

/* Both sides compute sin / cos of pos f_i in double and round to float; the device's double pow,
 * sin and cos are within a few ulp of double of glibc's, i.e. about 2^-50 relative to a float
 * ulp of 2^-23, so the float results are the same except where the double value lies within that
 * of a float rounding boundary, and then one float ulp apart: bound = ulp(want). (Nearly all are
 * identical: the count of differing elements is printed.) */
static void test_posemb_case(int K, int d, int clamp) {
  const int64_t n = (int64_t)K * d;
  float *want = host_rand(n, -1.0, 1.0);
  txl_cpu_posemb_forward(want, K, d, clamp);
  float *dR = dev_poison(n, "test: R");
  txl_cuda_posemb_forward(dR, K, d, clamp);
  float *got = host_from(dR, n);
  double *bound = bounds_alloc(n);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    const float a = fabsf(want[i]);
    bound[i] = (double)nextafterf(a, INFINITY) - (double)a;
    differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
  }
  char what[96];
  snprintf(what, sizeof what, "posemb K=%d d=%d clamp=%d (%lld not identical)", K, d, clamp,
           (long long)differ);
  check_close(what, got, want, bound, n);
  txl_cuda_free(dR);
  free(want); free(got); free(bound);
}

static void test_posemb(void) {
  test_posemb_case(1, 2, 0);
  test_posemb_case(37, 34, 0);
  test_posemb_case(1001, 410, 0);
  test_posemb_case(300, 64, 100); /* clamped positions */
  test_posemb_case(7, 1026, 3);
}

/* ---- fused FFN hidden layer ----------------------------------------------------------------- */

/* The same float operations (add, ReLU, mask multiply) on both sides, with the dropout op's
 * masks: bits for a, ad and dx. With p = 0, ad must be left as it was. */
static void test_ffn_case(int rows, int cols, int feats, int col0, TxlDropout drop) {
  char what[128];
  const int64_t n = (int64_t)rows * cols * feats;
  float *a = host_rand_nz(n, -1.0, 1.0), *b = host_rand_nz(feats, -0.5, 0.5);
  float *ad = host_rand_nz(n, -1.0, 1.0), *ad0 = host_copy(ad, n);
  float *d_a = dev_copy_of(a, n, "test: a"), *d_b = dev_copy_of(b, feats, "test: b");
  float *d_ad = drop.p > 0.0f ? dev_poison(n, "test: ad") : dev_copy_of(ad, n, "test: ad");
  txl_cpu_bias_relu_dropout_forward(a, ad, b, rows, cols, feats, col0, drop);
  txl_cuda_bias_relu_dropout_forward(d_a, d_ad, d_b, rows, cols, feats, col0, drop);
  float *ga = host_from(d_a, n), *gad = host_from(d_ad, n);
  snprintf(what, sizeof what, "bias_relu_dropout_forward %dx%dx%d col0=%d p=%g: a", rows, cols,
           feats, col0, (double)drop.p);
  check_bits(what, ga, a, n);
  snprintf(what, sizeof what, "bias_relu_dropout_forward %dx%dx%d col0=%d p=%g: ad%s", rows, cols,
           feats, col0, (double)drop.p, drop.p > 0.0f ? "" : " untouched");
  check_bits(what, gad, drop.p > 0.0f ? ad : ad0, n);

  /* backward from the forward's a (many exact zeros) */
  float *dx = host_rand_nz(n, -1.0, 1.0);
  float *d_dx = dev_copy_of(dx, n, "test: dx");
  txl_cpu_relu_dropout_backward(dx, a, rows, cols, feats, col0, drop);
  txl_cuda_relu_dropout_backward(d_dx, d_a, rows, cols, feats, col0, drop);
  float *gdx = host_from(d_dx, n);
  snprintf(what, sizeof what, "relu_dropout_backward %dx%dx%d col0=%d p=%g", rows, cols, feats,
           col0, (double)drop.p);
  check_bits(what, gdx, dx, n);

  txl_cuda_free(d_a); txl_cuda_free(d_b); txl_cuda_free(d_ad); txl_cuda_free(d_dx);
  free(a); free(b); free(ad); free(ad0); free(ga); free(gad); free(dx); free(gdx);
}

static void test_ffn(void) {
  TxlDropout d = {0.3f, 1234u, txl_layer_site(1, TXL_LSITE_FF_HIDDEN), 77u};
  test_ffn_case(1, 1, 1, 0, d);
  test_ffn_case(7, 5, 203, 3, d);   /* feats not a multiple of 4 */
  d.p = 0.1f;
  d.step = 5u;
  test_ffn_case(3, 11, 4, 100, d);  /* one Philox group per (row, column) */
  d.p = 0.5f;
  test_ffn_case(37, 3, 1025, 0, d);
  d.p = 0.0f;
  test_ffn_case(2, 3, 9, 0, d);     /* no dropout: ad untouched */
}

/* ---- fused layer norm ----------------------------------------------------------------------- */

/* add_layernorm_forward: res = x + y is one float add on both sides (bits); mean, rstd and out
 * are those of layernorm_forward on res, bounded as in test_cuda_parity.c (k = d, a = 6):
 *   mean:  c (d + a) u mean|res|,   rstd:  c (d + a) u rstd,
 *   out:   c (d + a) u ((|res_i| + mean|res|) rstd |w_i| + |b_i|).
 * The GPU's add_layernorm_forward and its add + layernorm_forward run the same code: bits.
 * Also with res aliasing x (in place, as the model calls it). */
static void test_add_layernorm_case(int64_t n, int d) {
  char what[128];
  const float eps = 1e-5f;
  const double k_d = TOL_C * (d + 6) * U_F32;
  float *x = host_rand_nz(n * d, -1.0, 1.0), *y = host_rand_nz(n * d, -1.0, 1.0);
  for (int64_t r = 0; r < n; r++) /* a per-row offset: exercises the mean subtraction */
    for (int j = 0; j < d; j++) x[r * d + j] += (float)(r % 7) - 3.0f;
  float *w = host_rand_nz(d, 0.5, 1.5), *b = host_rand_nz(d, -0.2, 0.2);
  float *res = host_rand(n * d, -1, 1), *out = host_rand(n * d, -1, 1);
  float *mean = host_rand(n, -1, 1), *rstd = host_rand(n, -1, 1);
  txl_cpu_add_layernorm_forward(res, out, mean, rstd, x, y, w, b, n, d, eps);

  float *d_x = dev_copy_of(x, n * d, "test: x"), *d_y = dev_copy_of(y, n * d, "test: y");
  float *d_w = dev_copy_of(w, d, "test: w"), *d_b = dev_copy_of(b, d, "test: b");
  float *d_res = dev_poison(n * d, "test: res"), *d_out = dev_poison(n * d, "test: out");
  float *d_mean = dev_poison(n, "test: mean"), *d_rstd = dev_poison(n, "test: rstd");
  txl_cuda_add_layernorm_forward(d_res, d_out, d_mean, d_rstd, d_x, d_y, d_w, d_b, n, d, eps);
  float *gres = host_from(d_res, n * d), *gout = host_from(d_out, n * d);
  float *gmean = host_from(d_mean, n), *grstd = host_from(d_rstd, n);

  double *bo = bounds_alloc(n * d), *bm = bounds_alloc(n), *br = bounds_alloc(n);
  layernorm_forward_bounds(bo, bm, br, res, w, b, rstd, n, d, k_d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: res", (long long)n, d);
  check_bits(what, gres, res, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: out", (long long)n, d);
  check_close(what, gout, out, bo, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: mean", (long long)n, d);
  check_close(what, gmean, mean, bm, n);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: rstd", (long long)n, d);
  check_close(what, grstd, rstd, br, n);

  /* the unfused GPU ops: the same bits */
  float *u_res = dev_poison(n * d, "test: res2"), *u_out = dev_poison(n * d, "test: out2");
  float *u_mean = dev_poison(n, "test: mean2"), *u_rstd = dev_poison(n, "test: rstd2");
  txl_cuda_add(u_res, d_x, d_y, n * d);
  txl_cuda_layernorm_forward(u_out, u_mean, u_rstd, u_res, d_w, d_b, n, d, eps);
  float *h = host_from(u_out, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: = add + layernorm", (long long)n, d);
  check_bits(what, gout, h, n * d);
  free(h);
  h = host_from(u_rstd, n);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: rstd = unfused", (long long)n, d);
  check_bits(what, grstd, h, n);
  free(h);

  /* in place: res = x */
  txl_cuda_add_layernorm_forward(d_x, d_out, d_mean, d_rstd, d_x, d_y, d_w, d_b, n, d, eps);
  h = host_from(d_x, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: res = x in place", (long long)n, d);
  check_bits(what, h, res, n * d);
  free(h);
  h = host_from(d_out, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward n=%lld d=%d: out, in place", (long long)n, d);
  check_bits(what, h, gout, n * d);
  free(h);

  txl_cuda_free(d_x); txl_cuda_free(d_y); txl_cuda_free(d_w); txl_cuda_free(d_b);
  txl_cuda_free(d_res); txl_cuda_free(d_out); txl_cuda_free(d_mean); txl_cuda_free(d_rstd);
  txl_cuda_free(u_res); txl_cuda_free(u_out); txl_cuda_free(u_mean); txl_cuda_free(u_rstd);
  free(x); free(y); free(w); free(b); free(res); free(out); free(mean); free(rstd);
  free(gres); free(gout); free(gmean); free(grstd); free(bo); free(bm); free(br);
}

/* layernorm_backward_dropout from the same mean and rstd on both sides. dinp is OVERWRITTEN (it
 * starts as NaN); per row it is a sum of d terms, bounded as in test_cuda_parity.c with no
 * initial value:  c (d + a) u rstd (|g_i| + mean|g| + |xhat_i| mean|g xhat|),  g = dout w.
 * dbranch = dropout(dinp): bits against the CPU's dropout op applied to the GPU's own dinp (one
 * multiply by the mask). dw, db (+=) are sums of n = rows cols terms:
 *   dw: c (n + a) u (|dw0_j| + sum_r |dout xhat|),   db: the same with |dout|.
 * And layernorm_backward with dinp = NULL must give the same dw, db bits (same code). */
static void test_ln_backward_dropout_case(int rows, int cols, int d, int col0, TxlDropout drop) {
  char what[128];
  const int64_t n = (int64_t)rows * cols;
  const float eps = 1e-5f;
  const double k_d = TOL_C * (d + 6) * U_F32, k_n = TOL_C * ((double)n + 6) * U_F32;
  float *x = host_rand_nz(n * d, -1.0, 1.0);
  for (int64_t r = 0; r < n; r++)
    for (int j = 0; j < d; j++) x[r * d + j] += (float)(r % 5) - 2.0f;
  float *w = host_rand_nz(d, 0.5, 1.5), *b = host_rand_nz(d, -0.2, 0.2);
  float *out = host_rand(n * d, -1, 1), *mean = host_rand(n, -1, 1), *rstd = host_rand(n, -1, 1);
  txl_cpu_layernorm_forward(out, mean, rstd, x, w, b, n, d, eps);
  float *dy = host_rand_nz(n * d, -1.0, 1.0);
  float *dw0 = host_rand_nz(d, -1.0, 1.0), *db0 = host_rand_nz(d, -1.0, 1.0);
  float *dw = host_copy(dw0, d), *db = host_copy(db0, d);
  float *dinp = host_rand(n * d, -1, 1), *dbranch = host_rand(n * d, -1, 1);
  txl_cpu_layernorm_backward_dropout(dinp, dbranch, dw, db, dy, x, w, mean, rstd, rows, cols, d,
                                     col0, drop);

  float *d_x = dev_copy_of(x, n * d, "test: x"), *d_w = dev_copy_of(w, d, "test: w");
  float *d_mean = dev_copy_of(mean, n, "test: mean"), *d_rstd = dev_copy_of(rstd, n, "test: rstd");
  float *d_dy = dev_copy_of(dy, n * d, "test: dout");
  float *d_dw = dev_copy_of(dw0, d, "test: dw"), *d_db = dev_copy_of(db0, d, "test: db");
  float *d_dinp = dev_poison(n * d, "test: dinp"), *d_dbr = dev_poison(n * d, "test: dbranch");
  txl_cuda_layernorm_backward_dropout(d_dinp, d_dbr, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd,
                                      rows, cols, d, col0, drop);
  float *g_dinp = host_from(d_dinp, n * d), *g_dbr = host_from(d_dbr, n * d);
  float *g_dw = host_from(d_dw, d), *g_db = host_from(d_db, d);

  double *bdi = bounds_alloc(n * d), *bdw = bounds_alloc(d), *bdb = bounds_alloc(d);
  layernorm_backward_bounds(bdi, bdw, bdb, dy, x, w, mean, rstd, NULL, dw0, db0, n, d, k_d, k_n);
  snprintf(what, sizeof what, "layernorm_backward_dropout %dx%dx%d p=%g: dinp (=)", rows, cols, d,
           (double)drop.p);
  check_close(what, g_dinp, dinp, bdi, n * d);
  float *want_br = host_copy(g_dinp, n * d);
  txl_cpu_dropout(want_br, rows, cols, d, col0, drop);
  snprintf(what, sizeof what, "layernorm_backward_dropout %dx%dx%d p=%g: dbranch", rows, cols, d,
           (double)drop.p);
  check_bits(what, g_dbr, want_br, n * d);
  snprintf(what, sizeof what, "layernorm_backward_dropout %dx%dx%d p=%g: dw (+=)", rows, cols, d,
           (double)drop.p);
  check_close(what, g_dw, dw, bdw, d);
  snprintf(what, sizeof what, "layernorm_backward_dropout %dx%dx%d p=%g: db (+=)", rows, cols, d,
           (double)drop.p);
  check_close(what, g_db, db, bdb, d);

  /* layernorm_backward without dinp: the same dw, db */
  txl_cuda_to_device(d_dw, dw0, (size_t)d * sizeof(float));
  txl_cuda_to_device(d_db, db0, (size_t)d * sizeof(float));
  txl_cuda_layernorm_backward(NULL, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd, n, d);
  float *h = host_from(d_dw, d);
  snprintf(what, sizeof what, "layernorm_backward dinp=NULL n=%lld d=%d: dw", (long long)n, d);
  check_bits(what, h, g_dw, d);
  free(h);
  h = host_from(d_db, d);
  snprintf(what, sizeof what, "layernorm_backward dinp=NULL n=%lld d=%d: db", (long long)n, d);
  check_bits(what, h, g_db, d);
  free(h);

  txl_cuda_free(d_x); txl_cuda_free(d_w); txl_cuda_free(d_mean); txl_cuda_free(d_rstd);
  txl_cuda_free(d_dy); txl_cuda_free(d_dw); txl_cuda_free(d_db); txl_cuda_free(d_dinp);
  txl_cuda_free(d_dbr);
  free(x); free(w); free(b); free(out); free(mean); free(rstd); free(dy); free(dw0); free(db0);
  free(dw); free(db); free(dinp); free(dbranch); free(g_dinp); free(g_dbr); free(g_dw);
  free(g_db); free(bdi); free(bdw); free(bdb); free(want_br);
}

static void test_layernorm_fused(void) {
  /* d at each register capacity of the forward (4, 8, 16, 32 values per lane) and beyond */
  test_add_layernorm_case(1, 5);
  test_add_layernorm_case(37, 33);
  test_add_layernorm_case(13, 128);
  test_add_layernorm_case(19, 256);
  test_add_layernorm_case(1001, 410);
  test_add_layernorm_case(11, 1024);
  test_add_layernorm_case(77, 1025);

  TxlDropout drop = {0.2f, 99u, txl_layer_site(0, TXL_LSITE_FF_OUT), 3u};
  test_ln_backward_dropout_case(1, 1, 5, 0, drop);
  drop.p = 0.3f;
  test_ln_backward_dropout_case(7, 5, 203, 3, drop);
  drop.site = txl_layer_site(2, TXL_LSITE_ATTN_OUT);
  test_ln_backward_dropout_case(37, 3, 1025, 0, drop);
  drop.p = 0.5f;
  test_ln_backward_dropout_case(3, 4, 33, 2, drop);
  drop.p = 0.0f;
  test_ln_backward_dropout_case(13, 11, 64, 7, drop); /* no dropout: dbranch = dinp */
}

int main(void) {
  /* the table needs no device */
  const int table_bad = test_table();
  if (txl_cuda_device_count() == 0) {
    printf("SKIPPED: no CUDA device (the table check above %s)\n", table_bad ? "FAILED" : "passed");
    return table_bad ? 1 : 0;
  }
  parity_begin("cuda parity (table, elementwise, sumsq, embedding_backward, posemb, ffn, fused layernorm)");
  if (table_bad) check_fail("txl_ops_cuda table");
  test_bias();
  test_add();
  test_sumsq();
  test_embedding_backward();
  test_posemb();
  test_ffn();
  test_layernorm_fused();
  return parity_end();
}
