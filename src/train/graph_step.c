#include "src/train/graph_step.h"

#include <stdio.h>

#include "dist/dist.h"

#include "src/train/step.h"
#include "src/train/config_map.h"

/* What the rules look at. */
typedef struct {
  const TxlConfig *c;
  const TxlDims *dm;
  const TxlBackend *b;
  int world, fault;
} GraphCase;

static int on_cpu(const GraphCase *g) { return !txl_backend_can_capture(g->b); }
static int ranks_on_host(const GraphCase *g) { return g->world > 1 && !g->b->nccl; }
static int varlen(const GraphCase *g) { return g->c->varlen; }
static int position_rows(const GraphCase *g) { return txl_attn_gathers_positions(g->dm->attn_type); }
static int lamb(const GraphCase *g) { return g->c->optim == TXL_OPTIM_LAMB; }
static int dynamic_scale(const GraphCase *g) { return txl_trainer_loss_scale_mode(g->c) == TXL_LOSS_SCALE_DYNAMIC; }
static int fault_hook(const GraphCase *g) { return g->fault; }
static int profiled(const GraphCase *g) { return g->b->profiled; }

/* The rules of run.cuda_graph, the one list of them: a run qualifies when none holds; the first
 * that holds is the reason the start message gives, and --help and docs/gpu.md list them all
 * (tests/docs/test_readme.sh checks that the doc lists them, in this order). Every kernel argument of a
 * qualifying run's step is the same from step to step but what the host refreshes before each
 * launch (graph_step.h). */
static const struct {
  int (*holds)(const GraphCase *g);
  const char *reason;
} RULES[] = {
    {on_cpu, "the step runs on the CPU (CUDA graphs are a GPU's)"},
    {ranks_on_host, "it runs on several ranks without NCCL (the all-reduce waits on the host)"},
    {varlen, "train.varlen is on (the rows change from step to step)"},
    {position_rows, "model.attn_type is not rel (its position rows are uploaded in the forward)"},
    {lamb, "train.optim = lamb (its trust ratios are taken on the host)"},
    {dynamic_scale, "the loss scaling is dynamic (its scale is decided on the host after every step)"},
    {fault_hook, "TXL_TRAIN_FAULT is set (it writes into the gradient between backward and clipping)"},
    {profiled, "txl-train --profile is on (it counts and times each op's family from the host, call by call)"},
};
#define N_RULES ((int)(sizeof RULES / sizeof RULES[0]))

int txl_graph_step_why_not(const TxlConfig *c, const TxlDims *dm, const TxlBackend *b, int world, int fault,
                           char *why, size_t n) {
  const GraphCase g = {c, dm, b, world, fault};
  for (int i = 0; i < N_RULES; i++)
    if (RULES[i].holds(&g)) {
      snprintf(why, n, "%s", RULES[i].reason);
      return 1;
    }
  return 0;
}

void txl_graph_step_print_rules(FILE *f) {
  fprintf(f, "CUDA graphs (run.cuda_graph): the step is captured and replayed except where\n");
  for (int i = 0; i < N_RULES; i++) fprintf(f, "  - %s\n", RULES[i].reason);
}

void txl_graph_step_init(TxlGraphStep *g, const TxlOps *ops, int on, int n_groups) {
  *g = (TxlGraphStep){0};
  g->on = on;
  g->n_groups = n_groups;
  if (on) g->loss = ops->alloc((size_t)n_groups * sizeof(double), "the captured step's losses");
}

void txl_graph_step_destroy(TxlGraphStep *g, const TxlBackend *b, const TxlOps *ops) {
  txl_backend_graph_destroy(b, g->graph);
  if (g->loss) ops->free(g->loss);
  *g = (TxlGraphStep){0};
}

int txl_graph_step_ready(const TxlGraphStep *g, const TxlModel *m, const TxlRun *r, int mem_len, int L) {
  return g->on && r->mem_rows == mem_len && r->last_M == mem_len && r->last_L == L &&
         m->grad_zero;
}

void txl_graph_step_run(TxlGraphStep *g, const TxlBackend *b, TxlModel *m, TxlRun *r, TxlAdam *a, float lr, int step,
                        int batch_global, TxlReducer *reducer, TxlEmbedGather *gather, double loss_scale,
                        const int32_t *inputs, const int32_t *targets, int L, double *loss_slot) {
  /* what changes from step to step, into the device memory the kernels read it from */
  txl_train_upload(m, r, inputs, targets, L, step);
  txl_optim_prepare(a, lr);
  int stale = g->graph && (g->L != L || g->moves != txl_backend_scratch_moves(b));
  /* a launch of a graph holding NCCL's collectives is itself a collective: every rank captures
   * again at the same step or none does (a rank's scratch may grow alone, e.g. for its evaluation
   * shard) */
  if (reducer) txl_dist_allreduce_max_i32(&stale, 1);
  if (stale) {
    txl_backend_graph_destroy(b, g->graph);
    g->graph = NULL;
  }
  if (!g->graph) { /* the step's device work, recorded (not run) */
    r->loss_out = g->loss;
    txl_backend_capture_begin(b);
    txl_train_grad(m, r, step, batch_global, reducer, gather, inputs, targets, L, loss_scale);
    txl_train_clip(m, a, reducer, loss_scale);
    txl_train_apply(m, a, reducer);
    g->graph = txl_backend_capture_end(b);
    r->loss_out = NULL;
    g->L = L;
    g->moves = txl_backend_scratch_moves(b);
    g->captures++;
  } else { /* the host's record of the step, as the captured forward left it */
    r->last_L = L;
    r->last_M = r->mem_rows;
    r->last_step = step;
    r->last_dropout_on = 1;
    r->inputs_ready = 0;
    g->replays++;
  }
  txl_backend_graph_launch(b, g->graph);
  m->grad_zero = 1; /* the fused update zeroed it */
  m->ops->copy(loss_slot, g->loss, (size_t)g->n_groups * sizeof(double));
}
