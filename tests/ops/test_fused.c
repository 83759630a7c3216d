/* The fused ops (bias + ReLU + dropout, ReLU + dropout backward, residual + layer norm, layer-norm
 * backward + dropout) against the separate ops they replace (dropout, add, layer norm: each
 * tested against a double-precision reference by the other op tests) and an exact ReLU (a
 * select, no rounding). The fused ops promise the same arithmetic in the same order, so the
 * comparison is bit for bit. Odd shapes, feature counts on both sides of the dropout's
 * 64-feature vector path, row offsets (the masks depend on the row), and a pre-activation that
 * is exactly 0 (ReLU gives +0, and its gradient there is 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static float *rand_copy(const float *x, int64_t n) {
  float *y = ot_alloc(n);
  memcpy(y, x, (size_t)n * sizeof(float));
  return y;
}

static void test_ffn(int rows, int cols, int feats, int col0, TxlDropout d, OtRng *rng) {
  char name[128];
  const int64_t n = (int64_t)rows * cols * feats;
  float *a = ot_alloc(n), *b = ot_alloc(feats), *ad = ot_alloc(n), *dx = ot_alloc(n);
  ot_fill(a, n, -1.0f, 1.0f, rng), ot_fill(b, feats, -0.5f, 0.5f, rng), ot_fill(dx, n, -1.0f, 1.0f, rng);
  if (n > 1) a[1] = -b[1 % feats]; /* a pre-activation of exactly 0: ReLU gives +0, gradient 0 */
  for (int64_t k = 0; k < n; k++) ad[k] = -7.0f; /* untouched when p = 0 */
  float *ra = rand_copy(a, n), *rad = NULL, *rdx = rand_copy(dx, n);
  /* separate ops: bias (as bias_fill then adding the product, i.e. product + b), ReLU, copy, dropout */
  for (int64_t k = 0; k < n; k++) {
    const float v = ra[k] + b[k % feats];
    ra[k] = v > 0.0f ? v : 0.0f;
  }
  if (d.p > 0.0f) {
    rad = rand_copy(ra, n);
    txl_cpu_dropout(rad, rows, cols, feats, feats, col0, d);
  }
  txl_cpu_bias_relu_dropout_forward(a, ad, b, rows, cols, feats, feats, col0, d);
  snprintf(name, sizeof name, "bias_relu_dropout %dx%dx%d p=%g: a", rows, cols, feats, (double)d.p);
  ot_check_same(name, a, ra, (size_t)n * sizeof(float));
  if (rad) {
    snprintf(name, sizeof name, "bias_relu_dropout %dx%dx%d p=%g: dropped", rows, cols, feats, (double)d.p);
    ot_check_same(name, ad, rad, (size_t)n * sizeof(float));
  } else {
    int untouched = 1;
    for (int64_t k = 0; k < n; k++) untouched &= ad[k] == -7.0f;
    ot_check_true("bias_relu_dropout p=0 leaves the dropped copy alone", untouched, "%s", untouched ? "" : "written");
  }
  txl_cpu_dropout(rdx, rows, cols, feats, feats, col0, d);
  for (int64_t k = 0; k < n; k++) rdx[k] = a[k] > 0.0f ? rdx[k] : 0.0f;
  txl_cpu_relu_dropout_backward(dx, a, rows, cols, feats, feats, col0, d);
  snprintf(name, sizeof name, "relu_dropout_backward %dx%dx%d p=%g", rows, cols, feats, (double)d.p);
  ot_check_same(name, dx, rdx, (size_t)n * sizeof(float));
  free(a), free(b), free(ad), free(dx), free(ra), free(rad), free(rdx);
}

static void test_ln(int rows, int cols, int d, int col0, TxlDropout drop, OtRng *rng) {
  char name[128];
  const int64_t n = (int64_t)rows * cols, nd = n * d;
  float *x = ot_alloc(nd), *y = ot_alloc(nd), *w = ot_alloc(d), *b = ot_alloc(d);
  ot_fill(x, nd, -2.0f, 2.0f, rng), ot_fill(y, nd, -1.0f, 1.0f, rng);
  ot_fill(w, d, 0.5f, 1.5f, rng), ot_fill(b, d, -0.5f, 0.5f, rng);
  float *res = ot_alloc(nd), *out = ot_alloc(nd), *mean = ot_alloc(n), *rstd = ot_alloc(n);
  float *rres = ot_alloc(nd), *rout = ot_alloc(nd), *rmean = ot_alloc(n), *rrstd = ot_alloc(n);
  txl_cpu_add(rres, x, y, nd, TXL_F32);
  txl_cpu_layernorm_forward(rout, rmean, rrstd, rres, w, b, n, d, d, 1e-5f);
  txl_cpu_add_layernorm_forward(res, out, mean, rstd, x, y, w, b, n, d, d, 1e-5f);
  snprintf(name, sizeof name, "add_layernorm %lldx%d: res, out, mean, rstd", (long long)n, d);
  int same = !memcmp(res, rres, (size_t)nd * 4) && !memcmp(out, rout, (size_t)nd * 4) &&
             !memcmp(mean, rmean, (size_t)n * 4) && !memcmp(rstd, rrstd, (size_t)n * 4);
  ot_check_true(name, same, "%s", same ? "" : "differ");
  /* the aliased form the model may use: res in place of x */
  float *alias = rand_copy(x, nd);
  txl_cpu_add_layernorm_forward(alias, out, mean, rstd, alias, y, w, b, n, d, d, 1e-5f);
  snprintf(name, sizeof name, "add_layernorm %lldx%d: res aliasing x", (long long)n, d);
  ot_check_same(name, alias, rres, (size_t)nd * sizeof(float));

  float *dout = ot_alloc(nd), *dinp = ot_alloc(nd), *dbr = ot_alloc(nd), *dw = ot_alloc(d), *db = ot_alloc(d);
  ot_fill(dout, nd, -1.0f, 1.0f, rng), ot_fill(dinp, nd, -9.0f, 9.0f, rng); /* overwritten */
  ot_fill(dw, d, -1.0f, 1.0f, rng), ot_fill(db, d, -1.0f, 1.0f, rng);        /* accumulated */
  float *rdinp = ot_alloc(nd), *rdw = rand_copy(dw, d), *rdb = rand_copy(db, d);
  txl_cpu_layernorm_backward(rdinp, rdw, rdb, dout, rres, w, rmean, rrstd, n, d, d);
  float *rdbr = rand_copy(rdinp, nd);
  txl_cpu_dropout(rdbr, rows, cols, d, d, col0, drop);
  txl_cpu_layernorm_backward_dropout(dinp, dbr, dw, db, dout, rres, w, rmean, rrstd, rows, cols, d, d, col0, drop);
  snprintf(name, sizeof name, "layernorm_backward_dropout %dx%dx%d p=%g", rows, cols, d, (double)drop.p);
  same = !memcmp(dinp, rdinp, (size_t)nd * 4) && !memcmp(dbr, rdbr, (size_t)nd * 4) &&
         !memcmp(dw, rdw, (size_t)d * 4) && !memcmp(db, rdb, (size_t)d * 4);
  ot_check_true(name, same, "%s", same ? "" : "differ");
  free(x), free(y), free(w), free(b), free(res), free(out), free(mean), free(rstd), free(rres), free(rout);
  free(rmean), free(rrstd), free(alias), free(dout), free(dinp), free(dbr), free(dw), free(db), free(rdinp);
  free(rdw), free(rdb), free(rdbr);
}

