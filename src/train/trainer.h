/* One training job: the resolved config, this rank's device and data, the model, the
 * optimizer, and the loops that train, evaluate, generate and benchmark. */
#ifndef TXL_TRAIN_TRAINER_H
#define TXL_TRAIN_TRAINER_H

#include "data/corpus.h"
#include "src/base/zipf.h"
#include "dist/dist.h"
#include "dist/reduce.h"
#include "src/checkpoint/checkpoint.h"
#include "src/config/config.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/optim/loss_scale.h"
#include "src/train/config_map.h"
#include "src/train/graph_step.h"
#include "src/optim/schedule.h"
#include "src/device/backend.h"
#include "src/train/embed_gather.h"
#include "src/train/estimate.h"
#include "src/train/report.h"

typedef struct {
  TxlConfig cfg;
  TxlDist dist;
  TxlBackend backend;  /* the device of this rank */
  const TxlOps *ops;   /* backend.ops */
  int threads;         /* backend.threads: CPU threads of this rank */
  TxlCorpus *corpus;   /* NULL in bench mode */
  TxlModel model;
  TxlRun run;          /* training run state */
  TxlAdam adam;
  TxlReducer *reducer; /* gradient all-reduce; NULL with one rank */
  TxlShardPlan shard;  /* dist.shard_optimizer on several ranks: the slices (lo NULL: not sharded) */
  TxlEmbedGather *gather; /* the word embedding's input-side rows (embed_gather.h); NULL: none */
  TxlSchedule sched;
  TxlLossScale scaler; /* train.loss_scale (off: S = 1) */
  int step_skipped;    /* the last txl_trainer_step skipped its update (dynamic loss scaling) */
  int step_nonfinite;  /* it met a non-finite loss or gradient and updated nothing (the same; the
                          caller stops: txl_trainer_train) */
  /* The step's loss left on the device (run.loss_out) until the host needs it, so that a step
   * does not wait for the device: on unless the loss scaling is dynamic (a step there must see its
   * loss at once, see txl_trainer_step). Read by txl_trainer_losses. */
  int loss_defer;
  int loss_cap, loss_pending; /* steps the buffers hold, steps in them now */
  double *loss_dev;    /* [loss_cap, column groups] device: each pending step's loss sums */
  double *loss_host;   /* [loss_cap, column groups] host copy */
  int *loss_rows;      /* [loss_cap] each pending step's rows (its tokens: rows x batch_size) */
  double *loss_steps;  /* [loss_cap] host: the steps' losses txl_trainer_losses gives */
  /* Steps since the host last read the clipping record (adam.rec: their norms, whether one was
   * not finite): with loss_defer the host reads it with the losses, at progress lines,
   * evaluations, checkpoints and stops (txl_trainer_train), so that no step waits for the device;
   * without, after every step. last_norm: the norm it read last. */
  int unseen;
  double last_norm;
  TxlGraphStep graph;  /* run.cuda_graph: the step captured once and replayed (graph_step.h) */
  TxlReport report;
  /* The training loop's resumable state, as checkpoints hold it (src/checkpoint/checkpoint.h),
   * kept here and saved and resumed whole: step (updates done), tokens_seen (global training
   * tokens consumed), data_pos (row of the next training segment in every column), epoch
   * (completed passes over the training split), best_valid_loss (+inf until the first
   * validation), best_step (its step, -1 before), last_eval_step (the latest validation's, -1
   * before), progress (the sums since the last progress line), run_id (the lineage of the run's
   * checkpoints, src/checkpoint/FORMAT.md). Its other fields hold the state of the parts that
   * own it (run.mem_rows, adam.t, sched, scaler, the config's seed and optim, the corpus's
   * vocab_digest): a save fills them in from those, a resume hands them back to them. */
  TxlCkptState st;
  int B_local, col0;
  int64_t last_save_step; /* step of the newest checkpoint, -1 before */
  int stop_at;         /* > 0: stop after this step as if signalled (--stop-at) */
  int fault_step, fault_tensor; /* the TXL_TRAIN_FAULT test hook: update and tensor (0: none) */
  int fault_drift;     /* the hook's kind: 0 an infinite gradient, 1 a parameter drifting on the last rank */
  TxlMemEstimate estimate; /* this rank's memory, worked out before allocating */
  TxlTailCap train_tail, eval_tail; /* this rank's tail targets per segment (training; validation and
                                       test), counted in the corpus at setup; not known in --bench */
} TxlTrainer;

/* What a trainer is set up for: training, --bench (synthetic tokens, no corpus needed, no work
 * folder), or --bench --profile (the same with the device profile's table, src/device/backend.h:
 * the CUDA backend only). */
enum { TXL_SETUP_TRAIN = 0, TXL_SETUP_BENCH = 1, TXL_SETUP_PROFILE = 2 };

/* Builds everything from a validated config for `mode` (TXL_SETUP_*); corpus may be NULL
 * (bench: synthetic tokens). collective: all ranks */
void txl_trainer_setup(TxlTrainer *t, const TxlConfig *cfg, const TxlDist *dist, int mode);
void txl_trainer_teardown(TxlTrainer *t);

/* Trains for max_step updates, validating every eval_interval and testing at the end; writes
 * <work_dir>/config.ini first (a fresh run has refused a work_dir holding checkpoints at setup).
 * Stops every rank with one error when a step's loss or gradient is not
 * finite (nothing of that step is kept) or a line of metrics.jsonl cannot be written (after
 * trying a checkpoint). collective: all ranks */
void txl_trainer_train(TxlTrainer *t);

