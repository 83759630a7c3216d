/* One optimizer step, the same code for training, benchmarks and the golden test. */
#ifndef TXL_TRAIN_STEP_H
#define TXL_TRAIN_STEP_H

#include <stdint.h>

#include "dist/reduce.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/optim/schedule.h"

/* Forward and backward on this rank's [L, B_local] tokens (host), the gradient summed over the
 * ranks by `reducer` (NULL: one rank) as the backward pass goes, so that it is the gradient of
 * the mean loss over the L * batch_global tokens of the global batch, then clipping and Adam
 * with the scheduled rate of update `step`.
 * Returns that global mean loss; *grad_norm (may be NULL) the norm before clipping.
 * collective: all ranks */
double txl_train_step(TxlModel *m, TxlRun *r, TxlAdam *adam, const TxlSchedule *sched, int step,
                      int batch_global, TxlReducer *reducer, const int32_t *inputs, const int32_t *targets, int L,
                      double *grad_norm);

#endif
