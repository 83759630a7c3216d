/* What the op tests add to tests/lib/test_util.h: central finite differences and the random
 * projection that turns an output into a scalar. */
#ifndef TXL_TESTS_OPS_OP_TEST_H
#define TXL_TESTS_OPS_OP_TEST_H

#include <stdint.h>

#include "tests/lib/test_util.h"

/* ---- finite differences ------------------------------------------------------------------- */
/* d/dx[k] of f by central differences with step eps, for every k < n: grad[k] = (f(x + eps e_k)
 * - f(x - eps e_k)) / (2 eps). f is evaluated in double; x is restored afterwards. */
typedef double (*OtLossFn)(void *ctx);
void ot_fd_grad(double *grad, double *x, int64_t n, double eps, OtLossFn f, void *ctx);

/* sum_i out[i] * w[i] in double: the random projection that turns an output into a scalar. */
double ot_dot(const double *out, const double *w, int64_t n);

#endif
