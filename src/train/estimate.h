/* What one rank of a run will hold, worked out from the config before anything is allocated,
 * and what this machine can give: txl-train refuses a run that cannot fit with one line instead
 * of being killed half-way through allocating, and `txl-train --check` prints the same figures
 * for any rank count without starting the ranks. */
#ifndef TXL_TRAIN_ESTIMATE_H
#define TXL_TRAIN_ESTIMATE_H

#include <stdint.h>
#include <stdio.h>

#include "kernels/ops.h"
#include "src/config/config.h"
#include "src/model/model.h"

/* Bytes, for the rank holding the most columns (dist/shard.h). */
typedef struct {
  int64_t n_params;     /* parameters of the model */
  int64_t n_params_ne;  /* without the embeddings */
  double flops_per_token; /* forward + backward, per trained token */
  int on_gpu;           /* the model's buffers live in GPU memory */
  double state;         /* parameters, gradients, both Adam moments (and the bf16 weight copy) */
  int sharded;          /* dist.shard_optimizer applies: the moments are the largest rank's slice */
  double copy;          /* of which the bf16 weight copy */
  double train_run;     /* training activations and the memory of earlier segments */
  double eval_run;      /* the evaluation run, which exists beside the training run while validating */
  double staging;       /* host copies while a checkpoint is written (parameters, moments, memory) */
  double workspace;     /* the GEMM library's workspace on the GPU (0 on the CPU) */
  double device;        /* the GPU's share: state + both runs + workspace (0 on the CPU) */
  double host;          /* host memory at the peak (on the CPU everything) */
  /* the adaptive softmax's tail logits in both runs (part of train_run and eval_run; 0 without
   * tail clusters): as sized, and as they would be not counted (the worst case: on the CPU every
   * target in the widest cluster, on a GPU every tail cluster at a whole segment, tail_fixed) */
  double tail, tail_worst;
  int tail_counted;     /* both runs' tail targets were counted (src/train/tail_cap.h) */
  int tail_fixed;       /* the backend runs every cluster at its capacity (TxlOps.host_memory 0) */
  int tail_synthetic;   /* counted in --bench's synthetic segments, not a corpus (the caller's) */
} TxlMemEstimate;

/* Estimates one rank of `world` for a run of `c` over a vocabulary of n_token with the op table
 * `ops` (txl_backend_ops), the training and evaluation runs' tail targets per segment train_tail
 * and eval_tail (the largest of any rank's; NULL: not counted, the worst case). Ends with a
 * one-line error (every rank alike) when the config's adaptive cutoffs do not fit n_token. */
void txl_memory_estimate(const TxlConfig *c, int n_token, const TxlOps *ops, int world, const TxlTailCap *train_tail,
                         const TxlTailCap *eval_tail, TxlMemEstimate *e);

/* The training run's shape for a rank of B_local columns, the first col0 globally (the trainer's
 * run and the estimate's; col0 plays no part in the sizes). */
TxlRunShape txl_train_run_shape(const TxlConfig *c, int B_local, int col0);
/* The evaluation run's (the eval.* keys), likewise. */
TxlRunShape txl_eval_run_shape(const TxlConfig *c, int B_local, int col0);

/* One line on the column groups of a rank of B_local columns (train.batch_chunk), when there are
 * several; nothing otherwise. */
void txl_groups_print(const TxlConfig *c, int B_local, FILE *out);

/* Bytes this process may still allocate in host memory: the smallest of /proc/meminfo's
 * MemAvailable and the room left under any memory limit of its cgroup (v1 or v2). `source` (may
 * be NULL) names which it was. -1 when none of them can be read. */
double txl_memory_available(const char **source);

/* The estimate as one line: "memory per rank: ..." (MiB / GiB as they read best). */
void txl_memory_print(const TxlMemEstimate *e, FILE *f);

/* Formats bytes as "812.4 MiB" or "3.17 GiB". */
void txl_format_bytes(double bytes, char *out, size_t n);

#endif