/* Mean loss (nats per token) over a split with the evaluation settings; max_segments < 0: all.
 * tokens_out: tokens scored (global). collective: all ranks */
double txl_trainer_evaluate(TxlTrainer *t, const char *split, int max_segments, double *tokens_out);

/* Prints sample_tokens generated tokens (rank 0 computes; the others wait). collective: all ranks */
void txl_trainer_generate(TxlTrainer *t);

/* Runs `steps` training steps on synthetic tokens after `warmup` untimed ones and prints
 * tokens/s, ms/step and the share of the measured fp32 GEMM peak. collective: all ranks */
void txl_trainer_bench(TxlTrainer *t, int steps, int warmup);

/* --bench's synthetic tokens (bench.c): TXL_BENCH_SEGMENTS segments of Zipf-distributed ids
 * (src/base/zipf.h: the shares of text, so the adaptive softmax's clusters get a corpus's load),
 * keyed by (row, global column, segment, seed) and so the same on every rank count; step s takes
 * segment s % TXL_BENCH_SEGMENTS. tok [(L + 1), B]: this rank's columns col0.. (L: tgt_len). */
#define TXL_BENCH_SEGMENTS 64
void txl_bench_tokens(const TxlConfig *c, const TxlZipf *z, int L, int col0, int B, int segment, int32_t *tok);
/* The most targets of each tail cluster in one column group (group_cols columns) of any of those
 * segments (of L rows): a run's tail caps, as a corpus's count gives them (src/train/tail_cap.h). */
void txl_bench_tail_caps(const TxlConfig *c, const TxlDims *dm, int L, int col0, int B, int group_cols,
                         TxlTailCap *cap);

/* Continues from the checkpoint named by run.resume (auto / a file / a directory): checks that
 * the model's shape keys match (else an error listing them), prints the keys that changed, and
 * loads parameters, Adam moments, memory, step and data position. Returns 1 when it resumed,
 * 0 when starting fresh. collective: all ranks */
int txl_trainer_resume(TxlTrainer *t);
/* Writes <work_dir>/ckpt-<step>.h5, moves "latest" (and "best" when is_best) to it, keeps the
 * newest keep_checkpoints of this run's lineage and the best (another run's checkpoints are
 * neither deleted nor overwritten). A failure is one error on every rank. collective: all ranks */
void txl_trainer_save(TxlTrainer *t, int is_best);
/* txl_trainer_save that returns 0, or -1 on every rank with the reason in err (on rank 0; the
 * other ranks get a generic line), for a run that stops anyway. collective: all ranks */
int txl_trainer_try_save(TxlTrainer *t, int is_best, char *err, size_t errlen);
/* The resolved config as INI text (malloc'd; the caller frees it), as stored in checkpoints and
 * written to <work_dir>/config.ini. */
char *txl_trainer_config_text(const TxlConfig *c);

/* Writes the parameters as raw float32 in table order to path (rank 0; atomically: a temporary
 * name, then rename). collective: all ranks */
void txl_trainer_dump_params(TxlTrainer *t, const char *path);

/* One training step on [L, B_local] tokens: forward, backward, all-reduce, clip, Adam; t->step
 * counts it. Returns the global mean loss, or 0 when t->loss_defer: the loss then waits on the
 * device for txl_trainer_losses (at most loss_cap steps: read before that), and the gradient's
 * norm in the optimizer's record (t->adam.rec) for txl_trainer_look, so that nothing here waits
 * for the device. A non-finite gradient norm halts the updates on the device from that step on
 * (kernels/common/clip.h: nothing more is written) until the host sees it and stops the run
 * (txl_trainer_train); a non-finite loss comes with a non-finite gradient (a NaN or infinite
 * logit, a NaN softmax gradient). Under dynamic loss scaling (no deferral) the host reads the
 * record at once: a non-finite gradient is skipped (t->step_skipped; the step counts as done), and
 * a non-finite loss, or a non-finite gradient at S = 1, updates nothing and leaves t->step as it
 * was (t->step_nonfinite: the caller stops).
 * Test hook: TXL_TRAIN_FAULT=inf_grad:STEP:TENSOR puts an infinity into the first
 * element of TENSOR's gradient in update STEP (counted from 1, as messages count), on every rank
 * after the all-reduce: a non-finite gradient with a finite loss (tests/train/test_nonfinite.sh);
 * TXL_TRAIN_FAULT=drift:STEP:TENSOR moves that element of the parameters by one ulp on the last
 * rank after update STEP: replicas that differ (tests/train/test_replica_check.sh).
 * collective: all ranks */
double txl_trainer_step(TxlTrainer *t, const int32_t *inputs, const int32_t *targets, int L);

/* What the steps since the host last looked left on the device (t->unseen of them): their losses
 * when deferred (txl_trainer_losses; their sum added to *loss_sum when it is not NULL) and the
 * clipping record (t->last_norm). Returns 0, or the number of the first of them whose gradient
 * norm was not finite, with its loss and norm in *bad_loss, *bad_norm (the updates halted there:
 * the parameters are those before it). The same on every rank. collective: all ranks */
int txl_trainer_look(TxlTrainer *t, double *loss_sum, double *bad_loss, double *bad_norm);


/* The global mean loss of each step whose loss waits on the device (t->loss_defer), oldest
 * first, into out [loss_cap]; returns how many (none waits afterwards). One copy to the host,
 * then txl_train_grad's own arithmetic (the column groups' sums added in order, summed over the
 * ranks, divided by the step's tokens): the bits it returns without deferral. collective: all ranks */
int txl_trainer_losses(TxlTrainer *t, double *out);

#endif
