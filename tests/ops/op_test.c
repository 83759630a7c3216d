/* What the op tests add to tests/lib/test_util.c (see op_test.h). */
#include "tests/ops/op_test.h"

void ot_fd_grad(double *grad, double *x, int64_t n, double eps, OtLossFn f, void *ctx) {
  for (int64_t k = 0; k < n; k++) {
    const double x0 = x[k];
    x[k] = x0 + eps;
    const double fp = f(ctx);
    x[k] = x0 - eps;
    const double fm = f(ctx);
    x[k] = x0;
    grad[k] = (fp - fm) / (2.0 * eps);
  }
}

double ot_dot(const double *out, const double *w, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += out[i] * w[i];
  return s;
}
