#include "src/train/trainer.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/launcher.h"
#include "dist/shard.h"
#include "kernels/cpu/threads.h"
#include "src/base/stop.h"
#include "src/base/timer.h"
#include "src/model/gemm_of.h"
#include "src/train/estimate.h"
#include "data/varlen.h"
#include "src/train/evaluate.h"
#include "src/train/step.h"
#include "src/train/tail_cap.h"
#include "data/stream.h"
#include "src/base/file.h"
#include "src/train/workdir.h"

/* ---- setup -------------------------------------------------------------------------------- */

/* Steps whose losses may wait on the device before the host reads them (with a longer
 * log_interval they are read in between): it bounds the loss buffers (8 KiB per column group on
 * the device and on the host) and how long a loss waits; not a tuned figure. */
#define MAX_DEFERRED_LOSSES 1024

static int is_char_level(const TxlTrainer *t) {
  return t->corpus && txl_corpus_char_level(t->corpus);
}

/* Printed before anything large is allocated: what runs where, the config, the model's size
 * and the memory estimate. */
static void print_summary(const TxlTrainer *t, int bench) {
  if (t->dist.rank != 0) return;
  const TxlConfig *c = &t->cfg;
  const TxlMemEstimate *e = &t->estimate;
  char n_all[32], n_ne[32];
  txl_format_count((long long)e->n_params, n_all, sizeof n_all);
  txl_format_count((long long)e->n_params_ne, n_ne, sizeof n_ne);
  printf("txl-train: %d rank%s x %d thread%s on %s (%s)\n", t->dist.world, t->dist.world > 1 ? "s" : "",
         t->threads, t->threads > 1 ? "s" : "", t->backend.device, t->dist.host);
  if (t->corpus) {
    char tr[32];
    txl_format_count((long long)txl_corpus_split_length(t->corpus, "train"), tr, sizeof tr);
    printf("corpus: %s (%s level, vocabulary %lld, train %s tokens)\n", txl_corpus_path(t->corpus),
           txl_corpus_mode(t->corpus), (long long)txl_corpus_vocab_size(t->corpus), tr);
  } else if (bench) {
    printf("corpus: none (benchmark on synthetic tokens: Zipf-distributed ids of a vocabulary of %d)\n", c->n_token);
  }
  if (t->backend.gpu_rule[0]) printf("gpus: %s\n", t->backend.gpu_rule);
  printf("resolved config (# marks values that differ from the defaults):\n");
  txl_config_write_ini(c, stdout, 1);
  printf("model: %s parameters (%s without embeddings); %.3g MFLOP per trained token\n", n_all, n_ne,
         e->flops_per_token / 1e6);
  txl_memory_print(e, stdout);
  if (c->batch_size % t->dist.world == 0)
    printf("columns: %d global, %d on each rank; %d rows per step, memory %d rows\n", c->batch_size, t->B_local,
           c->tgt_len, c->mem_len);
  else
    printf("columns: %d global, %d or %d on each rank (the first %d ranks hold one more); %d rows per step, memory "
           "%d rows\n", c->batch_size, c->batch_size / t->dist.world, txl_shard_max(c->batch_size, t->dist.world),
           c->batch_size % t->dist.world, c->tgt_len, c->mem_len);
  txl_groups_print(c, t->B_local, stdout);
  char warning[700];
  if (!bench && txl_launcher_stop_warning(txl_launcher_detect(), e->staging, warning, sizeof warning))
    printf("%s\n", warning);
  fflush(stdout);
}

/* Refuses, with one line on every rank, a run whose estimate exceeds what this node's host
 * memory (MemAvailable or the cgroup's limit, shared by the node's ranks) or the rank's GPU can
 * give, before allocating any of it. collective: all ranks */
static void check_memory(const TxlTrainer *t) {
  const TxlMemEstimate *e = &t->estimate;
  const char *source = "";
  const double avail = txl_memory_available(&source);
  const double need = e->host * t->dist.local_size;
  char msg[768] = "", a[32], b[32], each[32];
  int short_of_memory = 0;
  const char *advice = "fewer columns per rank at once (train.batch_chunk, or train.batch_size, or more ranks on "
                       "more nodes), a shorter train.tgt_len or train.mem_len, or a smaller model";
  if (avail >= 0 && need > avail) {
    txl_format_bytes(need, a, sizeof a);
    txl_format_bytes(avail, b, sizeof b);
    txl_format_bytes(e->host, each, sizeof each);
    if (t->dist.local_size > 1)
      snprintf(msg, sizeof msg, "not enough memory: the %d ranks on %s need about %s of host memory (%s each, "
               "estimated above) and %s is available (%s); use %s", t->dist.local_size, t->dist.host, a, each, b,
               source, advice);
    else
      snprintf(msg, sizeof msg, "not enough memory: this run needs about %s of host memory (estimated above) and "
               "%s is available (%s); use %s", a, b, source, advice);
    short_of_memory = 1;
  } else if (e->on_gpu && t->backend.free_bytes > 0 && e->device > t->backend.free_bytes) {
    txl_format_bytes(e->device, a, sizeof a);
    txl_format_bytes(t->backend.free_bytes, b, sizeof b);
    snprintf(msg, sizeof msg, "not enough GPU memory: this rank needs about %s on %s (estimated above) and %s is "
             "free; use %s, or run.precision = bf16 (fp16 on a GPU older than sm_80)", a, t->backend.device, b, advice);
    short_of_memory = 1;
  }
  txl_fatal_if_any(short_of_memory, "%s", msg);
}

