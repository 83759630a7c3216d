/* The gradient's global norm and its clipping factor, kept where the gradient lives (the device),
 * so that a training step never waits for the host to read the norm: the optimizer's fused pass
 * reads the factor from this record, and the host reads the record only when it reports or
 * saves (log lines, evaluations, checkpoints). Shared by the CPU and CUDA backends: the same
 * double arithmetic, so both give the bits the host gave when it computed them itself.
 *
 * A non-finite norm halts the updates: from that step on the factor is a NaN, which the fused
 * optimizer passes read as "write nothing" (kernels/ops.def: adam_fused, sgd_fused), and the
 * record keeps which step it was (`bad`, counted from the last reset) and its norm; the host,
 * when it next reads the record, stops the run (or, under dynamic loss scaling, which reads it
 * every step, skips the step and resets the record). */
#ifndef TXL_KERNELS_CLIP_H
#define TXL_KERNELS_CLIP_H

#include <math.h>
#include <stdint.h>

#include "src/base/philox.h" /* TXL_HD */

typedef struct {
  double norm;     /* the last step's unscaled gradient norm */
  double bad_norm; /* the norm of step `bad` (non-finite); 0 while bad == 0 */
  float coef;      /* the factor the optimizer takes the gradient times; NaN once bad != 0 */
  int32_t count;   /* steps recorded since the last reset */
  int32_t bad;     /* the first of them whose norm was not finite (1-based); 0: none */
  int32_t pad;
} TxlGradClip;

/* The most parts a backend splits the gradient norm into (kernels/ops.def: norm_parts): the CUDA
 * backend's chunk count at most (the CPU's is 64). */
#define TXL_NORM_PARTS_MAX 4096

/* torch.nn.utils.clip_grad_norm_'s factor (clip / (norm + 1e-6), applied when < 1; clip 0: off)
 * times the inverse of the loss scale (a power of two: exact). */
static inline TXL_HD float txl_grad_coef(float clip, double norm, double loss_scale) {
  float coef = 1.0f;
  if (clip > 0.0f) {
    const float c = (float)((double)clip / (norm + 1e-6));
    if (c < 1.0f) coef = c;
  }
  return coef * (float)(1.0 / loss_scale);
}

/* One step's record from the sum of squares of its gradient scaled by loss_scale:
 * norm = sqrt(sumsq) / loss_scale (sqrt(S^2 x) = S sqrt(x), and S a power of two: exact). */
static inline TXL_HD void txl_grad_clip_record(TxlGradClip *r, double sumsq, float clip, double loss_scale) {
  const double norm = sqrt(sumsq) / loss_scale;
  r->count++;
  r->norm = norm;
  if (r->bad == 0 && !isfinite(norm)) {
    r->bad = r->count;
    r->bad_norm = norm;
  }
  r->coef = r->bad ? NAN : txl_grad_coef(clip, norm, loss_scale);
}

#endif
