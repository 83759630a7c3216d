#include "tests/lib/norm_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/optim/shard.h"
#include "tests/lib/test_util.h"

/* A layout of n_seg segments of random lengths (some 0) at random gaps; *end its span's end. */
static TxlParamTable layout(int n_seg, int max_len, OtRng *rng) {
  TxlParamTable t;
  memset(&t, 0, sizeof t);
  t.runs = txl_malloc((size_t)n_seg * 2 * sizeof(int64_t), "test: runs");
  t.n_runs = n_seg;
  int64_t end = ot_randint(rng, 3);
  for (int s = 0; s < n_seg; s++) {
    t.runs[2 * s] = end + ot_randint(rng, 130);
    t.runs[2 * s + 1] = ot_randint(rng, 6) == 0 ? 0 : 1 + ot_randint(rng, max_len);
    end = t.runs[2 * s] + t.runs[2 * s + 1];
  }
  t.total = end + ot_randint(rng, 40); /* padding after the last segment too */
  return t;
}

int txl_test_norm_parts(const TxlOps *o, int n_seg, int max_len, int world, uint64_t seed) {
  OtRng rng = ot_rng(seed);
  TxlParamTable t = layout(n_seg, max_len, &rng);
  const int64_t n = t.total;
  float *x = ot_alloc(n), *poisoned = ot_alloc(n);
  for (int s = 0; s < n_seg; s++)
    for (int64_t i = 0; i < t.runs[2 * s + 1]; i++) x[t.runs[2 * s] + i] = 4.0f * (float)ot_uniform(&rng) - 2.0f;
  TxlShardPlan plan;
  txl_shard_plan_make(&plan, o, &t, world);
  const int P = plan.n_parts;
  int ok = 1;
  /* the bounds: increasing from seg[0] to the last segment's end */
  int64_t bounds[TXL_NORM_PARTS_MAX + 1];
  if (o->norm_parts(bounds, n_seg, t.runs) != P) ok = 0;
  const int64_t last_end = t.runs[2 * (n_seg - 1)] + t.runs[2 * (n_seg - 1) + 1];
  if (bounds[0] != t.runs[0] || bounds[P] != last_end) ok = 0;
  for (int p = 0; p < P; p++) ok &= bounds[p] <= bounds[p + 1];

  float *dx = o->alloc((size_t)n * sizeof(float), "test: x");
  double *dpart = o->alloc((size_t)P * sizeof(double), "test: parts");
  double *sum = ot_alloc_d(P), *part = ot_alloc_d(P);
  for (int k = world - 1; k >= 0; k--) { /* rank k's own parts, its slice alone readable */
    for (int64_t i = 0; i < n; i++) poisoned[i] = i >= plan.lo[k] && i < plan.lo[k + 1] ? x[i] : NAN;
    o->to_device(dx, poisoned, (size_t)n * sizeof(float));
    o->sumsq_parts(dpart, dx, n_seg, t.runs, plan.part[k], plan.part[k + 1]);
    o->to_host(part, dpart, (size_t)P * sizeof(double));
    for (int p = 0; p < P; p++) sum[p] += part[p];
  }
  TxlGradClip *drec = o->alloc(2 * sizeof(TxlGradClip), "test: records");
  o->zero(drec, 2 * sizeof(TxlGradClip));
  o->to_device(dpart, sum, (size_t)P * sizeof(double));
  o->grad_clip_parts(drec, dpart, P, 0.25f, 4.0);
  o->to_device(dx, x, (size_t)n * sizeof(float));
  o->grad_clip(drec + 1, dx, n_seg, t.runs, 0.25f, 4.0);
  TxlGradClip rec[2];
  o->to_host(rec, drec, sizeof rec);
  const int same = memcmp(&rec[0], &rec[1], sizeof rec[0]) == 0;
  ok &= same && isfinite(rec[0].norm) && rec[0].norm > 0.0;
  printf("norm in %d parts, %d segments, %lld floats, %d ranks: norm %.17g, whole %.17g  %s\n", P, n_seg,
         (long long)n, world, rec[0].norm, rec[1].norm, ok ? "PASS" : "FAIL");
  o->free(drec);
  o->free(dpart);
  o->free(dx);
  free(sum);
  free(part);
  free(x);
  free(poisoned);
  txl_shard_plan_free(&plan);
  free(t.runs);
  return ok;
}
