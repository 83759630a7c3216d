/* Cross-entropy: loss against a double reference (max-shifted logsumexp), the gradient
 * (softmax - onehot) * grad_scale against central finite differences of the double loss,
 * grad_scale = 0 leaving the logits alone, large logits (~80 and ~1000: the shift), a row whose
 * target is the max; and the vectorised expf it uses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "tests/ops/op_test.h"

/* loss of one row in double, max-shifted */
static double row_loss(const double *x, int V, int target) {
  double m = x[0];
  for (int j = 1; j < V; j++) m = x[j] > m ? x[j] : m;
  double s = 0.0;
  for (int j = 0; j < V; j++) s += exp(x[j] - m);
  return log(s) + m - x[target];
}

static void test_xent(int64_t n, int V, float lo, float hi, float grad_scale, OtRng *rng) {
  char name[128];
  const int64_t N = n * V;
  float *x = ot_alloc(N), *g = ot_alloc(N), *loss = ot_alloc(n), *loss0 = ot_alloc(n);
  int32_t *tgt = malloc((size_t)n * sizeof *tgt);
  ot_fill(x, N, lo, hi, rng);
  for (int64_t t = 0; t < n; t++) tgt[t] = ot_randint(rng, V);
  tgt[0] = V - 1;
  if (n > 1) { /* row 1: the target is the max, by a margin */
    int am = 0;
    for (int j = 1; j < V; j++) am = x[V + j] > x[V + am] ? j : am;
    tgt[1] = am;
    x[V + am] += 3.0f;
  }
  double *xd = ot_alloc_d(N), *want = ot_alloc_d(n), *gw = ot_alloc_d(N);
  double *bl = ot_alloc_d(n), *bg = ot_alloc_d(N);
  ot_to_double(xd, x, N);
  const double eps = 1e-6;
  for (int64_t t = 0; t < n; t++) {
    double *xr = xd + t * V;
    want[t] = row_loss(xr, V, tgt[t]);
    double m = xr[0];
    for (int j = 1; j < V; j++) m = xr[j] > m ? xr[j] : m;
    double s = 0.0;
    for (int j = 0; j < V; j++) s += exp(xr[j] - m);
    /* Loss bound: e_j = expf(fl(x_j - m)) is within (|x_j - m| + 1.5) u of exp(x_j - m)
     * (relative: the rounded difference, then txl_expf's measured 1.43 u over every float);
     * the kernel sums them in float over blocks of 256 (any order: gamma_256, all terms
     * positive, so relative to the sum) and the block sums in double; log adds ~nothing; the
     * loss is rounded to float once:
     *   es = sum_j p_j (|x_j - m| + 2) u + (min(V, 256) + 1) u;  |err| <= es + u |loss|.    */
    double es = ((V < 256 ? V : 256) + 1) * OT_U;
    for (int j = 0; j < V; j++) es += exp(xr[j] - m) / s * (fabs(xr[j] - m) + 2.0) * OT_U;
    bl[t] = 1.01 * (es + OT_U * fabs(want[t])) + 1e-12;
    /* Gradient: loss_t depends on row t only, so differentiate row by row:
     * d(grad_scale * loss_t) / dx[t, j] by central differences of the double loss. */
    for (int j = 0; j < V; j++) {
      const double x0 = xr[j];
      xr[j] = x0 + eps;
      const double fp = row_loss(xr, V, tgt[t]);
      xr[j] = x0 - eps;
      const double fm = row_loss(xr, V, tgt[t]);
      xr[j] = x0;
      gw[t * V + j] = grad_scale * (fp - fm) / (2.0 * eps);
      /* p_j = e_j * fl(gs / sum): e_j's error above, sum es, 2 roundings; minus onehot: 1 more.
       * FD: ~100 double roundings of the loss (|loss| + |m|) over 2 eps, truncation ~eps^2. */
      const double p = exp(xr[j] - m) / s;
      bg[t * V + j] = 1.01 * fabs(grad_scale) *
                          (p * ((fabs(xr[j] - m) + 4.0) * OT_U + es) + OT_U * fabs(p - (j == tgt[t]))) +
                      fabs(grad_scale) * (100.0 * ldexp(1.0, -53) * (fabs(want[t]) + fabs(m)) / eps + 1e-10);
    }
  }
  memcpy(g, x, (size_t)N * sizeof(float));
  txl_cpu_xent_forward_backward(g, loss, tgt, grad_scale, n, V, V);
  snprintf(name, sizeof name, "xent loss n=%lld V=%d logits [%g,%g)", (long long)n, V, (double)lo, (double)hi);
  ot_check_bound(name, loss, want, bl, n);
  snprintf(name, sizeof name, "xent dlogits (grad_scale %g) vs FD", (double)grad_scale);
  ot_check_bound(name, g, gw, bg, N);

  /* grad_scale = 0: the same losses, the logits untouched */
  memcpy(g, x, (size_t)N * sizeof(float));
  txl_cpu_xent_forward_backward(g, loss0, tgt, 0.0f, n, V, V);
  ot_check_same("xent grad_scale=0 leaves logits", g, x, (size_t)N * sizeof(float));
  ot_check_same("xent grad_scale=0 same loss", loss0, loss, (size_t)n * sizeof(float));
  free(x), free(g), free(loss), free(loss0), free(tgt), free(xd), free(want), free(gw), free(bl), free(bg);
}