/* The test hook of txl_trainer_step (trainer.h): TXL_TRAIN_FAULT=inf_grad:STEP:TENSOR or
 * drift:STEP:TENSOR, read once at setup into t->fault_step, t->fault_tensor and t->fault_drift. */
static void read_fault(TxlTrainer *t) {
  txl_ckpt_fault_from_env();
  t->fault_step = 0;
  const char *f = getenv("TXL_TRAIN_FAULT");
  if (!f || !*f) return;
  int step = 0, len = 0;
  char kind[16], name[64];
  if (sscanf(f, "%15[^:]:%d:%63[^:]%n", kind, &step, name, &len) != 3 || f[len] || step < 1 ||
      (strcmp(kind, "inf_grad") && strcmp(kind, "drift")))
    txl_fatal_all("TXL_TRAIN_FAULT=%s: expected inf_grad:STEP:TENSOR or drift:STEP:TENSOR", f);
  t->fault_drift = strcmp(kind, "drift") == 0;
  const TxlParamTable *tab = &t->model.table;
  for (int i = 0; i < tab->n_tensors; i++)
    if (strcmp(tab->tensors[i].name, name) == 0) {
      t->fault_step = step;
      t->fault_tensor = i;
      return;
    }
  txl_fatal_all("TXL_TRAIN_FAULT=%s: the model has no tensor %s", f, name);
}

