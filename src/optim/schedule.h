/* Learning-rate schedules (the original code's, with the warm-up made explicit). */
#ifndef TXL_OPTIM_SCHEDULE_H
#define TXL_OPTIM_SCHEDULE_H

#include "src/config/config.h"

typedef int TxlSchedKind; /* train.scheduler's values: TXL_SCHEDULER_COSINE, ... (config.def) */

typedef struct {
  TxlSchedKind kind;
  double lr;       /* peak */
  double eta_min;  /* cosine floor */
  int warmup_step;
  int max_step;
} TxlSchedule;

/* Learning rate of update s (0-based):
 *   s < warmup_step:  lr * (s + 1) / warmup_step
 *   cosine:           eta_min + (lr - eta_min) * (1 + cos(pi * s / max_step)) / 2
 *   inv_sqrt:         lr * sqrt(max(warmup_step, 1)) / sqrt(s + 1)
 *   constant:         lr */
double txl_schedule_lr(const TxlSchedule *s, int step);

#endif
