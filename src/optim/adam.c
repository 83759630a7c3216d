#include "src/optim/adam.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "src/base/error.h"
#include "src/config/config.h"

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
  a->kind = TXL_OPTIM_ADAM;
  a->momentum = 0.0f;
  a->weight_decay = 0.0f;
  a->table = NULL;
}

void txl_optim_set_kind(TxlAdam *a, int kind, float momentum, float weight_decay, const TxlParamTable *table) {
  if (kind != TXL_OPTIM_ADAM && kind != TXL_OPTIM_LAMB && kind != TXL_OPTIM_SGD)
    txl_fatal("internal error: optimizer kind %d", kind);
  a->kind = kind;
  a->momentum = momentum;
  a->weight_decay = weight_decay;
  a->table = table;
}

void txl_adam_destroy(TxlAdam *a) {
  a->ops->free(a->m);
  a->ops->free(a->v);
  a->m = a->v = 0;
}

/* The sum over the tensors' runs (params.h), the packed view's order: on the CPU the bits of
 * the packed layout whatever the row padding. */
double txl_grad_norm(const TxlOps *ops, const float *grad, const TxlParamTable *t) {
  if (t->n_runs > INT32_MAX) txl_fatal("internal: %lld runs of gradients", (long long)t->n_runs);
  return sqrt(ops->sumsq_segments(grad, (int)t->n_runs, t->runs));
}

/* The factor the optimizer takes the gradient times: clipping (torch's clip_grad_norm_) and the
 * loss scale's inverse. */
static float grad_coef(const TxlAdam *a, double norm, double loss_scale) {
  float coef = 1.0f;
  if (a->clip > 0.0f) {
    float c = (float)((double)a->clip / (norm + 1e-6));
    if (c < 1.0f) coef = c;
  }
  return coef * (float)(1.0 / loss_scale); /* 2^-k: exact (1 without scaling: the same bits) */
}

/* Both steps: the unfused ops when fused is 0 (the caller refreshes params_act and zeroes grad),
 * else the fused passes. */
static void step(TxlAdam *a, float *params, void *params_act, float *grad, double norm, double loss_scale, float lr,
                 int fused) {
  const float coef = grad_coef(a, norm, loss_scale);
  a->t++;
  switch (a->kind) {
  case TXL_OPTIM_LAMB: txl_lamb_update(a, params, fused ? params_act : NULL, grad, coef, lr); break;
  case TXL_OPTIM_SGD:
    if (fused) a->ops->sgd_fused(params, params_act, grad, a->m, a->n, lr, a->momentum, coef, a->t == 1);
    else a->ops->sgd_update(params, grad, a->m, a->n, lr, a->momentum, coef, a->t == 1);
    break;
  default:
    if (fused)
      a->ops->adam_fused(params, params_act, grad, a->m, a->v, a->n, lr, a->beta1, a->beta2, a->eps, a->t, coef);
    else a->ops->adam_update(params, grad, a->m, a->v, a->n, lr, a->beta1, a->beta2, a->eps, a->t, coef);
    break;
  }
}

void txl_adam_step(TxlAdam *a, float *params, float *grad, double norm, double loss_scale, float lr) {
  step(a, params, NULL, grad, norm, loss_scale, lr, 0);
}

void txl_adam_step_fused(TxlAdam *a, float *params, void *params_act, float *grad, double norm, double loss_scale,
                         float lr) {
  step(a, params, params_act, grad, norm, loss_scale, lr, 1);
}
