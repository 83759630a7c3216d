#include "src/optim/schedule.h"

#include <math.h>

double txl_schedule_lr(const TxlSchedule *s, int step) {
  if (step < s->warmup_step) return s->lr * (double)(step + 1) / (double)s->warmup_step;
  switch (s->kind) {
    case TXL_SCHEDULER_COSINE:
      return s->eta_min + (s->lr - s->eta_min) * (1.0 + cos(M_PI * (double)step / (double)s->max_step)) / 2.0;
    case TXL_SCHEDULER_INV_SQRT: {
      double w = s->warmup_step > 1 ? (double)s->warmup_step : 1.0;
      return s->lr * sqrt(w) / sqrt((double)step + 1.0);
    }
    case TXL_SCHEDULER_CONSTANT: return s->lr;
  }
  return s->lr;
}
