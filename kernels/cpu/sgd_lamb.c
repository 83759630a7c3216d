/* SGD with momentum, LAMB's moments and axpy (the math is kernels/common/sgd_lamb.h, shared with
 * the CUDA backend). Element-wise: each element's result is independent of the threads. */
#include "kernels/common/sgd_lamb.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

void txl_cpu_sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                        float grad_scale, int first) {
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) txl_sgd_element(&p[i], g[i], &buf[i], lr, momentum, grad_scale, first);
}

void txl_cpu_lamb_moments(float *g, const float *p, float *m, float *v, int64_t n, float beta1,
                          float beta2, float eps, float weight_decay, int step, float grad_scale) {
  if (step < 1) txl_fatal("lamb_moments: step %d must be >= 1 (1-based)", step);
  const TxlLambCoef c = txl_lamb_coef(beta1, beta2, eps, weight_decay, step, grad_scale);
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) txl_lamb_element(&g[i], p[i], &m[i], &v[i], c);
}

void txl_cpu_axpy(float *y, const float *x, float a, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
