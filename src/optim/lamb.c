/* LAMB (You et al. 2020, as NVIDIA's FusedLAMB with bias correction): Adam's moments give the
 * direction u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p (ops->lamb_moments, written over
 * the gradient), then each parameter tensor moves by lr * ratio * u with its trust ratio
 * ratio = ||p|| / ||u|| when both norms are > 0, else 1. The norms are ops->sumsq_segments of each
 * tensor's runs (double sums in the backend's fixed order, so the same bits on every rank and every run); the
 * ratios are taken on the host in double. The fused form (txl_adam_step_fused) takes the last step
 * of each tensor by axpy_fused, which also writes the tensor's compute copy and zeroes its u. */
#include <math.h>

#include "src/optim/adam.h"

void txl_lamb_update(TxlAdam *a, float *params, void *params_act, float *grad, float coef, float lr) {
  const TxlOps *ops = a->ops;
  ops->lamb_moments(grad, params, a->m, a->v, a->n, a->beta1, a->beta2, a->eps, a->weight_decay, a->t, coef);
  for (int k = 0; k < a->table->n_tensors; k++) {
    /* the norms over the tensor's runs (the packed view's sums whatever the row padding); the
     * step over its span, whose padding holds zeros in p and u (u is 0 where p, m and v are); the
     * gaps between spans hold zeros in u too (nothing writes a gradient there), so the fused
     * steps leave all of grad zero */
    const TxlTensorInfo *ti = &a->table->tensors[k];
    const int64_t off = ti->offset, n = ti->span, *seg = a->table->runs + 2 * ti->run0;
    const double pn = sqrt(ops->sumsq_segments(params, (int)ti->n_runs, seg));
    const double un = sqrt(ops->sumsq_segments(grad, (int)ti->n_runs, seg));
    const double ratio = pn > 0.0 && un > 0.0 ? pn / un : 1.0;
    const float alpha = (float)(-(double)lr * ratio);
    if (params_act) /* the tensor's compute copy at the same element offset */
      ops->axpy_fused(params + off, (char *)params_act + (size_t)off * txl_dtype_size(ops->act), grad + off, alpha, n);
    else
      ops->axpy(params + off, grad + off, alpha, n);
  }
}