void txl_trainer_setup(TxlTrainer *t, const TxlConfig *cfg, const TxlDist *dist, int mode) {
  memset(t, 0, sizeof *t);
  t->cfg = *cfg;
  t->dist = *dist;
  const TxlConfig *c = &t->cfg;
  const int bench = mode != TXL_SETUP_TRAIN;

  const TxlDeviceSpec device_spec = txl_device_spec_of(c);
  txl_backend_open(&t->backend, &device_spec, dist, 1);
  /* the events a profiled step may take: one per run of one family's calls, a few per layer and
   * direction (a step that takes more says so in the table) */
  if (mode == TXL_SETUP_PROFILE && !txl_backend_profile_open(&t->backend, 1 << 15))
    txl_fatal_all("--profile: the %s backend has no device profile (run.device = cuda has: it times each op family "
                  "with CUDA events)", t->backend.device);
  t->ops = t->backend.ops;
  t->threads = t->backend.threads;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (dist->rank == 0 && (long)t->threads * dist->local_size > cores) {
    fprintf(stderr,
            "txl: warning: %d ranks x %d threads on a node with %ld cores: oversubscribed, expect slow steps\n",
            dist->local_size, t->threads, cores);
  }

  int n_token = c->n_token;
  if (!bench || *c->corpus) {
    if (!*c->corpus) txl_fatal_all("data.corpus is not set (make one with txl-prep, see README)");
    t->corpus = txl_stream_corpus_open(c->corpus);
    int64_t v = txl_corpus_vocab_size(t->corpus);
    if (c->n_token > 0 && c->n_token != v)
      txl_fatal_all("%s: vocabulary of %lld tokens, but data.n_token = %d", c->corpus, (long long)v, c->n_token);
    n_token = (int)v;
    txl_stream_check_length(t->corpus, "train", c->batch_size, c->tgt_len);
    txl_stream_check_length(t->corpus, "valid", c->eval_batch_size, 1);
    txl_stream_check_length(t->corpus, "test", c->eval_batch_size, 1);
    txl_stream_corpus_check(t->corpus, dist->rank, dist->world, 1); /* a damage found now, not after training */
  } else if (n_token <= 0) {
    txl_fatal_all("--bench without data.corpus needs data.n_token > 0 (the synthetic vocabulary)");
  }
  t->cfg.n_token = n_token;

  t->st.best_valid_loss = INFINITY;
  t->st.best_step = -1;
  t->last_save_step = -1;
  t->st.last_eval_step = -1;
  txl_shard(c->batch_size, dist->world, dist->rank, &t->B_local, &t->col0);

  TxlModelSpec spec;
  txl_model_spec_from_config(c, n_token, &spec);
  /* the adaptive softmax's tail targets per segment, counted in this rank's columns (--bench: in
   * its synthetic segments; it runs no evaluation); the estimate takes every rank's largest */
  TxlTailCap train_all = {0}, eval_all = {0};
  double count_s = txl_now_s();
  if (!bench) {
    txl_tail_caps_of_config(c, t->corpus, &spec.dims, dist->world, dist->rank, &t->train_tail, &t->eval_tail);
  } else { /* the evaluation run it does not make: for the estimate */
    int groups, group_cols, Be, ce;
    const TxlRunShape ts = txl_train_run_shape(c, t->B_local, t->col0);
    txl_run_groups(&ts, &groups, &group_cols);
    txl_bench_tail_caps(c, &spec.dims, c->tgt_len, t->col0, t->B_local, group_cols, &t->train_tail);
    txl_shard(c->eval_batch_size, dist->world, dist->rank, &Be, &ce);
    txl_bench_tail_caps(c, &spec.dims, c->eval_tgt_len, ce, Be, Be, &t->eval_tail);
  }
  train_all = t->train_tail;
  eval_all = t->eval_tail;
  if (dist->world > 1) {
    txl_dist_allreduce_max_i32(train_all.n, TXL_MAX_CLUSTERS);
    txl_dist_allreduce_max_i32(eval_all.n, TXL_MAX_CLUSTERS);
  }
  count_s = txl_now_s() - count_s;

  /* estimate first, print it, and refuse what cannot fit: nothing large is allocated yet */
  txl_memory_estimate(c, n_token, t->ops, dist->world, &train_all, &eval_all, &t->estimate);
  t->estimate.tail_synthetic = bench;
  print_summary(t, bench);
  if (spec.dims.n_clusters > 0 && dist->rank == 0) {
    char tr[96], ev[96];
    const TxlRunShape most = txl_train_run_shape(c, txl_shard_max(c->batch_size, dist->world), 0);
    int groups, group_cols;
    txl_run_groups(&most, &groups, &group_cols);
    txl_tail_cap_format(&train_all, &spec.dims, tr, sizeof tr);
    txl_tail_cap_format(&eval_all, &spec.dims, ev, sizeof ev);
    if (!bench)
      printf("adaptive softmax: the most targets of each tail cluster in any segment (counted in the corpus in %.2f s, "
             "the largest of any rank's): training %s of %d; evaluation %s of %d\n", count_s, tr,
             most.L_max * group_cols, ev, c->eval_tgt_len * txl_shard_max(c->eval_batch_size, dist->world));
    else
      printf("adaptive softmax: the most targets of each tail cluster in any segment (counted in the %d synthetic "
             "segments, the largest of any rank's): %s of %d\n", TXL_BENCH_SEGMENTS, tr, most.L_max * group_cols);
    fflush(stdout);
  }
  check_memory(t);

  txl_model_create(&t->model, t->ops, &spec);
  if (t->backend.profiled)
    txl_backend_profile_model(&t->backend, txl_model_gemm_of, &t->model, t->model.grad_buf,
                              (size_t)t->model.table.total * sizeof(float));
  txl_model_init_params(&t->model, (float)c->init_std, (float)c->proj_init_std, (uint32_t)c->seed);
  read_fault(t);

  TxlRunShape ts = txl_train_run_shape(c, t->B_local, t->col0);
  ts.tail = t->train_tail;
  txl_run_create(&t->run, &t->model, &ts);
  t->reducer = txl_backend_reducer(&t->backend, dist, c->bucket_mb, c->overlap_comm, t->model.grad_buf,
                                   t->model.table.total);
  t->gather = txl_embed_gather_create(&t->model, &t->run, t->reducer, c->embed_rows);
  txl_adam_create(&t->adam, t->ops, t->model.table.total, (float)c->beta1, (float)c->beta2, (float)c->adam_eps,
                  (float)c->clip);
  txl_optim_set_kind(&t->adam, txl_optim_kind_of(c->optim), (float)c->momentum, (float)c->weight_decay,
                     &t->model.table);
  if (c->shard_optimizer && t->reducer) { /* ZeRO-1 (src/optim/shard.h); one rank has nothing to shard */
    txl_shard_plan_make(&t->shard, t->ops, &t->model.table, dist->world);
    txl_reducer_set_owners(t->reducer, t->shard.lo);
    txl_optim_shard(&t->adam, &t->shard, dist->rank);
    if (dist->rank == 0) {
      const double mib = 2.0 * sizeof(float) / 1048576.0;
      printf("optimizer state: sharded over %d ranks (dist.shard_optimizer): the moments of at most %lld of %lld "
             "parameters on a rank, %.1f MiB instead of %.1f\n", dist->world,
             (long long)txl_shard_plan_max_slice(&t->shard), (long long)t->model.table.total,
             mib * (double)txl_shard_plan_max_slice(&t->shard), mib * (double)t->model.table.total);
      fflush(stdout);
    }
  }
  { /* run.cuda_graph */
    char why[256] = "";
    const int no = txl_graph_step_why_not(c, &t->model.spec.dims, &t->backend, dist->world, t->fault_step != 0, why,
                                          sizeof why);
    if (c->cuda_graph == TXL_CUDA_GRAPH_ON && no) txl_fatal_all("run.cuda_graph = on, but %s", why);
    txl_graph_step_init(&t->graph, t->ops, c->cuda_graph != TXL_CUDA_GRAPH_OFF && !no, t->run.n_groups);
    if (dist->rank == 0 && t->backend.gpu >= 0) {
      printf("cuda graph: %s%s\n", t->graph.on ? "on: the step captured once its shapes repeat, then replayed" : "off: ",
             t->graph.on ? "" : (c->cuda_graph == TXL_CUDA_GRAPH_OFF ? "run.cuda_graph = off" : why));
      fflush(stdout);
    }
  }
  txl_schedule_from_config(c, &t->sched);
  txl_schedule_plateau_init(&t->sched); /* txl_trainer_resume may replace it */
  txl_loss_scale_init(&t->scaler, txl_trainer_loss_scale_mode(c), c->loss_scale_init, c->loss_scale_window);
  /* the steps' losses wait on the device for the next progress line (at most log_interval steps,
   * and at most MAX_DEFERRED_LOSSES: read earlier then) */
  t->loss_defer = t->scaler.mode != TXL_LOSS_SCALE_DYNAMIC;
  t->loss_cap = c->log_interval < MAX_DEFERRED_LOSSES ? c->log_interval : MAX_DEFERRED_LOSSES;
  const size_t loss_n = (size_t)t->loss_cap * (size_t)t->run.n_groups;
  t->loss_dev = t->ops->alloc(loss_n * sizeof(double), "step losses");
  t->loss_host = txl_malloc(loss_n * sizeof(double), "step losses (host)");
  t->loss_rows = txl_malloc((size_t)t->loss_cap * sizeof(int), "step rows");
  t->loss_steps = txl_malloc((size_t)t->loss_cap * sizeof(double), "step losses (host)");
  if (!bench) {
    txl_workdir_open(c->work_dir, dist);
    /* before anything is written there; with run.resume = auto a folder holding checkpoints is
     * resumed (txl_ckpt_find), and one holding none has nothing to refuse */
    if (!*c->resume) txl_workdir_refuse_checkpoints(c->work_dir, dist);
    txl_report_open(&t->report, c->work_dir, dist->rank, is_char_level(t), c->tensorboard);
  }
  if (!bench) { /* the bar any model must clear: the validation split's unigram entropy */
    double bits = 0.0;
    char err[1024] = "";
    const int failed = dist->rank == 0 && txl_corpus_unigram_entropy_bits(t->corpus, "valid", &bits, err, sizeof err) != 0;
    txl_fatal_if_any(failed, "%s", err);
    if (dist->rank == 0) txl_report_baseline(&t->report, "valid", bits);
  }
}

