#include "src/optim/shard.h"

#include <stdlib.h>

#include "src/base/error.h"

void txl_shard_plan_make(TxlShardPlan *p, const TxlOps *ops, const TxlParamTable *t, int world) {
  if (t->n_runs > INT32_MAX) txl_fatal("internal: %lld runs of gradients", (long long)t->n_runs);
  int64_t *bounds = txl_malloc((TXL_NORM_PARTS_MAX + 1) * sizeof *bounds, "shard plan: the norm's parts");
  p->world = world;
  p->n_parts = ops->norm_parts(bounds, (int)t->n_runs, t->runs);
  if (p->n_parts < 1 || p->n_parts > TXL_NORM_PARTS_MAX)
    txl_fatal("internal: the gradient norm in %d parts (1 to %d)", p->n_parts, TXL_NORM_PARTS_MAX);
  p->lo = txl_malloc((size_t)(world + 1) * sizeof *p->lo, "shard plan: slices");
  p->part = txl_malloc((size_t)(world + 1) * sizeof *p->part, "shard plan: parts");
  for (int k = 0; k <= world; k++) {
    p->part[k] = (int)((int64_t)p->n_parts * k / world);
    /* the first slice takes what lies before the first part, the last what lies after the last
     * (padding: zeros, whose update leaves them zeros) */
    p->lo[k] = k == 0 ? 0 : k == world ? t->total : bounds[p->part[k]];
  }
  free(bounds);
}

int64_t txl_shard_plan_max_slice(const TxlShardPlan *p) {
  int64_t most = 0;
  for (int k = 0; k < p->world; k++)
    if (p->lo[k + 1] - p->lo[k] > most) most = p->lo[k + 1] - p->lo[k];
  return most;
}

void txl_shard_plan_free(TxlShardPlan *p) {
  free(p->lo);
  free(p->part);
  p->lo = NULL;
  p->part = NULL;
}
