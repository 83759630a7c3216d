#include "src/optim/schedule.h"

#include <math.h>

double txl_schedule_lr(const TxlSchedule *s, int step) {
  if (step < s->warmup_step) return s->lr * (double)(step + 1) / (double)s->warmup_step;
  switch (s->kind) {
    case TXL_SCHED_COSINE:
      return s->eta_min + (s->lr - s->eta_min) * (1.0 + cos(M_PI * (double)step / (double)s->max_step)) / 2.0;
    case TXL_SCHED_INV_SQRT: {
      double w = s->warmup_step > 1 ? (double)s->warmup_step : 1.0;
      return s->lr * sqrt(w) / sqrt((double)step + 1.0);
    }
    case TXL_SCHED_CONSTANT: return s->lr;
    case TXL_SCHED_DEV_PERF: return s->plateau.rate;
  }
  return s->lr;
}

void txl_schedule_plateau_init(TxlSchedule *s) {
  s->plateau.rate = s->lr;
  s->plateau.best = INFINITY;
  s->plateau.bad = 0;
}

/* PyTorch's documented ReduceLROnPlateau (torch.optim.lr_scheduler), with mode 'min',
 * threshold_mode 'rel', cooldown 0, as the original's dev_perf builds it:
 *   - a loss improves when it is below best * (1 - threshold), threshold = 1e-4 ("In rel mode,
 *     dynamic_threshold = best * (1 - threshold) in min mode"); best starts at +inf, so the first
 *     validation always improves (the baseline); NaN never does;
 *   - an improvement sets best = loss and the bad count to 0; any other validation adds 1;
 *   - when the bad count exceeds patience ("with patience = 2 ... will only decrease the LR after
 *     the 3rd epoch" without improvement; with patience 0 every bad validation decays), the rate
 *     becomes new = max(old * factor, min_lr), but only if old - new > eps, eps = 1e-8 ("minimal
 *     decay applied to lr. If the difference between new and old lr is smaller than eps, the
 *     update is ignored"); the bad count goes back to 0 whether or not the decay was applied;
 *   - cooldown 0: no validations are skipped after a decay.
 * The warm-up does not stop it: the original steps it at every validation, and the rate it
 * keeps takes over when the warm-up ends. */
int txl_schedule_validated(TxlSchedule *s, double valid_loss) {
  if (s->kind != TXL_SCHED_DEV_PERF) return 0;
  TxlPlateau *p = &s->plateau;
  const double threshold = 1e-4, eps = 1e-8;
  if (valid_loss < p->best * (1.0 - threshold)) {
    p->best = valid_loss;
    p->bad = 0;
  } else {
    p->bad++;
  }
  if (p->bad <= s->patience) return 0;
  p->bad = 0;
  const double old = p->rate, lowered = old * s->decay_rate;
  const double next = lowered > s->lr_min ? lowered : s->lr_min;
  if (!(old - next > eps)) return 0;
  p->rate = next;
  return 1;
}