void txl_trainer_teardown(TxlTrainer *t) {
  txl_report_close(&t->report);
  if (t->loss_dev) t->ops->free(t->loss_dev);
  free(t->loss_host);
  free(t->loss_rows);
  free(t->loss_steps);
  txl_graph_step_destroy(&t->graph, &t->backend, t->ops);
  txl_adam_destroy(&t->adam);
  txl_shard_plan_free(&t->shard);
  txl_embed_gather_destroy(t->gather, &t->model);
  txl_reducer_destroy(t->reducer);
  txl_run_destroy(&t->run, &t->model);
  txl_model_destroy(&t->model);
  if (t->corpus) txl_corpus_close(t->corpus);
  txl_backend_close(&t->backend);
}

/* ---- one step ----------------------------------------------------------------------------- */

/* An infinity into the first element of the chosen tensor's gradient, in the chosen update. */
static void inject_fault(TxlTrainer *t) {
  if (t->fault_step != t->st.step + 1 || t->fault_drift) return;
  const float inf = INFINITY;
  t->ops->to_device(t->model.grad_buf + t->model.table.tensors[t->fault_tensor].offset, &inf, sizeof inf);
}

/* TXL_TRAIN_FAULT=drift: after update STEP the last rank's first element of TENSOR moves by one
 * ulp, as a broken all-reduce would leave it (the replica check must stop the run). */
static void drift_fault(TxlTrainer *t) {
  if (!t->fault_drift || t->fault_step != t->st.step || t->dist.rank != t->dist.world - 1) return;
  float *p = t->model.param_buf + t->model.table.tensors[t->fault_tensor].offset, v;
  t->ops->to_host(&v, p, sizeof v);
  v = nextafterf(v, INFINITY);
  t->ops->to_device(p, &v, sizeof v);
  txl_model_params_changed(&t->model);
}

