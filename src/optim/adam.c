#include "src/optim/adam.h"

#include <math.h>

void txl_adam_create(TxlAdam *a, const TxlOps *ops, int64_t n, float beta1, float beta2, float eps,
                     float clip) {
  a->ops = ops;
  a->n = n;
  a->m = ops->alloc((size_t)n * sizeof(float), "Adam first moment");
  a->v = ops->alloc((size_t)n * sizeof(float), "Adam second moment");
  a->t = 0;
  a->beta1 = beta1;
  a->beta2 = beta2;
  a->eps = eps;
  a->clip = clip;
}

void txl_adam_destroy(TxlAdam *a) {
  a->ops->free(a->m);
  a->ops->free(a->v);
  a->m = a->v = 0;
}

double txl_grad_norm(const TxlOps *ops, const float *grad, int64_t n) { return sqrt(ops->sumsq(grad, n)); }

void txl_adam_step(TxlAdam *a, float *params, const float *grad, double norm, float lr) {
  float coef = 1.0f;
  if (a->clip > 0.0f) {
    float c = (float)((double)a->clip / (norm + 1e-6));
    if (c < 1.0f) coef = c;
  }
  a->t++;
  a->ops->adam_update(params, grad, a->m, a->v, a->n, lr, a->beta1, a->beta2, a->eps, a->t, coef);
}