/* txl_expf on 2^20 points of [-87.3, 0] (where xent uses it) and [0, 88]: within 2 u relative
 * (an exhaustive run over every float of [-87.3, 88] measured 1.43 u). */
static void test_expf(OtRng *rng) {
  double worst = 0.0;
  for (int i = 0; i < (1 << 20); i++) {
    const float x = (float)(-87.3 + 175.3 * ot_uniform(rng));
    const double e = exp((double)x);
    const double rel = fabs(txl_expf(x) - e) / e;
    if (!(rel <= worst)) worst = rel;
  }
  ot_check_true("txl_expf relative error", worst <= 2.0 * OT_U, "max %.3e = %.2f u", worst, worst / OT_U);
  ot_check_true("txl_expf special values",
                txl_expf(0.0f) == 1.0f && txl_expf(-INFINITY) == 0.0f && txl_expf(-100.0f) == 0.0f &&
                    isnan(txl_expf(NAN)),
                "exp(0)=%g exp(-inf)=%g exp(-100)=%g exp(nan)=%g", (double)txl_expf(0.0f),
                (double)txl_expf(-INFINITY), (double)txl_expf(-100.0f), (double)txl_expf(NAN));
}

/* Logits whose rows lie ld > V apart: the packed rows' losses and gradients bit for bit, the gaps
 * (NaN) neither read nor written. */
static void test_padded(int64_t n, int V, int ld, OtRng *rng) {
  float *q = ot_alloc(n * V), *p = ot_alloc(n * ld), *lq = ot_alloc(n), *lp = ot_alloc(n);
  int32_t *tgt = malloc((size_t)n * sizeof(int32_t));
  for (int64_t i = 0; i < n * V; i++) q[i] = 6.0f * (float)ot_uniform(rng) - 3.0f;
  for (int64_t t = 0; t < n; t++) {
    tgt[t] = (int32_t)(ot_uniform(rng) * V) % V;
    for (int j = 0; j < ld; j++) p[t * ld + j] = j < V ? q[t * V + j] : NAN;
  }
  txl_cpu_xent_forward_backward(q, lq, tgt, 0.5f, n, V, V);
  txl_cpu_xent_forward_backward(p, lp, tgt, 0.5f, n, V, ld);
  int same = memcmp(lq, lp, (size_t)n * sizeof(float)) == 0, gaps = 1;
  for (int64_t t = 0; t < n; t++) {
    same &= memcmp(p + t * ld, q + t * V, (size_t)V * sizeof(float)) == 0;
    for (int j = V; j < ld; j++) gaps &= isnan(p[t * ld + j]);
  }
  char name[96];
  snprintf(name, sizeof name, "xent rows %d apart (V=%d): the packed bits, gaps untouched", ld, V);
  ot_check_true(name, same && gaps, "same %d gaps %d", same, gaps);
  free(q), free(p), free(lq), free(lp), free(tgt);
}

