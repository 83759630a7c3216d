#include "src/optim/adam.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"

void txl_adam_create(TxlAdam *a, const TxlOps *ops, int64_t n, float beta1, float beta2, float eps,
                     float clip) {
  a->ops = ops;
  a->n = n;
  a->lo = 0;
  a->hi = n;
  a->part0 = a->part1 = a->n_parts = 0;
  a->parts = NULL;
  a->m = ops->alloc((size_t)n * sizeof(float), "Adam first moment");
  a->v = ops->alloc((size_t)n * sizeof(float), "Adam second moment");
  a->t = 0;
  a->beta1 = beta1;
  a->beta2 = beta2;
  a->eps = eps;
  a->clip = clip;
  a->kind = TXL_OPTIMIZER_ADAM;
  a->momentum = 0.0f;
  a->weight_decay = 0.0f;
  a->table = NULL;
  a->rec = ops->alloc(sizeof(TxlGradClip), "gradient clipping record");
  txl_optim_reset_clip(a);
  a->step_dev = ops->alloc(sizeof(TxlOptimStep), "optimizer step constants");
  memset(&a->step_host, 0, sizeof a->step_host);
  ops->upload_reserve(sizeof(TxlOptimStep)); /* txl_optim_prepare's upload */
}

void txl_optim_clip(TxlAdam *a, const float *grad, const TxlParamTable *t, double loss_scale) {
  if (t->n_runs > INT32_MAX) txl_fatal("internal: %lld runs of gradients", (long long)t->n_runs);
  a->ops->grad_clip(a->rec, grad, (int)t->n_runs, t->runs, a->clip, loss_scale);
}

void txl_optim_read_clip(const TxlAdam *a, TxlGradClip *out) { a->ops->to_host(out, a->rec, sizeof *out); }

void txl_optim_reset_clip(TxlAdam *a) { a->ops->zero(a->rec, sizeof(TxlGradClip)); }

void txl_optim_set_kind(TxlAdam *a, TxlOptimKind kind, float momentum, float weight_decay, const TxlParamTable *table) {
  if (kind != TXL_OPTIMIZER_ADAM && kind != TXL_OPTIMIZER_LAMB && kind != TXL_OPTIMIZER_SGD)
    txl_fatal("internal error: optimizer kind %d", kind);
  a->kind = kind;
  a->momentum = momentum;
  a->weight_decay = weight_decay;
  a->table = table;
}

void txl_optim_shard(TxlAdam *a, const TxlShardPlan *plan, int rank) {
  if (a->kind == TXL_OPTIMIZER_LAMB) txl_fatal("internal: LAMB sharded (its trust ratios need whole tensors)");
  if (a->t != 0 || a->parts) txl_fatal("internal: an optimizer sharded after its first step");
  if (plan->lo[plan->world] != a->n) txl_fatal("internal: a shard plan of %lld floats for %lld", (long long)plan->lo[plan->world], (long long)a->n);
  a->lo = plan->lo[rank];
  a->hi = plan->lo[rank + 1];
  a->part0 = plan->part[rank];
  a->part1 = plan->part[rank + 1];
  a->n_parts = plan->n_parts;
  a->ops->free(a->m);
  a->ops->free(a->v);
  const size_t bytes = (size_t)(a->hi - a->lo) * sizeof(float);
  a->m = a->ops->alloc(bytes, "Adam first moment (this rank's slice)");
  a->v = a->ops->alloc(bytes, "Adam second moment (this rank's slice)");
  a->parts = a->ops->alloc((size_t)a->n_parts * sizeof(double), "the gradient norm's parts");
}

void txl_optim_clip_parts(TxlAdam *a, const float *grad, const TxlParamTable *t) {
  a->ops->sumsq_parts(a->parts, grad, (int)t->n_runs, t->runs, a->part0, a->part1);
}

void txl_optim_clip_record(TxlAdam *a, double loss_scale) {
  a->ops->grad_clip_parts(a->rec, a->parts, a->n_parts, a->clip, loss_scale);
}

void txl_adam_destroy(TxlAdam *a) {
  if (a->parts) a->ops->free(a->parts);
  a->parts = NULL;
  a->ops->free(a->m);
  a->ops->free(a->v);
  a->ops->free(a->rec);
  a->ops->free(a->step_dev);
  a->m = a->v = 0;
  a->rec = NULL;
  a->step_dev = NULL;
}

/* The sum over the tensors' runs (params.h), the packed view's order: on the CPU the bits of
 * the packed layout whatever the row padding. */
double txl_grad_norm(const TxlOps *ops, const float *grad, const TxlParamTable *t) {
  if (t->n_runs > INT32_MAX) txl_fatal("internal: %lld runs of gradients", (long long)t->n_runs);
  return sqrt(ops->sumsq_segments(grad, (int)t->n_runs, t->runs));
}

/* The unfused ops, with the factor coef given on the host (the caller refreshes params_act and
 * zeroes grad). */
void txl_adam_step(TxlAdam *a, float *params, float *grad, double norm, double loss_scale, float lr) {
  if (txl_optim_sharded(a)) txl_fatal("internal: the unfused update of a sharded optimizer");
  const float coef = txl_grad_coef(a->clip, norm, loss_scale); /* kernels/common/clip.h */
  a->t++;
  switch (a->kind) {
  case TXL_OPTIMIZER_LAMB: txl_lamb_update(a, params, NULL, grad, coef, lr); break;
  case TXL_OPTIMIZER_SGD: a->ops->sgd_update(params, grad, a->m, a->n, lr, a->momentum, coef, a->t == 1); break;
  default: a->ops->adam_update(params, grad, a->m, a->v, a->n, lr, a->beta1, a->beta2, a->eps, a->t, coef); break;
  }
}

void txl_optim_prepare(TxlAdam *a, float lr) {
  a->t++;
  TxlOptimStep *s = &a->step_host;
  memset(s, 0, sizeof *s);
  s->adam = txl_adam_coef(lr, a->beta1, a->beta2, a->eps, a->t, 0.0f); /* grad_scale: the record's */
  s->lr = lr;
  s->momentum = a->momentum;
  s->first = a->t == 1;
  a->ops->upload(a->step_dev, s, sizeof *s); /* no host synchronisation (ops.def) */
}

/* The fused passes, with the constants of a->step_dev and the factor of a->rec, both read on the
 * device by Adam and SGD. */
void txl_optim_apply(TxlAdam *a, float *params, void *params_act, float *grad) {
  /* the slice [lo, hi) (all of it unless sharded): the moments are its own */
  const int64_t n = a->hi - a->lo;
  params += a->lo;
  grad += a->lo;
  params_act = (char *)params_act + (size_t)a->lo * txl_dtype_size(a->ops->act);
  switch (a->kind) {
  case TXL_OPTIMIZER_LAMB: {
    TxlGradClip r;
    txl_optim_read_clip(a, &r); /* LAMB's trust ratios are taken on the host anyway */
    if (!isnan(r.coef)) txl_lamb_update(a, params, params_act, grad, r.coef, a->step_host.lr);
    break;
  }
  case TXL_OPTIMIZER_SGD: a->ops->sgd_fused(params, params_act, grad, a->m, n, a->step_dev, &a->rec->coef); break;
  default: a->ops->adam_fused(params, params_act, grad, a->m, a->v, n, a->step_dev, &a->rec->coef); break;
  }
}

void txl_adam_step_fused(TxlAdam *a, float *params, void *params_act, float *grad, float lr) {
  txl_optim_prepare(a, lr);
  txl_optim_apply(a, params, params_act, grad);
}
