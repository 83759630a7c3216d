/* Learning-rate schedules (the original code's, with the warm-up made explicit). */
#ifndef TXL_OPTIM_SCHEDULE_H
#define TXL_OPTIM_SCHEDULE_H

/* The schedule after the warm-up (the trainer maps train.scheduler onto it: src/train/config_map.h). */
typedef enum { TXL_SCHED_COSINE, TXL_SCHED_INV_SQRT, TXL_SCHED_CONSTANT, TXL_SCHED_DEV_PERF } TxlSchedKind;

/* The state of dev_perf (txl_schedule_validated): what a checkpoint must carry to continue it. */
typedef struct {
  double rate; /* the rate after warm-up: lr, lowered by each decay */
  double best; /* the best validation loss so far; +inf before the first validation */
  int bad;     /* validations since the last that improved on best (num_bad_epochs) */
} TxlPlateau;

typedef struct {
  TxlSchedKind kind;
  double lr;       /* peak */
  double eta_min;  /* cosine floor */
  int warmup_step;
  int max_step;
  double decay_rate; /* dev_perf: factor of a decay, in (0, 1) */
  int patience;      /* dev_perf: bad validations tolerated before a decay */
  double lr_min;     /* dev_perf: floor of the rate */
  TxlPlateau plateau;
} TxlSchedule;

/* Learning rate of update s (0-based):
 *   s < warmup_step:  lr * (s + 1) / warmup_step
 *   cosine:           eta_min + (lr - eta_min) * (1 + cos(pi * s / max_step)) / 2
 *   inv_sqrt:         lr * sqrt(max(warmup_step, 1)) / sqrt(s + 1)
 *   constant:         lr
 *   dev_perf:         plateau.rate (txl_schedule_validated) */
double txl_schedule_lr(const TxlSchedule *s, int step);

/* The state dev_perf starts from: rate = lr, best = +inf, bad = 0. */
void txl_schedule_plateau_init(TxlSchedule *s);

/* dev_perf: takes one validation loss (every other kind: does nothing). Returns 1 when the rate
 * was lowered. The rule is PyTorch's ReduceLROnPlateau(mode='min', factor=decay_rate,
 * patience=patience, threshold=1e-4, threshold_mode='rel', cooldown=0, min_lr=lr_min, eps=1e-8),
 * stepped with each validation loss as the original Transformer-XL's --scheduler dev_perf. */
int txl_schedule_validated(TxlSchedule *s, double valid_loss);

#endif
