#include "src/train/step.h"

#include "dist/dist.h"

static void on_ready(void *ctx, int64_t begin, int64_t end) { txl_reducer_ready((TxlReducer *)ctx, begin, end); }

double txl_train_grad(TxlModel *m, TxlRun *r, int step, int batch_global, TxlReducer *reducer,
                      const int32_t *inputs, const int32_t *targets, int L, double *grad_norm) {
  const double global_tokens = (double)L * batch_global;
  m->ops->zero(m->grad_buf, (size_t)m->table.total * sizeof(float));
  double loss_sum = txl_model_forward(m, r, inputs, targets, L, step, 1, (float)(1.0 / global_tokens));
  txl_model_backward(m, r, reducer ? on_ready : NULL, reducer);
  if (reducer) {
    txl_reducer_finish(reducer);
    txl_dist_allreduce_sum_f64(&loss_sum, 1);
  }
  *grad_norm = txl_grad_norm(m->ops, m->grad_buf, &m->table);
  return loss_sum / global_tokens;
}

void txl_train_update(TxlModel *m, TxlAdam *adam, const TxlSchedule *sched, int step, double grad_norm) {
  txl_adam_step(adam, m->param_buf, m->grad_buf, grad_norm, (float)txl_schedule_lr(sched, step));
  txl_model_params_changed(m);
}
