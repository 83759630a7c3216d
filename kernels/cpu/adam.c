/* Adam (the math is kernels/common/adam.h, shared with the CUDA backend). */
#include "kernels/common/adam.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

void txl_cpu_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                         float beta1, float beta2, float eps, int step, float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  const TxlAdamCoef c = txl_adam_coef(lr, beta1, beta2, eps, step, grad_scale);
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) txl_adam_element(&p[i], g[i], &m[i], &v[i], c);
}
