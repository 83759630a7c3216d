/* SGD with momentum, LAMB's moments and axpy: several steps, each checked against a double
 * re-implementation of the formulas in kernels/ops.def applied to the same float state before the
 * step; the float state then carries on, so the first SGD step (buf = g') and LAMB's bias
 * corrections of steps 1..T are all exercised. The bounds count the float roundings of each
 * formula (u = 2^-24 each, relative to the magnitude of the operand rounded), with 1% slack. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void test_sgd(int64_t n, int steps, float lr, float mom, float gs, OtRng *rng) {
  char name[128];
  float *p = ot_alloc(n), *g = ot_alloc(n), *b = ot_alloc(n);
  double *wp = ot_alloc_d(n), *wb = ot_alloc_d(n), *bp = ot_alloc_d(n), *bb = ot_alloc_d(n);
  ot_fill(p, n, -1.0f, 1.0f, rng);
  ot_fill(b, n, -5.0f, 5.0f, rng); /* garbage: the first step must not read it */
  const double u = OT_U;
  for (int t = 1; t <= steps; t++) {
    ot_fill(g, n, -2.0f, 2.0f, rng);
    for (int64_t i = 0; i < n; i++) {
      const double gi = (double)g[i] * gs;
      const double mb = t == 1 ? 0.0 : (double)mom * b[i];
      const double bi = mb + gi;
      wb[i] = bi, wp[i] = (double)p[i] - (double)lr * bi;
      /* buf: g' (one rounding), mom * buf (one), the sum (one): 3u of |mom buf| + |g'|;
       * p: lr * buf (one rounding of lr |buf|, plus lr times buf's error), p - (one of |p_new|) */
      bb[i] = 1.01 * 3 * u * (fabs(mb) + fabs(gi)) + 1e-30;
      bp[i] = 1.01 * ((double)lr * bb[i] + u * (double)lr * fabs(bi) + u * fabs(wp[i])) + 1e-30;
    }
    txl_cpu_sgd_update(p, g, b, n, lr, mom, gs, t == 1);
    snprintf(name, sizeof name, "sgd n=%lld mom=%g step %d buf", (long long)n, mom, t);
    ot_check_bound(name, b, wb, bb, n);
    snprintf(name, sizeof name, "sgd n=%lld mom=%g step %d p", (long long)n, mom, t);
    ot_check_bound(name, p, wp, bp, n);
  }
  free(p), free(g), free(b), free(wp), free(wb), free(bp), free(bb);
}

static void test_lamb(int64_t n, int steps, float b1, float b2, float eps, float wd, float gs, OtRng *rng) {
  char name[128];
  float *p = ot_alloc(n), *g = ot_alloc(n), *m = ot_alloc(n), *v = ot_alloc(n);
  double *wu = ot_alloc_d(n), *wm = ot_alloc_d(n), *wv = ot_alloc_d(n);
  double *bu = ot_alloc_d(n), *bm = ot_alloc_d(n), *bv = ot_alloc_d(n);
  ot_fill(p, n, -1.0f, 1.0f, rng);
  const double u = OT_U;
  for (int t = 1; t <= steps; t++) {
    ot_fill(g, n, -2.0f, 2.0f, rng);
    if (n > 3) g[n / 2] = 0.0f;
    if (t == 1 && n > 3) g[0] = 0.0f; /* element 0 stays at m = v = 0 for one step: u = wd p */
    const double bc1 = 1.0 - pow((double)b1, t), bc2 = 1.0 - pow((double)b2, t);
    for (int64_t i = 0; i < n; i++) {
      const double gi = (double)g[i] * gs;
      const double mi = (double)b1 * m[i] + (1.0 - (double)b1) * gi;
      const double vi = (double)b2 * v[i] + (1.0 - (double)b2) * gi * gi;
      const double den = sqrt(vi / bc2) + eps, A = mi / bc1 / den, d = (double)wd * p[i];
      wm[i] = mi, wv[i] = vi, wu[i] = A + d;
      /* m, v as Adam (tests/ops/test_adam.c): 4u and 5u.
       * den: v / bc2 (bc2 = fl(1 - b2^t) one rounding, the division one) on top of v's error,
       *      halved by sqrt, then sqrt and + eps: one rounding each;
       * A = (m / bc1) / den: m's error, bc1's rounding, two divisions;
       * u = A + wd p: wd p one rounding, the sum one. */
      bm[i] = 1.01 * 4 * u * (fabs((double)b1 * m[i]) + fabs((1.0 - (double)b1) * gi));
      bv[i] = 1.01 * 5 * u * ((double)b2 * v[i] + (1.0 - (double)b2) * gi * gi);
      const double dden = sqrt(vi / bc2) * (0.5 * ((vi > 0 ? bv[i] / vi : 0.0) + 2 * u) + u) + u * den;
      const double dA = bm[i] / bc1 / den + fabs(A) * (3 * u + dden / den);
      bu[i] = 1.01 * (dA + u * fabs(d) + u * (fabs(A) + fabs(d))) + 1e-30;
    }
    txl_cpu_lamb_moments(g, p, m, v, n, b1, b2, eps, wd, t, gs);
    snprintf(name, sizeof name, "lamb n=%lld wd=%g step %d m", (long long)n, wd, t);
    ot_check_bound(name, m, wm, bm, n);
    snprintf(name, sizeof name, "lamb n=%lld wd=%g step %d v", (long long)n, wd, t);
    ot_check_bound(name, v, wv, bv, n);
    snprintf(name, sizeof name, "lamb n=%lld wd=%g step %d direction", (long long)n, wd, t);
    ot_check_bound(name, g, wu, bu, n);
  }
  free(p), free(g), free(m), free(v), free(wu), free(wm), free(wv), free(bu), free(bm), free(bv);
}

static void test_axpy(int64_t n, float a, OtRng *rng) {
  char name[128];
  float *y = ot_alloc(n), *x = ot_alloc(n);
  double *w = ot_alloc_d(n), *b = ot_alloc_d(n);
  ot_fill(y, n, -1.0f, 1.0f, rng);
  ot_fill(x, n, -3.0f, 3.0f, rng);
  /* a x one rounding, the sum one */
  for (int64_t i = 0; i < n; i++) {
    w[i] = (double)y[i] + (double)a * x[i];
    b[i] = 1.01 * OT_U * (fabs((double)a * x[i]) + fabs(w[i])) + 1e-30;
  }
  txl_cpu_axpy(y, x, a, n);
  snprintf(name, sizeof name, "axpy n=%lld a=%g", (long long)n, a);
  ot_check_bound(name, y, w, b, n);
  free(y), free(x), free(w), free(b);
}

int main(void) {
  OtRng rng = ot_rng(11);
  printf("sgd, lamb, axpy\n");
  test_sgd(1, 3, 1e-2f, 0.9f, 1.0f, &rng);
  test_sgd(13, 5, 0.1f, 0.0f, 0.5f, &rng);
  test_sgd(100003, 4, 3e-2f, 0.9f, 0.25f, &rng); /* parallel path */
  test_lamb(1, 3, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f, &rng);
  test_lamb(13, 5, 0.8f, 0.98f, 1e-6f, 0.01f, 3.0f, &rng);
  test_lamb(100003, 3, 0.9f, 0.999f, 1e-8f, 0.1f, 0.25f, &rng); /* parallel path */
  test_axpy(7, -2.5e-3f, &rng);
  test_axpy(100003, 0.75f, &rng);
  return ot_finish("test_op_sgd_lamb");
}
