#include "src/optim/loss_scale.h"

#include <math.h>

#include "src/base/error.h"

#define TXL_LOSS_SCALE_MAX_EXP 100 /* S <= 2^100 */

int txl_loss_scale_valid(double x) {
  if (!(x >= 1.0 && x <= ldexp(1.0, TXL_LOSS_SCALE_MAX_EXP))) return 0;
  int e = 0;
  return frexp(x, &e) == 0.5; /* x = 0.5 * 2^e exactly: a power of two */
}

void txl_loss_scale_init(TxlLossScale *s, TxlLossScaleMode mode, double init, int window) {
  if (mode != TXL_LOSS_SCALE_OFF && !txl_loss_scale_valid(init))
    txl_fatal("internal: loss scale %g is not a power of two in [1, 2^%d]", init, TXL_LOSS_SCALE_MAX_EXP);
  if (mode == TXL_LOSS_SCALE_DYNAMIC && window < 1) txl_fatal("internal: loss scale window %d", window);
  s->mode = mode;
  s->scale = mode == TXL_LOSS_SCALE_OFF ? 1.0 : init;
  s->window = window;
  s->good = 0;
  s->skipped = 0;
}

int txl_loss_scale_after_grad(TxlLossScale *s, int finite) {
  if (s->mode != TXL_LOSS_SCALE_DYNAMIC) return 1;
  if (!finite) {
    if (s->scale <= 1.0) return 1; /* divergence: the caller stops */
    s->scale *= 0.5;
    s->good = 0;
    s->skipped++;
    return 0;
  }
  if (++s->good >= s->window && s->scale < ldexp(1.0, TXL_LOSS_SCALE_MAX_EXP)) {
    s->scale *= 2.0;
    s->good = 0;
  }
  return 1;
}