double txl_trainer_step(TxlTrainer *t, const int32_t *inputs, const int32_t *targets, int L) {
  txl_dist_set_step(t->st.step + 1); /* named if a collective times out */
  const double scale = t->scaler.scale;
  const int defer = t->loss_defer; /* always, when the step is replayed (graph_step.h) */
  if (defer && t->loss_pending >= t->loss_cap)
    txl_fatal("internal: %d step losses wait on the device, room for %d (txl_trainer_losses)", t->loss_pending,
              t->loss_cap);
  if (txl_graph_step_ready(&t->graph, &t->model, &t->run, t->cfg.mem_len, L)) { /* graph_step.h */
    txl_graph_step_run(&t->graph, &t->backend, &t->model, &t->run, &t->adam, (float)txl_schedule_lr(&t->sched, t->st.step),
                       t->st.step, t->cfg.batch_size, t->reducer, t->gather, scale, inputs, targets, L,
                       t->loss_dev + (size_t)t->loss_pending * (size_t)t->run.n_groups);
    t->loss_rows[t->loss_pending++] = L;
    t->unseen++;
    t->step_skipped = t->step_nonfinite = 0;
    t->st.step++;
    return 0.0;
  }
  if (defer) t->run.loss_out = t->loss_dev + (size_t)t->loss_pending * (size_t)t->run.n_groups;
  const double loss = txl_train_grad(&t->model, &t->run, t->st.step, t->cfg.batch_size, t->reducer, t->gather, inputs, targets,
                                     L, scale);
  t->run.loss_out = NULL;
  if (defer) t->loss_rows[t->loss_pending++] = L;
  inject_fault(t);
  txl_train_clip(&t->model, &t->adam, t->reducer, scale); /* the norm and clip factor, on the device */
  t->unseen++;
  t->step_skipped = t->step_nonfinite = 0;
  if (!defer) { /* dynamic loss scaling: this step's fate is decided on the host, now */
    TxlGradClip r;
    txl_optim_read_clip(&t->adam, &r);
    t->last_norm = r.bad ? r.bad_norm : r.norm;
    t->unseen = 0;
    if (r.bad) txl_optim_reset_clip(&t->adam); /* not halted: this step is skipped, or the run stops */
    /* a non-finite loss: nothing updated, the caller stops */
    if (!isfinite(loss)) {
      t->step_nonfinite = 1;
      return loss;
    }
    /* a non-finite gradient: skipped (S halved; the step counts as done), or, with S at 1 already,
     * nothing updated and the caller stops. The norm is the same on every rank: so is this. */
    if (!txl_loss_scale_after_grad(&t->scaler, r.bad == 0)) {
      t->step_skipped = 1;
      t->st.step++;
      return loss;
    }
    if (r.bad) {
      t->step_nonfinite = 1;
      return loss;
    }
  }
  txl_train_update(&t->model, &t->adam, t->reducer, &t->sched, t->st.step); /* nothing written once halted */
  t->st.step++;
  drift_fault(t);
  /* the replicas: every rank's digest of its parameters (computed where they live: 8 bytes to the
   * host, never the parameters) compared; every rank learns the same answer, rank 0 says it */
  if (t->dist.world > 1 && t->cfg.check_replicas > 0 && t->st.step % t->cfg.check_replicas == 0 &&
      !txl_dist_all_equal_u64(t->ops->digest(t->model.param_buf, t->model.table.total)))
    txl_fatal_all("after step %lld the ranks hold different parameters (replica check): the all-reduce or "
                  "the data split is broken", (long long)t->st.step);
  return loss;
}

int txl_trainer_look(TxlTrainer *t, double *loss_sum, double *bad_loss, double *bad_norm) {
  if (t->unseen == 0) return 0;
  const int n = t->loss_defer ? txl_trainer_losses(t, t->loss_steps) : 0;
  TxlGradClip r;
  txl_optim_read_clip(&t->adam, &r);
  if (r.count != t->unseen || (t->loss_defer && n != t->unseen))
    txl_fatal("internal: %d steps unseen, the clipping record holds %d and %d losses wait", t->unseen, r.count, n);
  const int first = t->st.step - t->unseen + 1; /* the number of the oldest unseen step */
  t->unseen = 0;
  t->last_norm = r.norm;
  if (loss_sum)
    for (int k = 0; k < n && (r.bad == 0 || k < r.bad - 1); k++) *loss_sum += t->loss_steps[k];
  txl_optim_reset_clip(&t->adam);
  if (r.bad == 0) return 0;
  *bad_norm = r.bad_norm;
  *bad_loss = n >= r.bad ? t->loss_steps[r.bad - 1] : NAN;
  return first + r.bad - 1;
}

int txl_trainer_losses(TxlTrainer *t, double *out) {
  const int n = t->loss_pending, G = t->run.n_groups;
  txl_run_check_dropped(&t->model, &t->run); /* no loss is read without its targets */
  if (n == 0) return 0;
  t->ops->to_host(t->loss_host, t->loss_dev, (size_t)n * (size_t)G * sizeof(double));
  for (int k = 0; k < n; k++) {
    double sum = 0.0;
    for (int g = 0; g < G; g++) sum += t->loss_host[(size_t)k * G + g];
    if (t->reducer) txl_dist_allreduce_sum_f64(&sum, 1);
    out[k] = sum / ((double)t->loss_rows[k] * t->cfg.batch_size);
  }
  t->loss_pending = 0;
  return n;
}

/* ---- training ----------------------------------------------------------------------------- */

/* Validates; a new best is saved as a checkpoint at once (so the best is always on disk). With
 * train.scheduler = dev_perf the loss steps the schedule first, so that every checkpoint of this
 * step holds the state after it. */
static void validate(TxlTrainer *t) {
  double tokens = 0.0, t0 = txl_now_s();
  double loss = txl_trainer_evaluate(t, "valid", t->cfg.max_eval_steps, &tokens);
  t->st.last_eval_step = t->st.step; /* before the checkpoint of a new best below, which records it */
  txl_report_eval(&t->report, "valid", t->st.step, loss, tokens, txl_now_s() - t0);
  if (txl_schedule_validated(&t->sched, loss) && t->dist.rank == 0) {
    printf("dev_perf: no improvement on validation for %d validation%s: the learning rate is now %.3e\n",
           t->sched.patience + 1, t->sched.patience ? "s" : "", t->sched.plateau.rate);
    fflush(stdout);
  }
  if (loss < t->st.best_valid_loss) {
    t->st.best_valid_loss = loss;
    t->st.best_step = t->st.step;
    txl_trainer_save(t, 1);
  }
}

