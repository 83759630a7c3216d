/* Adam with global gradient-norm clipping over the model's one gradient buffer. */
#ifndef TXL_OPTIM_ADAM_H
#define TXL_OPTIM_ADAM_H

#include <stdint.h>

#include "kernels/ops.h"
#include "src/model/params.h"

typedef struct {
  const TxlOps *ops;
  int64_t n;      /* floats in the parameter buffer */
  float *m, *v;   /* [n] device: first and second moments, same layout as the parameters */
  int t;          /* updates done */
  float beta1, beta2, eps, clip;
} TxlAdam;

void txl_adam_create(TxlAdam *a, const TxlOps *ops, int64_t n, float beta1, float beta2, float eps,
                     float clip);
void txl_adam_destroy(TxlAdam *a);

/* L2 norm of the gradient buffer laid out by t (accumulated in double): of its tensors, the
 * padding left out; on the CPU the bits of the norm of the packed view (ops->sumsq_segments). */
double txl_grad_norm(const TxlOps *ops, const float *grad, const TxlParamTable *t);

/* One update with learning rate lr: clips the gradient to norm `clip` as
 * torch.nn.utils.clip_grad_norm_ (coef = clip / (norm + 1e-6), applied when < 1), then Adam.
 * `norm` is the gradient's L2 norm (txl_grad_norm). */
void txl_adam_step(TxlAdam *a, float *params, const float *grad, double norm, float lr);

#endif
