/* Adam: several steps, each checked against a double re-implementation of the formula in
 * kernels/ops.h applied to the same float state (p, m, v before the step); the float state then
 * carries on to the next step, so the bias corrections of steps 1..T are all exercised. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void test_adam(int64_t n, int steps, float lr, float b1, float b2, float eps, float gs,
                      OtRng *rng) {
  char name[128];
  float *p = ot_alloc(n), *g = ot_alloc(n), *m = ot_alloc(n), *v = ot_alloc(n);
  double *wp = ot_alloc_d(n), *wm = ot_alloc_d(n), *wv = ot_alloc_d(n);
  double *bp = ot_alloc_d(n), *bm = ot_alloc_d(n), *bv = ot_alloc_d(n);
  ot_fill(p, n, -1.0f, 1.0f, rng);
  const double u = OT_U;
  for (int t = 1; t <= steps; t++) {
    ot_fill(g, n, -2.0f, 2.0f, rng);
    if (n > 3) g[n / 2] = 0.0f;
    if (t == 1 && n > 3) g[0] = 0.0f; /* element 0 stays at m = v = 0 for one step */
    const double bc1 = 1.0 - pow((double)b1, t), bc2 = 1.0 - pow((double)b2, t);
    const double s = lr / bc1, c2s = sqrt(bc2);
    for (int64_t i = 0; i < n; i++) {
      const double gi = (double)g[i] * gs;
      const double mi = (double)b1 * m[i] + (1.0 - (double)b1) * gi;
      const double vi = (double)b2 * v[i] + (1.0 - (double)b2) * gi * gi;
      const double den = sqrt(vi) / c2s + eps;
      const double upd = s * mi / den;
      wm[i] = mi, wv[i] = vi, wp[i] = (double)p[i] - upd;
      /* One step in fp32 from the same state (u = 2^-24):
       *   g' = g gs: u;  m: two products and a sum (3u) on top of g''s error (4u overall);
       *   v: g'^2 (3u with g''s error doubled) then as m: 5u;
       *   den = sqrt(v) / c2s + eps: sqrt halves v's relative error, then 4 roundings
       *         (sqrt, c2s = fl(sqrt(bc2)), the division, + eps);
       *   update = s m / den: s = fl(lr / bc1) one rounding, then 2 more;
       *   p -= update: one more, u |p|.                                                    */
      bm[i] = 1.01 * 4 * u * (fabs((double)b1 * m[i]) + fabs((1.0 - (double)b1) * gi));
      bv[i] = 1.01 * 5 * u * ((double)b2 * v[i] + (1.0 - (double)b2) * gi * gi);
      const double dden = (vi > 0 ? bv[i] / (2.0 * sqrt(vi)) / c2s : 0.0) + 4 * u * sqrt(vi) / c2s;
      const double dupd = s * bm[i] / den + fabs(upd) * (dden / den + 3 * u);
      bp[i] = 1.01 * (dupd + u * fabs(wp[i])) + 1e-30;
    }
    txl_cpu_adam_update(p, g, m, v, n, lr, b1, b2, eps, t, gs);
    snprintf(name, sizeof name, "adam n=%lld step %d m", (long long)n, t);
    ot_check_bound(name, m, wm, bm, n);
    snprintf(name, sizeof name, "adam n=%lld step %d v", (long long)n, t);
    ot_check_bound(name, v, wv, bv, n);
    snprintf(name, sizeof name, "adam n=%lld step %d p", (long long)n, t);
    ot_check_bound(name, p, wp, bp, n);
  }
  free(p), free(g), free(m), free(v), free(wp), free(wm), free(wv), free(bp), free(bm), free(bv);
}

int main(void) {
  OtRng rng = ot_rng(7);
  printf("adam\n");
  test_adam(1, 3, 1e-3f, 0.9f, 0.999f, 1e-8f, 1.0f, &rng);
  test_adam(7, 6, 2.5e-4f, 0.9f, 0.999f, 1e-8f, 0.5f, &rng);
  test_adam(13, 4, 1e-2f, 0.8f, 0.98f, 1e-6f, 3.0f, &rng);
  test_adam(100003, 3, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.25f, &rng); /* parallel path */
  return ot_finish("test_op_adam");
}
