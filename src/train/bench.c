/* txl-train --bench: training steps on synthetic tokens, timed, against the measured fp32 GEMM
 * peak of this rank's device. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "src/base/philox.h"
#include "src/base/timer.h"
#include "src/device/backend.h"
#include "src/train/bench_profile.h"
#include "src/train/tail_cap.h"
#include "src/train/trainer.h"

/* GFLOP/s of a square GEMM of the run's precision (best of a few), the ceiling the step is
 * compared with; n = 1536 on a CPU, 8192 on a GPU (large enough to fill it). The best of 7 after one
 * warm-up: with 3, a CPU's peak was measured low often enough that a step's share of it came out
 * above 100% (125% for configs/bench/medium.ini once on an AVX2 EPYC, 86% on the next run). The
 * bench takes it before and after the timed steps and keeps the larger: with 7 before only, a
 * shared machine's slow second still made it 103% once (medium, the same EPYC). */
static double gemm_peak_gflops(const TxlOps *o, int n) {
  const size_t nn = (size_t)n * n, bytes = nn * sizeof(float), abytes = nn * txl_dtype_size(o->act);
  float *f = o->alloc(bytes, "bench values");
  void *a = o->alloc(abytes, "bench A"), *b = o->alloc(abytes, "bench B"), *c = o->alloc(abytes, "bench C");
  float *h = malloc(bytes);
  if (!h) txl_fatal("out of memory for the GEMM benchmark");
  for (size_t i = 0; i < nn; i++) h[i] = (float)((i * 7919) % 1000) * 1e-3f;
  o->to_device(f, h, bytes);
  o->to_act(a, f, (int64_t)nn); /* the operands in the storage type of the run's activations */
  o->to_act(b, f, (int64_t)nn);
  double best = 1e30;
  for (int rep = 0; rep < 8; rep++) {
    double t0 = txl_now_s();
    o->gemm(0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n, o->act);
    o->to_host(h, f, sizeof(float)); /* waits for the device (every op runs in call order) */
    double dt = txl_now_s() - t0;
    if (rep > 0 && dt < best) best = dt;
  }
  free(h);
  o->free(f);
  o->free(a);
  o->free(b);
  o->free(c);
  return 2.0 * n * (double)n * n / best / 1e9;
}

/* Kernel launches, host synchronisations and graph launches of each timed step, where the
 * backend counts them (txl_backend_api_counts, txl_backend_graph_launches: the emulated CUDA
 * backend). A replayed graph's kernels are not launches of the host's. */
typedef struct {
  int steps;
  long n[3], min[3], max[3]; /* sums, least, most: launches, synchronisations, graph launches */
} StepCounts;

static void count_step(StepCounts *c, const long now[3]) {
  for (int k = 0; k < 3; k++) {
    if (c->steps == 0 || now[k] < c->min[k]) c->min[k] = now[k];
    if (c->steps == 0 || now[k] > c->max[k]) c->max[k] = now[k];
    c->n[k] += now[k];
  }
  c->steps++;
}

/* "per step: N kernel launches, M host synchronisations, G graph launches": the same in every
 * timed step, or their mean with the range. */
static void print_step_counts(const StepCounts *c) {
  if (c->steps == 0) return;
  if (c->min[0] == c->max[0] && c->min[1] == c->max[1] && c->min[2] == c->max[2])
    printf("bench: per step: %ld kernel launches, %ld host synchronisations, %ld graph launches (the same in each of "
           "the %d timed steps; counted by the CUDA emulator)\n", c->min[0], c->min[1], c->min[2], c->steps);
  else
    printf("bench: per step: %.1f kernel launches, %.1f host synchronisations, %.1f graph launches (mean of the %d "
           "timed steps: launches %ld to %ld, synchronisations %ld to %ld, graph launches %ld to %ld; counted by the "
           "CUDA emulator)\n", (double)c->n[0] / c->steps, (double)c->n[1] / c->steps, (double)c->n[2] / c->steps,
           c->steps, c->min[0], c->max[0], c->min[1], c->max[1], c->min[2], c->max[2]);
}

