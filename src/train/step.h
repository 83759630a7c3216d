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
 * Returns that global mean loss (unscaled). With r->loss_out set, returns 0 and leaves each column
 * group's loss sum on the device in loss_out[g] (the caller sums them in group order, over the
 * ranks, and divides by the L * batch_global tokens, as here: txl_trainer_losses), so that the
 * step need not wait for the device. collective: all ranks */
double txl_train_grad(TxlModel *m, TxlRun *r, int step, int batch_global, TxlReducer *reducer,
                      TxlEmbedGather *gather, const int32_t *inputs, const int32_t *targets, int L, double loss_scale);

/* The device inputs of txl_train_grad's forwards (every column group's tokens and targets, the
 * step of the dropout masks) uploaded ahead, as txl_run_upload does for one (the host does not
 * wait): a step replayed as a CUDA graph makes them before the graph's launch. */
void txl_train_upload(TxlModel *m, TxlRun *r, const int32_t *inputs, const int32_t *targets, int L, int step);

/* The norm of that gradient (unscaled: the same on every rank) and the clip factor, into the
 * optimizer's record on the device (txl_optim_clip; the host reads it with txl_optim_read_clip
 * when it needs it). A sharded optimizer (dist.shard_optimizer: each rank holds the summed
 * gradient of its slice alone) takes it in parts, summed across the ranks by `reducer`: the
 * same bits. collective: all ranks, when sharded */
void txl_train_clip(TxlModel *m, TxlAdam *adam, TxlReducer *reducer, double loss_scale);

/* The optimizer (train.optim) with the scheduled rate of update `step`, from the gradient in
 * m->grad_buf and the clip factor txl_train_clip left in adam->rec; in the fused passes
 * (txl_adam_step_fused), which also refresh m->param_act and leave m->grad_buf zero for the next
 * txl_train_grad (m->grad_zero). Writes nothing when the record halts the updates (a non-finite
 * norm: kernels/common/clip.h). */
void txl_train_update(TxlModel *m, TxlAdam *adam, TxlReducer *reducer, const TxlSchedule *sched, int step);
/* Its device part, after txl_optim_prepare (a CUDA graph captures it once): txl_optim_apply, and
 * when sharded the gradient zeroed outside this rank's slice and every rank's updated slice of
 * m->param_buf and m->param_act shared by `reducer` (collective: all ranks, when sharded). */
void txl_train_apply(TxlModel *m, TxlAdam *adam, TxlReducer *reducer);

#endif
