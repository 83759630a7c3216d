/* LAMB's whole update (src/optim/lamb.c through txl_adam_step on the CPU backend): clipping, the
 * moments and direction, each tensor's trust ratio ||p|| / ||u|| and the step, against the same
 * arithmetic in double, over three updates of a table of three tensors laid out with gaps (the
 * padded layout): one of 50 values, one of 70, one of 30 that starts at zero (||p|| = 0 at the
 * first update: ratio 1), with weight decay, and a clip that is active on the first update.
 *
 * Tolerance. The float path differs from the double one by roundings only: the direction u of
 * each element takes about 20 float operations (the clip factor, the moments, the bias
 * corrections, sqrt, the division, the weight decay), each within u = 2^-24 relative, so
 * |du| <= 20 u |u| to first order; each norm sums at most n = 70 squares (in double on the CPU,
 * whose error is negligible) of values within 20 u, so the ratio is within 2 x 20 u + 2 u; the
 * step lr ratio u is then within (20 + 42 + 2) u of its exact value, and the subtraction from p
 * adds u |p|. The moments carry the previous updates' rounding into the next (each update's
 * terms at most 20 u relative again), so after three updates
 *     |p - p_ref| <= sum over updates of (64 + 40) u lr ratio |u| + 3 u |p|,
 * taken with a factor 4 of slack (TOL_C of the other tests). A trust ratio forced to 1, a norm
 * over the wrong span or a missing weight decay is off by orders of magnitude more. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "src/config/config.h"
#include "src/optim/adam.h"
#include "tests/lib/test_util.h"

enum { N_TENSORS = 3, TOTAL = 384, STEPS = 3 };

int main(void) {
  static const int64_t offset[N_TENSORS] = {0, 128, 256}, numel[N_TENSORS] = {50, 70, 30};
  TxlTensorInfo info[N_TENSORS];
  memset(info, 0, sizeof info);
  for (int k = 0; k < N_TENSORS; k++) {
    snprintf(info[k].name, sizeof info[k].name, "t%d", k);
    info[k].offset = offset[k];
    info[k].numel = numel[k];
    info[k].rank = 1;
    info[k].shape[0] = numel[k];
    info[k].shape[1] = 1;
    info[k].ld = info[k].split = info[k].split_at = 1; /* rank 1: one run */
    info[k].span = numel[k];
    info[k].layer = -1;
  }
  TxlParamTable table;
  memset(&table, 0, sizeof table);
  table.tensors = info;
  table.n_tensors = N_TENSORS;
  table.total = TOTAL;
  table.packed = 150;
  txl_param_table_runs(&table);

  const float lr = 0.01f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-6f, clip = 0.5f, wd = 0.01f;
  float *p = calloc(TOTAL, sizeof(float)), *g = calloc(TOTAL, sizeof(float));
  double *pr = calloc(TOTAL, sizeof(double)), *mr = calloc(TOTAL, sizeof(double)), *vr = calloc(TOTAL, sizeof(double));
  double *bound = calloc(TOTAL, sizeof(double));
  OtRng rng = ot_rng(12345);
  for (int k = 0; k < 2; k++) /* tensor 2 starts at zero */
    for (int64_t i = 0; i < numel[k]; i++) p[offset[k] + i] = (float)(0.2 * (ot_uniform(&rng) - 0.5));
  for (int i = 0; i < TOTAL; i++) pr[i] = p[i];

  TxlAdam a;
  txl_adam_create(&a, txl_ops_cpu(), TOTAL, beta1, beta2, eps, clip);
  txl_optim_set_kind(&a, TXL_OPTIMIZER_LAMB, 0.0f, wd, &table);
  const double u = OT_U;
  for (int t = 1; t <= STEPS; t++) {
    for (int k = 0; k < N_TENSORS; k++)
      for (int64_t i = 0; i < numel[k]; i++) g[offset[k] + i] = (float)(t == 1 ? 2.0 : 0.1) * (float)(ot_uniform(&rng) - 0.5);
    const double norm = txl_grad_norm(a.ops, g, &table);
    /* the reference: the same update in double */
    const double coef = norm > clip ? clip / (norm + 1e-6) : 1.0;
    const double c1 = 1.0 - pow(beta1, t), c2 = 1.0 - pow(beta2, t);
    for (int k = 0; k < N_TENSORS; k++) {
      double *ud = calloc((size_t)numel[k], sizeof(double)), pn = 0.0, un = 0.0;
      for (int64_t i = 0; i < numel[k]; i++) {
        const int64_t e = offset[k] + i;
        const double gs = (double)g[e] * coef;
        mr[e] = beta1 * mr[e] + (1.0 - beta1) * gs;
        vr[e] = beta2 * vr[e] + (1.0 - beta2) * gs * gs;
        ud[i] = (mr[e] / c1) / (sqrt(vr[e] / c2) + eps) + wd * pr[e];
        pn += pr[e] * pr[e];
        un += ud[i] * ud[i];
      }
      const double ratio = pn > 0.0 && un > 0.0 ? sqrt(pn) / sqrt(un) : 1.0;
      for (int64_t i = 0; i < numel[k]; i++) {
        const int64_t e = offset[k] + i;
        pr[e] -= lr * ratio * ud[i];
        bound[e] += 4.0 * ((64.0 + 40.0) * u * lr * ratio * fabs(ud[i]) + u * fabs(pr[e]));
      }
      free(ud);
    }
    txl_adam_step(&a, p, g, norm, 1.0, lr);
  }
  float *want = calloc(TOTAL, sizeof(float));
  for (int i = 0; i < TOTAL; i++) want[i] = (float)pr[i];
  check_close("LAMB: parameters after 3 updates against double arithmetic", p, want, bound, TOTAL);
  /* the gaps between the tensors stay zero */
  int gaps = 0;
  for (int k = 0; k < N_TENSORS; k++)
    for (int64_t i = offset[k] + numel[k]; i < (k + 1 < N_TENSORS ? offset[k + 1] : TOTAL); i++) gaps += p[i] != 0.0f;
  if (gaps) check_fail("LAMB: the padding between tensors changed");
  txl_adam_destroy(&a);
  free(p), free(g), free(pr), free(mr), free(vr), free(bound), free(want);
  free(table.runs);
  return ot_finish("test_lamb");
}
