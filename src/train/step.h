/* One optimizer step, the same code for training, benchmarks and the golden test. */
#ifndef TXL_TRAIN_STEP_H
#define TXL_TRAIN_STEP_H

#include <stdint.h>

#include "dist/reduce.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/optim/schedule.h"
#include "src/train/embed_gather.h"

/* Forward and backward on this rank's [L, B_local] tokens (host; in the run's column groups, one
 * after the other: train.batch_chunk), the gradient summed over the
 * ranks by `reducer` (NULL: one rank) as the backward pass goes (the word embedding's input-side
 * rows through `gather` where it is not NULL: src/train/embed_gather.h), so that m->grad_buf holds the
 * gradient of the mean loss over the L * batch_global tokens of the global batch, times
 * loss_scale (a power of two, src/optim/loss_scale.h; 1: none).
 * Returns that global mean loss (unscaled); *grad_norm the norm of the unscaled gradient (the
 * scaled one's divided by loss_scale, exactly; the same on every rank). With r->loss_out set,
 * returns 0 and leaves each column group's loss sum on the device in loss_out[g] (the caller
 * sums them in group order, over the ranks, and divides by the L * batch_global tokens, as here:
 * txl_trainer_losses). collective: all ranks */
double txl_train_grad(TxlModel *m, TxlRun *r, int step, int batch_global, TxlReducer *reducer,
                      TxlEmbedGather *gather, const int32_t *inputs, const int32_t *targets, int L, double loss_scale, double *grad_norm);

/* Clipping and the optimizer (train.optim) with the scheduled rate of update `step`, from the
 * gradient in m->grad_buf, scaled by loss_scale, whose unscaled norm is grad_norm; in the fused
 * passes (txl_adam_step_fused), which also refresh m->param_act and leave m->grad_buf zero for
 * the next txl_train_grad (m->grad_zero). */
void txl_train_update(TxlModel *m, TxlAdam *adam, const TxlSchedule *sched, int step, double grad_norm,
                      double loss_scale);

#endif