/* Rows of target -1 (adaptive_group's padding): loss 0 and a gradient row of zeros (with
 * grad_scale), the logits left as they were (without); the other rows bit for bit as without them. */
static void test_padding_rows(int64_t n, int V, float grad_scale, OtRng *rng) {
  float *x = ot_alloc(n * V), *loss = ot_alloc(n), *y = ot_alloc(n * V), *ly = ot_alloc(n), *x0 = ot_alloc(n * V);
  int32_t *tgt = malloc((size_t)n * sizeof *tgt), *ty = malloc((size_t)n * sizeof *ty);
  ot_fill(x, n * V, -3.0f, 3.0f, rng);
  memcpy(x0, x, (size_t)(n * V) * sizeof(float));
  int64_t m = 0;
  for (int64_t t = 0; t < n; t++) {
    tgt[t] = t % 4 == 2 ? -1 : ot_randint(rng, V);
    loss[t] = 9.0f;
    if (tgt[t] < 0) continue;
    ty[m] = tgt[t];
    memcpy(y + m * V, x + t * V, (size_t)V * sizeof(float));
    m++;
  }
  txl_cpu_xent_forward_backward(x, loss, tgt, grad_scale, n, V, V);
  txl_cpu_xent_forward_backward(y, ly, ty, grad_scale, m, V, V);
  int pad_ok = 1, same = 1;
  for (int64_t t = 0, k = 0; t < n; t++) {
    if (tgt[t] < 0) {
      pad_ok &= loss[t] == 0.0f;
      for (int j = 0; j < V; j++) pad_ok &= grad_scale != 0.0f ? x[t * V + j] == 0.0f : x[t * V + j] == x0[t * V + j];
    } else {
      same &= loss[t] == ly[k] && memcmp(x + t * V, y + k * V, (size_t)V * sizeof(float)) == 0;
      k++;
    }
  }
  char name[96];
  snprintf(name, sizeof name, "xent targets -1 (n=%lld V=%d grad_scale=%g)", (long long)n, V, (double)grad_scale);
  ot_check_true(name, pad_ok && same, "padding rows %s, the others %s", pad_ok ? "0" : "WRONG",
                same ? "the same bits" : "DIFFER");
  free(x), free(loss), free(y), free(ly), free(x0), free(tgt), free(ty);
}

int main(void) {
  OtRng rng = ot_rng(6);
  printf("xent\n");
  test_xent(1, 13, -3.0f, 3.0f, 1.0f, &rng);
  test_xent(7, 13, -3.0f, 3.0f, 0.125f, &rng);
  test_xent(5, 2, -1.0f, 1.0f, -0.5f, &rng);
  test_xent(9, 29, 70.0f, 80.0f, 1.0f / 9.0f, &rng); /* large logits: exp(80) in float needs the shift to sum */
  test_xent(4, 17, 990.0f, 1000.0f, 0.25f, &rng);    /* exp(1000) overflows anything */
  test_xent(67, 301, -8.0f, 8.0f, 1.0f / 67.0f, &rng); /* parallel path */
  test_padded(67, 301, 304, &rng);
  test_padding_rows(9, 29, 0.25f, &rng);
  test_padding_rows(67, 301, 1.0f / 67.0f, &rng); /* parallel path */
  test_padding_rows(9, 29, 0.0f, &rng);           /* loss only */
  printf("txl_expf\n");
  test_expf(&rng);
  return ot_finish("test_op_xent");
}