/* Rows ld > feats apart: dropout, bias + ReLU + dropout and its backward read and write the first
 * feats features of each (row, column) only, with the same masks: the packed rows' bits, the gaps
 * untouched. Narrow rows (the dropout's lanes across rows) and wide ones. */
static void test_padded(int rows, int cols, int feats, int ld, OtRng *rng) {
  const int64_t n = (int64_t)rows * cols;
  const float fill = -3072.0f;
  const TxlDropout d = {0.3f, 9u, 4u, 6u, NULL};
  float *b = ot_alloc(feats), *p[3], *q[3]; /* a, ad, dx: packed q [n, feats], padded p [n, ld] */
  for (int f = 0; f < feats; f++) b[f] = (float)ot_uniform(rng) - 0.5f;
  for (int k = 0; k < 3; k++) {
    q[k] = ot_alloc(n * feats), p[k] = ot_alloc(n * ld);
    for (int64_t i = 0; i < n * feats; i++) q[k][i] = (float)ot_uniform(rng) - 0.5f;
    for (int64_t r = 0; r < n; r++)
      for (int j = 0; j < ld; j++) p[k][r * ld + j] = j < feats ? q[k][r * feats + j] : fill;
  }
  txl_cpu_dropout(q[2], rows, cols, feats, feats, 1, d);
  txl_cpu_dropout(p[2], rows, cols, feats, ld, 1, d);
  txl_cpu_bias_relu_dropout_forward(q[0], q[1], b, rows, cols, feats, feats, 1, d);
  txl_cpu_bias_relu_dropout_forward(p[0], p[1], b, rows, cols, feats, ld, 1, d);
  txl_cpu_relu_dropout_backward(q[2], q[0], rows, cols, feats, feats, 1, d);
  txl_cpu_relu_dropout_backward(p[2], p[0], rows, cols, feats, ld, 1, d);
  int same = 1, gaps = 1;
  for (int k = 0; k < 3; k++)
    for (int64_t r = 0; r < n; r++) {
      same &= memcmp(p[k] + r * ld, q[k] + r * feats, (size_t)feats * sizeof(float)) == 0;
      for (int j = feats; j < ld; j++) gaps &= p[k][r * ld + j] == fill;
    }
  char what[128];
  snprintf(what, sizeof what, "dropout / bias_relu_dropout / relu_dropout_backward, rows %d apart (%dx%dx%d)", ld,
           rows, cols, feats);
  ot_check_true(what, same && gaps, "same %d gaps %d", same, gaps);
  for (int k = 0; k < 3; k++) free(p[k]), free(q[k]);
  free(b);
}

int main(void) {
  OtRng rng = ot_rng(31);
  const TxlDropout off = {0.0f, 7, 3, 5, NULL}, on = {0.1f, 7, 3, 5, NULL}, heavy = {0.5f, 11, 40, 2, NULL};
  const int shapes[][3] = {{1, 1, 1}, {3, 2, 7}, {5, 3, 63}, {4, 3, 64}, {7, 2, 129}, {37, 4, 300}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    test_ffn(shapes[k][0], shapes[k][1], shapes[k][2], 2, off, &rng);
    test_ffn(shapes[k][0], shapes[k][1], shapes[k][2], 2, on, &rng);
    test_ffn(shapes[k][0], shapes[k][1], shapes[k][2], 0, heavy, &rng);
    test_ln(shapes[k][0], shapes[k][1], shapes[k][2], 1, on, &rng);
  }
  test_ln(9, 3, 410, 5, off, &rng);
  test_ln(200, 2, 5000, 0, heavy, &rng); /* the wide-row path of the layer-norm backward */
  test_padded(5, 3, 13, 16, &rng);   /* narrower than the dropout's lanes */
  test_padded(4, 3, 210, 216, &rng); /* wider: row by row */
  return ot_finish("fused");
}