/* <work_dir>/config.ini: this run's resolved config, replaced atomically (a full disk leaves the
 * previous file or none, never a truncated one), and left as it is when it holds that text
 * already (a resumed run with the same config writes nothing). collective: all ranks */
static void write_config(const TxlTrainer *t) {
  char err[1400] = "";
  int failed = 0;
  if (t->dist.rank == 0) {
    char path[1100];
    snprintf(path, sizeof path, "%s/config.ini", t->cfg.work_dir);
    char *text = txl_trainer_config_text(&t->cfg);
    failed = !txl_file_holds(path, text) && txl_write_file_atomic(path, text, strlen(text), err, sizeof err) != 0;
    free(text);
  }
  txl_fatal_if_any(failed, "%s", err);
}

typedef TxlProgress Progress; /* the sums over the steps since the last progress line (report.h) */

static double comm_wait_seconds(const TxlTrainer *t) {
  return t->reducer ? txl_reducer_wait_seconds(t->reducer) : 0.0;
}

static void report_progress(TxlTrainer *t, const Progress *p, double lr, double norm, double elapsed) {
  const int timed_wait = t->reducer && txl_reducer_host_waits(t->reducer); /* MPI: the host waits */
  TxlTrainFigures f = {t->st.step,
                       t->cfg.max_step,
                       lr,
                       p->loss / p->steps,
                       norm,
                       p->tokens / p->seconds,
                       1000.0 * p->seconds / p->steps,
                       elapsed,
                       timed_wait ? p->wait / p->seconds : -1.0,
                       p->tokens,
                       t->scaler.mode == TXL_LOSS_SCALE_OFF ? 0.0 : t->scaler.scale,
                       p->skipped};
  txl_report_train(&t->report, &f);
}

/* Why the loop must stop, agreed by every rank after each step in one collective. *sig: the
 * stop request's signal (stop.h) on some rank (the largest number when several differ), or 0. */
enum { STOP_NONFINITE = 1, STOP_LOG_FAILED = 2, STOP_SIGNAL = 4 };

static int agree_on_stop(const TxlTrainer *t, int nonfinite, int *sig) {
  int v[3] = {nonfinite, txl_report_failed(&t->report), txl_stop_requested()};
  if (t->dist.world > 1) txl_dist_allreduce_max_i32(v, 3);
  *sig = v[2];
  return (v[0] ? STOP_NONFINITE : 0) | (v[1] ? STOP_LOG_FAILED : 0) | (v[2] ? STOP_SIGNAL : 0);
}

/* A stop request on any rank (the signal), agreed at a point other than a step's end (the start,
 * after a validation). collective: all ranks */
static int agree_on_request(const TxlTrainer *t) {
  int sig = txl_stop_requested();
  if (t->dist.world > 1) txl_dist_allreduce_max_i32(&sig, 1);
  return sig;
}

/* Update `step` met a NaN or an infinity in its loss or gradient (`here`: on this rank) and
 * changed nothing (nor did any update after it: halted, kernels/common/clip.h). Names the first
 * tensor of the gradient holding one (a host copy, only on this path; the gradient buffer holds
 * that step's, plus those of the steps the device ran before the host looked, which keep a
 * non-finite element non-finite) and stops every rank; no checkpoint of this state is written,
 * so the last good one stays "latest". collective: all ranks */
static void stop_on_nonfinite(TxlTrainer *t, int here, int step, double loss, double norm) {
  char msg[1600] = "";
  if (here) {
    const size_t bytes = (size_t)t->model.table.total * sizeof(float);
    float *g = txl_malloc(bytes, "gradient copy for the non-finite check");
    t->ops->to_host(g, t->model.grad_buf, bytes);
    int64_t index = 0;
    const TxlTensorInfo *bad = txl_param_first_nonfinite(&t->model.table, g, &index);
    char where[160], latest[1200], kept[1300];
    if (bad) snprintf(where, sizeof where, "first non-finite gradient: %s[%lld]", bad->name, (long long)index);
    else snprintf(where, sizeof where, "every gradient is finite");
    free(g);
    if (txl_ckpt_latest(t->cfg.work_dir, latest, sizeof latest) == 0)
      snprintf(kept, sizeof kept, "the last checkpoint, %s, stays latest", latest);
    else
      snprintf(kept, sizeof kept, "nothing of it is written (work_dir has no checkpoint yet)");
    snprintf(msg, sizeof msg,
             "step %d: the loss is %g and the gradient norm %g (%s); the parameters were not updated and %s "
             "(lower train.lr?)", step, loss, norm, where, kept);
  }
  txl_fatal_if_any(here, "%s", msg);
}

/* A line of metrics.jsonl could not be written (on rank 0): the run stops rather than train on
 * without its record, after trying a checkpoint of the steps done. collective: all ranks */
