/* train.scheduler = dev_perf (src/optim/schedule.c): sequences of validation losses and the rates
 * they leave, worked out by hand from PyTorch's ReduceLROnPlateau rules (mode min, relative
 * threshold 1e-4, cooldown 0, eps 1e-8): a loss improves when below best * (1 - 1e-4); after
 * more than `patience` validations without improvement the rate becomes max(rate * decay_rate,
 * lr_min), applied only when that lowers it by more than 1e-8; the count restarts either way.
 *   test_schedule  (one process) */
#include <math.h>
#include <stdio.h>

#include "src/optim/schedule.h"

static int failures = 0;

static void check(int ok, const char *what, double got, double want) {
  printf("%s: %s (got %.17g, want %.17g)\n", ok ? "PASS" : "FAIL", what, got, want);
  if (!ok) failures++;
}

static TxlSchedule dev_perf(double lr, double decay, int patience, double lr_min, int warmup) {
  TxlSchedule s = {.kind = TXL_SCHED_DEV_PERF, .lr = lr, .warmup_step = warmup, .max_step = 1000,
                   .decay_rate = decay, .patience = patience, .lr_min = lr_min};
  txl_schedule_plateau_init(&s);
  return s;
}

typedef struct {
  double loss;
  int decayed;  /* txl_schedule_validated's return */
  double rate;  /* the rate after it */
  const char *why;
} Case;

static void run(const char *name, TxlSchedule s, const Case *cs, int n) {
  for (int i = 0; i < n; i++) {
    char what[256];
    const int d = txl_schedule_validated(&s, cs[i].loss);
    snprintf(what, sizeof what, "%s, validation %d (loss %g): %s", name, i + 1, cs[i].loss, cs[i].why);
    check(d == cs[i].decayed && s.plateau.rate == cs[i].rate && txl_schedule_lr(&s, 1000) == cs[i].rate, what,
          s.plateau.rate, cs[i].rate);
  }
}

int main(void) {
  /* patience 0, decay 0.5, lr 1: each validation that does not improve halves the rate */
  const Case a[] = {
      {3.0, 0, 1.0, "the first validation is the baseline (best = +inf before)"},
      {2.0, 0, 1.0, "2 < 3 * (1 - 1e-4) = 2.9997: improves, best 2"},
      {2.0, 1, 0.5, "2 is not below 2 * 0.9999 = 1.9998: 1 bad > patience 0, rate 1 * 0.5"},
      {1.9999, 1, 0.25, "1.9999 is lower, but not below 1.9998 (the relative threshold): 0.5 * 0.5"},
      {1.9997, 0, 0.25, "1.9997 < 1.9998: improves, best 1.9997"},
      {NAN, 1, 0.125, "NaN never improves: 0.25 * 0.5"},
  };
  run("patience 0", dev_perf(1.0, 0.5, 0, 0.0, 0), a, 6);

  /* patience 2, decay 0.1, lr_min 0.015: the third bad validation in a row decays; the floor */
  const Case b[] = {
      {5.0, 0, 1.0, "baseline, best 5"},
      {6.0, 0, 1.0, "bad 1 <= patience 2"},
      {6.0, 0, 1.0, "bad 2 <= patience 2"},
      {6.0, 1, 0.1, "bad 3 > 2: rate max(1 * 0.1, 0.015) = 0.1, count back to 0"},
      {4.0, 0, 0.1, "improves: best 4"},
      {4.0, 0, 0.1, "bad 1"},
      {5.0, 0, 0.1, "bad 2"},
      {4.0, 1, 0.015, "bad 3 (equal is no improvement): max(0.1 * 0.1, 0.015) = 0.015, clamped to lr_min"},
      {4.5, 0, 0.015, "bad 1 (the count restarted after the decay)"},
      {4.5, 0, 0.015, "bad 2"},
      {4.5, 0, 0.015, "bad 3: max(0.0015, 0.015) = 0.015, no decrease: not applied"},
  };
  TxlSchedule sb = dev_perf(1.0, 0.1, 2, 0.015, 0);
  run("patience 2", sb, b, 11);
  for (int i = 0; i < 11; i++) txl_schedule_validated(&sb, b[i].loss);
  check(sb.plateau.bad == 0 && sb.plateau.best == 4.0, "patience 2: after the unapplied decay the count is 0, best 4",
        sb.plateau.bad, 0);

  /* the eps rule: lr 3e-8, patience 0, decay 0.5 */
  const Case c[] = {
      {1.0, 0, 3e-8, "baseline"},
      {1.0, 1, 1.5e-8, "3e-8 - 1.5e-8 = 1.5e-8 > eps 1e-8: applied"},
      {1.0, 0, 1.5e-8, "1.5e-8 - 7.5e-9 = 7.5e-9 <= eps: not applied, the rate stays"},
      {1.0, 0, 1.5e-8, "and never decays again"},
  };
  run("eps", dev_perf(3e-8, 0.5, 0, 0.0, 0), c, 4);

  /* warm-up: lr * (s + 1) / warmup_step first; a decay during it shows once it is over */
  TxlSchedule w = dev_perf(1.0, 0.5, 0, 0.0, 4);
  check(txl_schedule_lr(&w, 1) == 0.5, "warm-up: update 1 of 4 at lr * 2 / 4", txl_schedule_lr(&w, 1), 0.5);
  txl_schedule_validated(&w, 2.0);
  txl_schedule_validated(&w, 2.0);
  check(txl_schedule_lr(&w, 2) == 0.75, "warm-up: a decay does not change the warm-up's rate",
        txl_schedule_lr(&w, 2), 0.75);
  check(txl_schedule_lr(&w, 4) == 0.5, "after the warm-up: the decayed rate 1 * 0.5", txl_schedule_lr(&w, 4), 0.5);

  /* another schedule ignores validations */
  TxlSchedule k = dev_perf(1.0, 0.5, 0, 0.0, 0);
  k.kind = TXL_SCHED_CONSTANT;
  int d = txl_schedule_validated(&k, 2.0) + txl_schedule_validated(&k, 3.0);
  check(d == 0 && k.plateau.rate == 1.0 && k.plateau.bad == 0 && txl_schedule_lr(&k, 10) == 1.0,
        "constant: validations change nothing", k.plateau.rate, 1.0);

  printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
