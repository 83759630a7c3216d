/* Adam as torch.optim.Adam (no weight decay, no amsgrad), on g' = g * grad_scale:
 *   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
 *   p -= step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps),  step_size = lr / (1 - b1^t).
 * The bias corrections are computed in double and used as float, as torch does with Python
 * floats. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

void txl_cpu_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                         float beta1, float beta2, float eps, int step, float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  const double bc1 = 1.0 - pow((double)beta1, step);
  const double bc2 = 1.0 - pow((double)beta2, step);
  const float step_size = (float)((double)lr / bc1);
  const float bc2_sqrt = (float)sqrt(bc2);
  const float b1 = beta1, b2 = beta2, c1 = 1.0f - beta1, c2 = 1.0f - beta2;
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i] * grad_scale;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
  }
}