static void stop_on_log_failure(TxlTrainer *t) {
  char err[2048] = "", then[2200];
  if (t->last_save_step == t->st.step || txl_trainer_try_save(t, 0, err, sizeof err) == 0)
    snprintf(then, sizeof then, "the checkpoint of step %lld is written: resume from it once the file can be written",
             (long long)t->st.step);
  else
    snprintf(then, sizeof then, "no checkpoint of it either: %s", err);
  txl_fatal_if_any(txl_report_failed(&t->report), "%s; stopped after step %lld, %s", t->report.error,
                   (long long)t->st.step, then);
}

/* Before the run ends: the metrics made durable, and a failed write (of the last evaluation, say)
 * an error on every rank. collective: all ranks */
static void check_logs(TxlTrainer *t) {
  txl_report_sync(&t->report);
  txl_fatal_if_any(txl_report_failed(&t->report), "%s (the checkpoint of step %lld is written)", t->report.error,
                   (long long)t->st.step);
}

/* txl_trainer_look; a halted update stops every rank. collective: all ranks */
static void look_or_stop(TxlTrainer *t, Progress *p) {
  double bad_loss = 0.0, bad_norm = 0.0;
  const int bad = txl_trainer_look(t, &p->loss, &bad_loss, &bad_norm);
  if (bad) stop_on_nonfinite(t, 1, bad, bad_loss, bad_norm);
}

/* Ends the run at a stop request (signal sig) or --stop-at (sig 0): the state after the last
 * finished step checkpointed (unless it is already), the logs made durable, one line, and exit
 * status TXL_STOP_EXIT on every rank: a job script requeues on it. collective: all ranks */
static void leave_run(TxlTrainer *t, TxlStream *s, Progress *p, int sig) {
  look_or_stop(t, p); /* a halted update is found before its state is saved */
  if (t->last_save_step != t->st.step && t->st.step > 0) txl_trainer_save(t, 0);
  check_logs(t);
  if (t->dist.rank == 0) {
    const char *why = sig ? txl_stop_signal_name(sig) : "--stop-at";
    char latest[1200];
    if (txl_ckpt_latest(t->cfg.work_dir, latest, sizeof latest) != 0) latest[0] = 0;
    if (t->st.step == 0)
      printf("stopped before the first step (%s): nothing trained, nothing saved; exit status %d (requeue)\n", why,
             TXL_STOP_EXIT);
    else
      printf("stopped after step %lld (%s): checkpoint of step %lld written%s%s%s; exit status %d (requeue)\n",
             (long long)t->st.step, why, (long long)t->st.step, t->dist.world > 1 ? " by every rank" : "", latest[0] ? ", latest: " : "", latest, TXL_STOP_EXIT);
    fflush(stdout);
  }
  txl_stream_close(s);
  if (sig == SIGTERM || sig == SIGINT) {
    /* the launcher is ending the job: mpirun, aborting, no longer answers MPI_Finalize (it waits
     * odls_base_sigkill_timeout seconds, then SIGKILLs the ranks), so the ranks leave without it;
     * their checkpoint is complete (every rank passed try_save's last collective) */
    fflush(NULL);
    _exit(TXL_STOP_EXIT);
  }
  txl_trainer_teardown(t);
  txl_dist_finalize();
  exit(TXL_STOP_EXIT);
}

