/* SGD with momentum and LAMB's element-wise parts, shared by the CPU and CUDA backends so both
 * do the same float operations (they may differ only where a compiler contracts a * b + c).
 *
 * SGD as torch.optim.SGD (dampening 0, no nesterov, no weight decay), on g' = g * grad_scale:
 *   buf = first ? g' : momentum * buf + g';   p -= lr * buf.
 * LAMB's direction (the LAMB paper / NVIDIA's FusedLAMB, with bias correction), on g':
 *   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
 *   u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p.
 * LAMB's step, per tensor: p += a u (axpy). The bias corrections are computed once per step in
 * double and used as float (as Adam's). */
#ifndef TXL_KERNELS_SGD_LAMB_H
#define TXL_KERNELS_SGD_LAMB_H

#include <math.h>

#include "src/base/philox.h" /* TXL_HD */

static inline TXL_HD void txl_sgd_element(float *p, float g, float *buf, float lr, float momentum,
                                          float grad_scale, int first) {
  const float gi = g * grad_scale;
  const float b = first ? gi : momentum * *buf + gi;
  *buf = b;
  *p -= lr * b;
}

/* LAMB's step of one element: y += a x (the axpy op's). */
static inline TXL_HD void txl_axpy_element(float *y, float x, float a) { *y += a * x; }

typedef struct {
  float bc1, bc2, b1, b2, c1, c2, eps, wd, grad_scale;
} TxlLambCoef;

/* The per-step constants of update number `step` (1-based). */
static inline TxlLambCoef txl_lamb_coef(float beta1, float beta2, float eps, float weight_decay,
                                        int step, float grad_scale) {
  TxlLambCoef c;
  c.bc1 = (float)(1.0 - pow((double)beta1, step));
  c.bc2 = (float)(1.0 - pow((double)beta2, step));
  c.b1 = beta1;
  c.b2 = beta2;
  c.c1 = 1.0f - beta1;
  c.c2 = 1.0f - beta2;
  c.eps = eps;
  c.wd = weight_decay;
  c.grad_scale = grad_scale;
  return c;
}

/* One element: g holds the gradient on entry and the direction u on return. */
static inline TXL_HD void txl_lamb_element(float *g, float p, float *m, float *v, TxlLambCoef c) {
  const float gi = *g * c.grad_scale;
  const float mi = c.b1 * *m + c.c1 * gi;
  const float vi = c.b2 * *v + c.c2 * (gi * gi);
  *m = mi;
  *v = vi;
  *g = (mi / c.bc1) / (sqrtf(vi / c.bc2) + c.eps) + c.wd * p;
}

#endif
