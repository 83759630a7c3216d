/* ZeRO-1's split of the parameter buffer over the ranks (dist.shard_optimizer): rank k holds the
 * optimizer's state of, and updates, the slice [lo[k], lo[k + 1]) alone. The slices follow the
 * parts of the gradient norm (kernels/ops.def: norm_parts), rank k owning the parts [part[k],
 * part[k + 1]) (an even share of their count), so that each rank sums the squares of its own
 * slice in exactly the pieces the unsharded norm adds, and the norm keeps its bits. */
#ifndef TXL_OPTIM_SHARD_H
#define TXL_OPTIM_SHARD_H

#include <stdint.h>

#include "kernels/ops.h"
#include "src/model/params.h"

typedef struct {
  int world;
  int n_parts;  /* of the norm (ops->norm_parts of the table's runs) */
  int64_t *lo;  /* [world + 1] lo[0] = 0, lo[world] = the table's total, increasing */
  int *part;    /* [world + 1] part[0] = 0, part[world] = n_parts */
} TxlShardPlan;

/* The plan for `world` ranks of a buffer laid out by t, on the backend `ops`. */
void txl_shard_plan_make(TxlShardPlan *p, const TxlOps *ops, const TxlParamTable *t, int world);
/* Floats of the largest slice (the optimizer state a rank holds at most is twice that). */
int64_t txl_shard_plan_max_slice(const TxlShardPlan *p);
void txl_shard_plan_free(TxlShardPlan *p);

#endif