void txl_trainer_train(TxlTrainer *t) {
  const TxlConfig *c = &t->cfg;
  write_config(t);
  TxlStream s;
  txl_stream_open(&s, t->corpus, "train", c->batch_size, t->B_local, t->col0, txl_varlen_max_rows(c->tgt_len, c->varlen),
                  c->tgt_len);
  s.pos = t->st.data_pos;
  if (t->dist.rank == 0) {
    if (c->varlen)
      printf("training: about %lld segments per epoch (varlen: %d to %d rows, around %d), steps %lld to %d\n",
             (long long)((s.col_len - 1 + c->tgt_len - 1) / c->tgt_len), TXL_VARLEN_MIN,
             txl_varlen_max_rows(c->tgt_len, 1), c->tgt_len, (long long)t->st.step, c->max_step);
    else
      printf("training: %lld segments per epoch, steps %lld to %d\n", (long long)txl_stream_segments(&s),
             (long long)t->st.step,
             c->max_step);
    fflush(stdout);
  }
  const double t_start = txl_now_s();
  Progress *const p = &t->st.progress; /* resumed: the sums the checkpoint carried */
  /* a request during the start-up (txl_stop_install ran first thing): nothing new to train */
  const int early = agree_on_request(t);
  if (early) leave_run(t, &s, p, early);
  while (t->st.step < c->max_step) {
    const double t0 = txl_now_s(), wait0 = comm_wait_seconds(t);
    const int32_t *in, *tg;
    /* this step's rows: tgt_len, or drawn for the step (varlen) */
    const int rows = c->varlen ? txl_varlen_rows((uint32_t)c->seed, t->st.step, c->tgt_len) : c->tgt_len;
    int n = txl_stream_next_rows(&s, rows, &in, &tg);
    if (n == 0) { /* a new epoch: back to the top of every column, with an empty memory */
      txl_stream_rewind(&s);
      txl_run_reset_memory(&t->run);
      t->st.epoch++;
      n = txl_stream_next_rows(&s, rows, &in, &tg);
    }
    const double lr = txl_schedule_lr(&t->sched, t->st.step);
    const double loss = txl_trainer_step(t, in, tg, n); /* 0 when deferred (t->loss_defer) */
    /* known here only without deferral (dynamic loss scaling): nothing updated */
    const int nonfinite = t->step_nonfinite;
    if (!nonfinite) {
      p->skipped += t->step_skipped;
      t->st.data_pos = s.pos;
      t->st.tokens_seen += (int64_t)n * c->batch_size;
      p->seconds += txl_now_s() - t0;
      p->wait += comm_wait_seconds(t) - wait0;
      p->tokens += (double)n * c->batch_size;
      if (!t->loss_defer) p->loss += loss;
      p->steps++;
    }
    const int log = !nonfinite && (t->st.step % c->log_interval == 0 || t->st.step == c->max_step);
    const int eval = !nonfinite && c->eval_interval > 0 && t->st.step % c->eval_interval == 0;
    const int save = !nonfinite && c->checkpoint_interval > 0 && t->st.step % c->checkpoint_interval == 0 &&
                     t->last_save_step != t->st.step;
    /* the host reads what the steps left on the device (losses, norms) only when it reports,
     * evaluates or saves, or its buffers are full: a step never waits for the device. A halted
     * update is found there, before anything of its state is reported or saved. */
    if (log || eval || save || (!nonfinite && t->st.step == t->stop_at) || t->loss_pending == t->loss_cap)
      look_or_stop(t, p);
    if (log) {
      report_progress(t, p, lr, t->last_norm, txl_now_s() - t_start);
      *p = (Progress){0};
    }
    int sig = 0;
    const int stop = agree_on_stop(t, nonfinite, &sig);
    if (stop & STOP_NONFINITE) stop_on_nonfinite(t, nonfinite, t->st.step + 1, loss, t->last_norm);
    if (stop & STOP_LOG_FAILED) stop_on_log_failure(t);
    if (eval) { /* before a stop's checkpoint too: the resumed run starts after this step */
      validate(t);
      if (!sig) sig = agree_on_request(t); /* one that came during a long validation: no further step */
    }
    if (save && t->last_save_step != t->st.step) txl_trainer_save(t, 0);
    if (sig || t->st.step == t->stop_at) leave_run(t, &s, p, sig);
  }
  txl_stream_close(&s);
  if (t->graph.on && t->dist.rank == 0) {
    printf("cuda graph: %ld steps replayed, %ld captured (once, and again after the backend's scratch moved)\n",
           t->graph.replays, t->graph.captures);
    fflush(stdout);
  }
  if (t->st.last_eval_step != t->st.step) validate(t); /* not again when resumed at max_step */
  if (t->last_save_step != t->st.step) txl_trainer_save(t, 0);
  /* the state of the last step is written: a request from now on ends the run at once */
  char saved[300];
  snprintf(saved, sizeof saved, "stopped during the final evaluation: the checkpoint of step %lld is written; exit status %d "
           "(requeue: the next run evaluates again)", (long long)t->st.step, TXL_STOP_EXIT);
  txl_stop_exit_on_request(saved);
  if (t->cfg.final_test) {
    double tokens = 0.0, t0 = txl_now_s();
    double loss = txl_trainer_evaluate(t, "test", -1, &tokens);
    txl_report_eval(&t->report, "test", t->st.step, loss, tokens, txl_now_s() - t0);
  } else if (t->dist.rank == 0) {
    printf("test: skipped (eval.final_test = false; txl-eval %s --split test evaluates it)\n", t->cfg.work_dir);
    fflush(stdout);
  }
  check_logs(t);
}

/* ---- evaluation --------------------------------------------------------------------------- */

double txl_trainer_evaluate(TxlTrainer *t, const char *split, int max_segments, double *tokens_out) {
  const TxlConfig *c = &t->cfg;
  const TxlEvalShape es = {c->eval_tgt_len, txl_config_eval_mem_len(c), txl_config_eval_clamp_len(c),
                           c->eval_same_length, c->eval_batch_size, &t->eval_tail};
  return txl_evaluate(&t->model, t->corpus, split, &es, &t->dist, max_segments, tokens_out);
}

void txl_trainer_dump_params(TxlTrainer *t, const char *path) {
  if (t->dist.rank == 0) {
    const TxlParamTable *tab = &t->model.table;
    float *host = txl_malloc((size_t)tab->total * sizeof(float), "parameter dump");
    float *packed = txl_malloc((size_t)tab->packed * sizeof(float), "parameter dump (packed)");
    t->ops->to_host(host, t->model.param_buf, (size_t)tab->total * sizeof(float));
    txl_params_pack(tab, host, packed); /* the tensors in table order, without the padding */
    char err[1400];
    if (txl_write_file_atomic(path, packed, (size_t)tab->packed * sizeof(float), err, sizeof err) != 0)
      txl_fatal("%s", err);
    free(packed);
    free(host);
  }
  txl_dist_barrier();
}
