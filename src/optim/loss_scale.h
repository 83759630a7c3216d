/* Loss scaling (train.loss_scale): the backward pass starts from the loss's gradient times S, so
 * that small gradients stored in a 16-bit type (run.precision = fp16) do not flush to zero, and
 * the optimizer divides by S again. S is a power of two, so in fp32 the scaled gradient is the
 * unscaled one times S exactly and the update the same bits as without scaling (as long as
 * nothing overflows): a static scale changes nothing but the range.
 *
 * dynamic (the original's --dynamic-loss-scale, apex's and torch.cuda.amp's rule): a step whose
 * gradient holds an infinity or a NaN (the gradient norm is not finite) is skipped: no update,
 * S halves, the step counts as done (its data is consumed, the schedule moves on). After `window`
 * finite steps in a row S doubles. A non-finite gradient at S = 1 is divergence, not overflow:
 * the trainer stops as without scaling. The state (S, the finite steps in a row, the steps
 * skipped) is in every checkpoint, so a resumed run continues exactly. */
#ifndef TXL_OPTIM_LOSS_SCALE_H
#define TXL_OPTIM_LOSS_SCALE_H

#include <stdint.h>

typedef enum { TXL_LOSS_SCALE_OFF = 0, TXL_LOSS_SCALE_STATIC = 1, TXL_LOSS_SCALE_DYNAMIC = 2 } TxlLossScaleMode;

typedef struct {
  TxlLossScaleMode mode;
  double scale;     /* S, a power of two (1 when off) */
  int window;       /* dynamic: finite steps in a row before S doubles */
  int64_t good;     /* finite steps since S last changed (or since the start) */
  int64_t skipped;  /* steps skipped for a non-finite gradient, over the whole run */
} TxlLossScale;

/* mode, the first S (a power of two >= 1 when not off; ignored when off) and the window. */
void txl_loss_scale_init(TxlLossScale *s, TxlLossScaleMode mode, double init, int window);

/* 1 when x is a power of two in [1, 2^100] (the range train.loss_scale_init accepts: beyond it the
 * gradient of any real loss overflows fp32). */
int txl_loss_scale_valid(double x);

/* After a step's gradient. finite: its norm is finite. Returns 1 when the step's update is to be
 * applied, 0 when the step is skipped (dynamic, S > 1 and not finite: S halved). A non-finite
 * gradient that is not skipped returns 1 with nothing changed: the caller stops the run. */
int txl_loss_scale_after_grad(TxlLossScale *s, int finite);

#endif
