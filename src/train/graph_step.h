/* The training step as a CUDA graph (run.cuda_graph): once the step's shapes repeat (the memory
 * full, the same rows as the step before), the device's part of it, forward, backward, the
 * gradient's norm and the fused update, is captured once and then replayed: one launch a step
 * instead of one per kernel and GEMM. What changes from step to step is read by the kernels from
 * device memory that the host refreshes before each launch, by uploads that do not wait for the
 * device: the tokens and targets and the step of the dropout masks (txl_run_upload), the update's
 * constants (txl_optim_prepare); the norm and clip factor are made on the device anyway
 * (kernels/common/clip.h). The loss goes to a buffer of the graph's own and from there, by a
 * device copy, to the step's place among the losses waiting for the host. With several ranks the
 * NCCL all-reduce of the gradient (and the gather of the embedding's rows) is captured with the
 * step. So the replay gives
 * the uncaptured step's numbers, bit for bit (tests/cuda/test_graph.sh, on the emulator).
 *
 * A run qualifies when every kernel argument of its step is the same from step to step apart from
 * those: the rules that say which runs do not, each with its reason, are one table in
 * graph_step.c (txl_graph_step_why_not decides, txl_graph_step_print_rules lists them). */
#ifndef TXL_TRAIN_GRAPH_STEP_H
#define TXL_TRAIN_GRAPH_STEP_H

#include <stddef.h>
#include <stdio.h>

#include "src/config/config.h"
#include "src/device/backend.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/train/embed_gather.h"

typedef struct {
  int on;          /* the run captures and replays its steady steps */
  void *graph;     /* the captured step; NULL before the first steady step or when stale */
  int L;           /* its rows */
  long moves;      /* txl_backend_scratch_moves at its capture */
  int n_groups;    /* the run's column groups */
  double *loss;    /* [n_groups] device: the captured step's loss sum of each group (run.loss_out) */
  long captures, replays; /* since the run started */
} TxlGraphStep;

/* 0 when a run of config c (its model dm) on backend b with `world` ranks can replay its step as a
 * graph, else 1 with the first reason in why (no final full stop). fault: the TXL_TRAIN_FAULT test
 * hook is set (it writes into the gradient between the backward pass and the clipping). */
int txl_graph_step_why_not(const TxlConfig *c, const TxlDims *dm, const TxlBackend *b, int world, int fault,
                           char *why, size_t n);

/* Every rule of txl_graph_step_why_not, one reason a line (txl-train --help). */
void txl_graph_step_print_rules(FILE *f);

/* on: whether the run captures (txl_graph_step_why_not said 0 and run.cuda_graph is not off). */
void txl_graph_step_init(TxlGraphStep *g, const TxlOps *ops, int on, int n_groups);
void txl_graph_step_destroy(TxlGraphStep *g, const TxlBackend *b, const TxlOps *ops);

/* 1 when the training step about to run on r (L rows) is replayed: g->on, the memory full, the
 * step before of the same shape (uncaptured or replayed: whatever it made lazily is made), and the
 * gradient zero (the last update left it so). */
int txl_graph_step_ready(const TxlGraphStep *g, const TxlModel *m, const TxlRun *r, int mem_len, int L);

/* One training step (txl_train_grad, txl_train_clip, the optimizer's update with rate lr), as the
 * graph: the inputs and the update's constants uploaded, the graph captured first when there is
 * none or it is stale (txl_backend_scratch_moves changed), launched, and the step's loss sums
 * (one a column group) copied to loss_slot[0, n_groups) (device) for the host to read later. The host does not wait. With several
 * ranks (reducer not NULL: NCCL's, whose buckets and gather run on the communication stream and
 * join the compute stream through events, dist/nccl.h) the collectives are captured with the
 * rest, forked onto that stream and joined back, so the replay overlaps them with the backward
 * pass as the uncaptured step does; gather: the embedding's rows (src/train/embed_gather.h) or
 * NULL. */
void txl_graph_step_run(TxlGraphStep *g, const TxlBackend *b, TxlModel *m, TxlRun *r, TxlAdam *a, float lr, int step,
                        int batch_global, TxlReducer *reducer, TxlEmbedGather *gather, double loss_scale,
                        const int32_t *inputs, const int32_t *targets, int L, double *loss_slot);

#endif