void txl_bench_tokens(const TxlConfig *c, const TxlZipf *z, int L, int col0, int B, int segment, int32_t *tok) {
  for (int i = 0; i <= L; i++)
    for (int j = 0; j < B; j++)
      tok[(size_t)i * B + j] = txl_zipf_id(z, txl_philox4x32_10((uint32_t)i, (uint32_t)(col0 + j), (uint32_t)segment,
                                                                0xbe4c4u, (uint32_t)c->seed, 0u));
}

void txl_bench_tail_caps(const TxlConfig *c, const TxlDims *dm, int L, int col0, int B, int group_cols,
                         TxlTailCap *cap) {
  const TxlTailCap none = TXL_TAIL_NOT_COUNTED;
  *cap = none;
  TxlZipf z;
  txl_zipf_make(&z, dm->n_token);
  int32_t *tok = txl_malloc((size_t)(L + 1) * B * sizeof(int32_t), "synthetic tokens");
  for (int s = 0; s < TXL_BENCH_SEGMENTS; s++) {
    txl_bench_tokens(c, &z, L, col0, B, s, tok);
    txl_tail_cap_add_segment(cap, dm, tok, L, B, group_cols);
  }
  free(tok);
  txl_zipf_free(&z);
}

void txl_trainer_bench(TxlTrainer *t, int steps, int warmup) {
  const TxlConfig *c = &t->cfg;
  const int L = c->tgt_len, B = t->B_local, V = t->model.spec.dims.n_token;
  int32_t *tok = malloc((size_t)(L + 1) * B * sizeof(int32_t));
  if (!tok) txl_fatal("out of memory for synthetic tokens");
  /* the emulated CUDA backend (it counts its calls) multiplies with the CPU's BLAS: the CPU's size */
  long launches, syncs;
  const int emulated = txl_backend_api_counts(&t->backend, &launches, &syncs);
  const int peak_n = t->backend.gpu >= 0 && !emulated ? 8192 : 1536;
  double peak = gemm_peak_gflops(t->ops, peak_n);
  double t0 = 0.0, loss = 0.0, wait0 = 0.0;
  StepCounts counts = {0};
  TxlZipf z;
  txl_zipf_make(&z, V);
  for (int s = 0; s < warmup + steps; s++) {
    txl_bench_tokens(c, &z, L, t->col0, B, s % TXL_BENCH_SEGMENTS, tok);
    if (s == warmup) {
      txl_dist_barrier();
      t0 = txl_now_s();
      wait0 = t->reducer ? txl_reducer_wait_seconds(t->reducer) : 0.0;
    }
    long before[3], after[3];
    const int counted = txl_backend_api_counts(&t->backend, &before[0], &before[1]);
    before[2] = txl_backend_graph_launches(&t->backend);
    const int profiled = t->backend.profiled && s >= warmup;
    if (profiled) txl_backend_profile_step(&t->backend, 1);
    loss = txl_trainer_step(t, tok, tok + B, L);
    if (profiled) txl_backend_profile_step(&t->backend, 0);
    if (counted && s >= warmup) {
      txl_backend_api_counts(&t->backend, &after[0], &after[1]);
      after[2] = txl_backend_graph_launches(&t->backend);
      for (int k = 0; k < 3; k++) after[k] -= before[k];
      count_step(&counts, after);
    }
    if (t->loss_defer && t->loss_pending == t->loss_cap) loss = t->loss_steps[txl_trainer_losses(t, t->loss_steps) - 1];
  }
  if (t->loss_defer && t->loss_pending > 0) loss = t->loss_steps[txl_trainer_losses(t, t->loss_steps) - 1];
  float sync;
  t->ops->to_host(&sync, t->model.param_buf, sizeof sync); /* waits for the device's last update */
  txl_dist_barrier();
  double dt = txl_now_s() - t0;
  struct rusage ru; /* the steps' peak, before the second probe's operands add to it */
  getrusage(RUSAGE_SELF, &ru);
  const double peak_after = gemm_peak_gflops(t->ops, peak_n);
  if (peak_after > peak) peak = peak_after;
  double wait = t->reducer ? txl_reducer_wait_seconds(t->reducer) - wait0 : 0.0;
  double wait_max = wait;
  txl_dist_allreduce_max_f64(&wait_max, 1);
  free(tok);
  txl_zipf_free(&z);
  if (t->dist.rank != 0) return;
  double tokens_per_s = (double)steps * L * c->batch_size / dt;
  double flops = txl_model_flops_per_token(&t->model, L, c->mem_len);
  double gflops_rank = tokens_per_s * flops / 1e9 / t->dist.world;
  char tps[32];
  txl_format_count((long long)(tokens_per_s + 0.5), tps, sizeof tps);
  const char *precision = txl_config_choice_name(TXL_CFG_KEY_precision, c->precision);
  printf("bench: %d steps (after %d warm-up) | loss %.6f | %s tok/s | %.2f ms/step | %.1f GFLOP/s per rank = "
         "%.1f%% of the measured %s GEMM peak %.1f GFLOP/s (%s, %d thread%s)\n",
         steps, warmup, loss, tps, 1000.0 * dt / steps, gflops_rank, 100.0 * gflops_rank / peak, precision, peak,
         t->backend.device, t->threads, t->threads > 1 ? "s" : "");
  if (t->backend.peak_flops > 0.0)
    printf("bench: MFU %.1f%% of the device's %s peak (%s) of %.1f TFLOP/s\n",
           100.0 * gflops_rank * 1e9 / t->backend.peak_flops, precision, t->backend.peak_of,
           t->backend.peak_flops / 1e12);
  print_step_counts(&counts);
  if (t->backend.profiled) txl_bench_profile_print(txl_backend_profile_totals(&t->backend), &t->backend, emulated);
  printf("bench: peak memory of rank 0: %.0f MiB\n", (double)ru.ru_maxrss / 1024.0);
  /* txl allocates before the first step and never inside one: what its buffers hold after the
   * timed steps is the run's peak, the figure torch.cuda.max_memory_allocated() gives for PyTorch */
  const size_t held = txl_backend_device_held(&t->backend);
  if (held > 0)
    printf("bench: device memory of rank 0: %.1f MiB in txl's buffers (the CUDA context and the libraries' "
           "own not included)\n", (double)held / 1048576.0);
  if (t->reducer && !txl_reducer_host_waits(t->reducer))
    printf("bench: %d ranks, gradient all-reduce of %.1f MiB per step through NCCL on its own stream (overlap %s)\n",
           t->dist.world, (double)txl_reducer_size(t->reducer) * sizeof(float) / 1048576.0,
           t->cfg.overlap_comm ? "on" : "off");
  else if (t->reducer)
    printf("bench: %d ranks, gradient all-reduce of %.1f MiB per step (overlap %s): blocked %.1f%% of the step time "
           "(rank 0), %.1f%% (most on any rank)\n",
           t->dist.world, (double)txl_reducer_size(t->reducer) * sizeof(float) / 1048576.0,
           t->cfg.overlap_comm ? "on" : "off", 100.0 * wait / dt, 100.0 * wait_max / dt);
  if (t->shard.lo)
    printf("bench: dist.shard_optimizer: the gradient reduced to each slice's owner instead of to every rank, the "
           "updated slices gathered by every rank (%.1f MiB of parameters%s); rank 0 holds %.1f MiB of the "
           "moments' %.1f MiB\n", (double)txl_reducer_size(t->reducer) * sizeof(float) / 1048576.0,
           t->model.param_act != (void *)t->model.param_buf ? ", and their 16-bit copy" : "",
           (double)(t->adam.hi - t->adam.lo) * 2.0 * sizeof(float) / 1048576.0,
           (double)t->adam.n * 2.0 * sizeof(float) / 1048576.0);
  if (t->gather)
    printf("bench: the tied word embedding's %.1f MiB reduced from the output layer's backward on (overlapping "
           "the layers'); its input-side rows gathered instead: %.2f MiB sent per rank per step\n",
           (double)txl_model_word_emb_end(&t->model) * sizeof(float) / 1048576.0,
           (double)txl_embed_gather_block_bytes(t->gather) / 1048576.0);
  fflush(stdout);
}
