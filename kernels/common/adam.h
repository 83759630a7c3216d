/* Adam as torch.optim.Adam (no weight decay, no amsgrad), on g' = g * grad_scale:
 *   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
 *   p -= step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps),  step_size = lr / (1 - b1^t).
 * The bias corrections are computed once per step in double and used as float, as torch does
 * with Python floats. Shared by the CPU and CUDA backends, so both round identically. */
#ifndef TXL_KERNELS_ADAM_H
#define TXL_KERNELS_ADAM_H

#include <math.h>
#include <stdint.h>

#include "src/base/philox.h" /* TXL_HD */

typedef struct {
  float step_size, bc2_sqrt, b1, b2, c1, c2, eps, grad_scale;
} TxlAdamCoef;

/* The per-step constants of update number `step` (1-based). */
static inline TxlAdamCoef txl_adam_coef(float lr, float beta1, float beta2, float eps, int step,
                                        float grad_scale) {
  TxlAdamCoef c;
  c.step_size = (float)((double)lr / (1.0 - pow((double)beta1, step)));
  c.bc2_sqrt = (float)sqrt(1.0 - pow((double)beta2, step));
  c.b1 = beta1;
  c.b2 = beta2;
  c.c1 = 1.0f - beta1;
  c.c2 = 1.0f - beta2;
  c.eps = eps;
  c.grad_scale = grad_scale;
  return c;
}

/* One update's constants where the fused passes read them (TxlAdam.step_dev: the backend's
 * memory, uploaded by the host before the pass, so that a captured CUDA graph replays each update
 * with its own): Adam's coefficients (their grad_scale unused: the clipping record's factor is
 * taken, kernels/common/clip.h), SGD's rate, momentum and whether it is the first update. */
typedef struct {
  TxlAdamCoef adam;
  float lr, momentum;
  int32_t first, pad;
} TxlOptimStep;

/* One element's update. */
static inline TXL_HD void txl_adam_element(float *p, float g, float *m, float *v, TxlAdamCoef c) {
  const float gi = g * c.grad_scale;
  const float mi = c.b1 * *m + c.c1 * gi;
  const float vi = c.b2 * *v + c.c2 * (gi * gi);
  *m = mi;
  *v = vi;
  *p -= c.step_size * (mi / (sqrtf(vi) / c.bc2_sqrt + c.eps));
}

#endif
