#include "src/train/step.h"

#include <string.h>

#include "dist/dist.h"
#include "kernels/profile.h"

static void on_ready(void *ctx, int64_t begin, int64_t end) { txl_reducer_ready((TxlReducer *)ctx, begin, end); }

/* The columns [first, first + B) of x [L, cols] into out [L, B]. */
static const int32_t *group_columns(int32_t *out, const int32_t *x, int L, int cols, int first, int B) {
  for (int i = 0; i < L; i++) memcpy(out + (size_t)i * B, x + (size_t)i * cols + first, (size_t)B * sizeof(int32_t));
  return out;
}

/* Group g's tokens and targets [L, B_g] from the rank's [L, cols] (host): the inputs themselves
 * with one group, else copies into r->group_host. */
static void group_inputs(TxlRun *r, const int32_t *inputs, const int32_t *targets, int L, const int32_t **in,
                         const int32_t **tg) {
  *in = inputs;
  *tg = targets;
  if (r->n_groups == 1) return;
  const int first = r->col0 - r->col_first;
  int32_t *buf = r->group_host;
  *in = group_columns(buf, inputs, L, r->cols, first, r->B);
  *tg = group_columns(buf + (size_t)L * r->B, targets, L, r->cols, first, r->B);
}

void txl_train_upload(TxlModel *m, TxlRun *r, const int32_t *inputs, const int32_t *targets, int L, int step) {
  const int current = r->group;
  for (int g = 0; g < r->n_groups; g++) {
    txl_run_use_group(m, r, g);
    const int32_t *in, *tg;
    group_inputs(r, inputs, targets, L, &in, &tg);
    txl_run_upload(m, r, in, tg, L, step); /* copied into the upload staging at once: group_host is free again */
  }
  txl_run_use_group(m, r, current);
}

double txl_train_grad(TxlModel *m, TxlRun *r, int step, int batch_global, TxlReducer *reducer,
                      TxlEmbedGather *gather, const int32_t *inputs, const int32_t *targets, int L, double loss_scale) {
  const double global_tokens = (double)L * batch_global;
  /* the gradients accumulate from zero: the last update's fused pass left them so (model.h),
   * otherwise (the first step, or after a step the loss scaler skipped) one zeroing pass */
  if (!m->grad_zero) m->ops->zero(m->grad_buf, (size_t)m->table.total * sizeof(float));
  m->grad_zero = 0;
  /* the column groups one after the other (train.batch_chunk): each adds its gradient, the mean
   * loss's share of its tokens, to grad_buf; the all-reduce starts in the last group's backward,
   * when each part of the gradient is final */
  const int M = r->mem_rows; /* every group's memory holds as many rows */
  double loss_sum = 0.0;
  TxlEmbedRows rows = {0};
  for (int g = 0; g < r->n_groups; g++) {
    txl_run_use_group(m, r, g);
    r->mem_rows = M;
    const int32_t *in, *tg;
    group_inputs(r, inputs, targets, L, &in, &tg);
    loss_sum += txl_model_forward(m, r, in, tg, L, step, 1, (float)(loss_scale / global_tokens));
    const int last = g == r->n_groups - 1;
    txl_model_backward_rows(m, r, reducer && last ? on_ready : NULL, reducer, gather && last ? &rows : NULL);
  }
  if (reducer) {
    m->ops->mark(TXL_REGION_ALLREDUCE); /* the device profile's: the wait that follows is the all-reduce's */
    txl_reducer_finish(reducer);
    m->ops->mark(TXL_REGION_OPS);
    if (gather) txl_embed_gather_add(gather, m, &rows, L); /* the input embedding's rows of every rank */
    if (!r->loss_out) txl_dist_allreduce_sum_f64(&loss_sum, 1);
  }
  return r->loss_out ? 0.0 : loss_sum / global_tokens;
}

void txl_train_clip(TxlModel *m, TxlAdam *adam, TxlReducer *reducer, double loss_scale) {
  if (!txl_optim_sharded(adam)) {
    txl_optim_clip(adam, m->grad_buf, &m->table, loss_scale);
    return;
  }
  txl_optim_clip_parts(adam, m->grad_buf, &m->table); /* the parts of this rank's slice, 0 elsewhere */
  m->ops->mark(TXL_REGION_ALLREDUCE);
  txl_reducer_sum_f64(reducer, adam->parts, adam->n_parts); /* exact: one rank's value and zeros */
  m->ops->mark(TXL_REGION_OPS);
  txl_optim_clip_record(adam, loss_scale);
}

void txl_train_apply(TxlModel *m, TxlAdam *adam, TxlReducer *reducer) {
  txl_optim_apply(adam, m->param_buf, m->param_act, m->grad_buf);
  if (!txl_optim_sharded(adam)) return;
  /* the rest of the gradient is this rank's own, unsummed: zeroed for the next accumulation, as
   * the fused pass zeroed the slice */
  m->ops->zero(m->grad_buf, (size_t)adam->lo * sizeof(float));
  m->ops->zero(m->grad_buf + adam->hi, (size_t)(adam->n - adam->hi) * sizeof(float));
  m->ops->mark(TXL_REGION_ALLREDUCE);
  txl_reducer_share(reducer, m->param_buf, sizeof(float));
  if (m->param_act != (void *)m->param_buf) txl_reducer_share(reducer, m->param_act, txl_dtype_size(m->ops->act));
  m->ops->mark(TXL_REGION_OPS);
}

void txl_train_update(TxlModel *m, TxlAdam *adam, TxlReducer *reducer, const TxlSchedule *sched, int step) {
  /* the fused passes: the weights' compute copy refreshed and the gradients zeroed as they go */
  txl_optim_prepare(adam, (float)txl_schedule_lr(sched, step));
  txl_train_apply(m, adam, reducer);
  m->grad_zero = 1;
}
