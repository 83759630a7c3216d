/* Benchmarks of the CUDA backend's kernels at the shapes of a recipe, one GPU (one rank's share
 * of the batch columns): each op is warmed up, then timed with CUDA events over many calls, and
 * reported as time per call and achieved throughput against the device's peak: memory-bound ops
 * in GB/s of the bytes they must move at least (each input read once, each output written
 * once), against the DRAM peak; compute-bound ops in TFLOP/s against the fp32 peak of the CUDA
 * cores (TF32 GEMMs: the tensor cores' peak is about 8x that; see README).
 * Every op that has activations is timed on both tables, one row each: "cuda" (fp32 activations)
 * and "cuda-bf16" (bf16 activations, GEMMs on bf16 operands with fp32 sums; their bytes count 2
 * per activation element, and their TFLOP/s are still set against the fp32 peak of the CUDA
 * cores, which the bf16 tensor cores exceed many times over). Parameters, their gradients and the
 * optimizer's state are fp32 in both.
 *
 *   bench_cuda_kernels [wt103_base | enwik8_base | ref_base | tiny] [columns per GPU] [iterations]
 *   bench_cuda_kernels --count [--ranks P] [CONFIG.ini ...]
 *
 * --count times nothing and needs no GPU: it prints what one training step and one evaluation
 * step of each recipe execute, per kernel family, counted from the launch shapes of the real
 * model code (count_step.h).
 *
 * Shapes: wt103_base d 410, 10 heads of 41, d_inner 2100, L = mem = 150, adaptive head of 20,003
 * logits; enwik8_base d 512, 8 heads of 64, d_inner 2048, L = mem = 512, 204 logits; ref_base
 * (configs/bench/ref_base.ini, one GPU's 32 columns) d 512, 8 heads of 64, d_inner 2048,
 * L = mem = 192, adaptive head of 20,000 logits; tiny is for
 * a smoke run (it also runs under the CPU emulator, whose timings mean nothing).
 * Prints "SKIPPED: no CUDA device" and exits 77 (skipped) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/count_step.h"
#include "tests/cuda/parity.h"

typedef struct {
  const char *name;
  int d, H, dh, di, L, M, V, B;
  int64_t params; /* floats of the optimizer's buffer */
} Shape;

static const Shape k_shapes[] = {
    {"wt103_base", 410, 10, 41, 2100, 150, 150, 20003, 8, 151107538},
    {"enwik8_base", 512, 8, 64, 2048, 512, 512, 204, 3, 41054464},
    {"ref_base", 512, 8, 64, 2048, 192, 192, 20000, 32, 191950298},
    {"tiny", 64, 4, 16, 128, 17, 15, 101, 2, 100000},
};

static double g_peak_bw, g_peak_flops; /* bytes/s, FLOP/s */
static int g_iters;

static float *dev_rand(int64_t n, float lo, float hi) {
  float *h = host_rand(n, lo, hi);
  float *d = dev_from(h, (size_t)n * sizeof(float), "bench");
  free(h);
  return d;
}

static int32_t *dev_tokens(int64_t n, int V) {
  int32_t *h = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  if (!h) { fprintf(stderr, "out of host memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++) h[i] = (int32_t)((i * 7919) % V);
  int32_t *d = txl_cuda_alloc((size_t)n * sizeof(int32_t), "bench tokens");
  txl_cuda_to_device(d, h, (size_t)n * sizeof(int32_t));
  free(h);
  return d;
}

/* The op under test: one call of it. */
typedef void (*Call)(void *ctx);

/* Times `iters` calls after 3 warm-up calls; prints the line. bytes / flops: per call (0: n/a). */
static void timed(const char *name, Call f, void *ctx, double bytes, double flops) {
  const double s = txl_cuda_time_ms(f, ctx, 3, g_iters) / 1e3;
  printf("%-58s %10.4f ms", name, s * 1e3);
  if (bytes > 0) printf("  %8.1f GB/s (%5.1f%% of DRAM peak)", bytes / s / 1e9, 100.0 * bytes / s / g_peak_bw);
  if (flops > 0) printf("  %8.2f TFLOP/s (%5.1f%% of fp32 peak)", flops / s / 1e12, 100.0 * flops / s / g_peak_flops);
  printf("\n");
  fflush(stdout);
}

/* ---- the ops, each with its buffers ----------------------------------------------------- */

/* One table's buffers: activations (void *) in the table's act type, fp32 ones (float *) shared
 * by both tables' Bufs. */
typedef struct {
  const TxlOps *o;
  const Shape *s;
  int64_t LB, KB;
  void *x, *y, *z, *w;                   /* activations [LB, max(d, di)]; w: a GEMM operand / table */
  float *wf, *b, *mean, *rstd, *dw, *db; /* fp32: layer-norm weight, the embedding gradient, bias */
  void *q, *kv, *r, *vec, *dq, *dkv, *dr, *dvec;
  float *u, *vb, *saved, *du, *dvb;
  void *logits;
  float *loss;
  int32_t *tok, *tgt;
  float *p, *g, *m, *v; /* optimizer buffers */
  float *coef;          /* [1] the clip factor adam_fused reads on the device */
  TxlOptimStep *step;   /* [1] the update's constants, on the device */
  void *p_act;          /* the weights' copy in the table's act type (adam_fused; bf16 table) */
  void *work;
  TxlDropout drop, dropatt0, dropatt;
  TxlAttnShape as;
} Bufs;

static void call_gemm_ffn1(void *c) {
  Bufs *b = c;
  b->o->gemm(0, 0, (int)b->LB, b->s->di, b->s->d, 1.0f, b->x, b->s->d, b->w, b->s->di, 0.0f, b->y, b->s->di,
             b->o->act);
}
static void call_gemm_out(void *c) {
  Bufs *b = c;
  b->o->gemm(0, 1, (int)b->LB, b->s->V, b->s->d, 1.0f, b->x, b->s->d, b->w, b->s->d, 0.0f, b->logits, b->s->V,
             b->o->act);
}
static void call_attn_fwd(void *c) {
  Bufs *b = c;
  b->o->rel_attn_forward(b->vec, b->saved, b->q, b->kv, b->r, b->u, b->vb, NULL, b->as, b->dropatt0, b->work);
}
static void call_attn_fwd_drop(void *c) {
  Bufs *b = c;
  b->o->rel_attn_forward(b->vec, b->saved, b->q, b->kv, b->r, b->u, b->vb, NULL, b->as, b->dropatt, b->work);
}
static void call_attn_bwd(void *c) {
  Bufs *b = c;
  b->o->rel_attn_backward(b->dq, b->dkv, b->dr, b->du, b->dvb, NULL, b->dvec, b->vec, b->q, b->kv, b->r, b->u, b->vb,
                          NULL, b->saved, b->as, b->dropatt0, b->work);
}
static void call_ffn_fwd(void *c) {
  Bufs *b = c;
  b->o->bias_relu_dropout_forward(b->y, b->z, b->b, b->s->L, b->s->B, b->s->di, b->s->di, 0, b->drop);
}
static void call_ffn_bwd(void *c) {
  Bufs *b = c;
  b->o->relu_dropout_backward(b->z, b->y, b->s->L, b->s->B, b->s->di, b->s->di, 0, b->drop);
}
static void call_add_ln(void *c) {
  Bufs *b = c;
  b->o->add_layernorm_forward(b->z, b->y, b->mean, b->rstd, b->x, b->x, b->wf, b->b, b->LB, b->s->d, b->s->d, 1e-5f);
}
static void call_ln_bwd(void *c) {
  Bufs *b = c;
  b->o->layernorm_backward_dropout(b->z, b->y, b->dw, b->db, b->x, b->x, b->wf, b->mean, b->rstd, b->s->L,
                                   b->s->B, b->s->d, b->s->d, 0, b->drop);
}
static void call_dropout(void *c) {
  Bufs *b = c;
  b->o->dropout(b->x, b->s->L, b->s->B, b->s->d, b->s->d, 0, b->drop);
}
static void call_xent(void *c) {
  Bufs *b = c;
  b->o->xent_forward_backward(b->logits, b->loss, b->tgt, 1e-3f, b->LB, b->s->V, b->s->V);
}
static void call_bias_bwd(void *c) {
  Bufs *b = c;
  b->o->bias_backward(b->db, b->logits, b->LB, b->s->V, b->s->V);
}
static void call_emb_fwd(void *c) {
  Bufs *b = c;
  b->o->embedding_forward(b->y, b->tok, b->w, 20.0f, b->LB, b->s->d, b->s->d, b->s->d);
}
static void call_emb_bwd(void *c) {
  Bufs *b = c;
  b->o->embedding_backward(b->wf, TXL_F32, b->x, b->tok, 20.0f, b->LB, b->s->d, b->s->d, b->s->d);
}
static void call_adam(void *c) {
  Bufs *b = c;
  b->o->adam_update(b->p, b->g, b->m, b->v, b->s->params, 1e-4f, 0.9f, 0.999f, 1e-8f, 10, 0.5f);
}
/* the training step's pass: Adam, the weights' bf16 copy written, the gradient zeroed (after the
 * first call it reads zeros: the same bytes move) */
static void call_adam_fused(void *c) {
  Bufs *b = c;
  b->o->adam_fused(b->p, b->p_act, b->g, b->m, b->v, b->s->params, b->step, b->coef);
}
static void call_sumsq(void *c) {
  Bufs *b = c;
  (void)b->o->sumsq(b->g, b->s->params);
}

/* The fp32 buffer src [n] in the act type of table o: src itself for fp32, a rounded bf16 copy
 * (made by the table's to_act) otherwise. */
static void *act_of(const TxlOps *o, float *src, int64_t n) {
  if (o->act == TXL_F32) return src;
  void *d = o->alloc((size_t)n * txl_dtype_size(o->act), "bench (bf16)");
  o->to_act(d, src, n);
  return d;
}

/* The bf16 table's Bufs from the fp32 table's: the activations converted, the rest shared. */
static Bufs bufs_bf16(const Bufs *f, int64_t act_n, int64_t w_n, int64_t qd_n, int64_t kv_n, int64_t r_n) {
  Bufs b = *f;
  b.o = txl_ops_cuda(TXL_BF16);
  b.x = act_of(b.o, f->x, act_n), b.y = act_of(b.o, f->y, act_n), b.z = act_of(b.o, f->z, act_n);
  b.w = act_of(b.o, f->w, w_n);
  b.q = act_of(b.o, f->q, qd_n), b.vec = act_of(b.o, f->vec, qd_n), b.dvec = act_of(b.o, f->dvec, qd_n);
  b.dq = act_of(b.o, f->dq, qd_n);
  b.kv = act_of(b.o, f->kv, kv_n), b.dkv = act_of(b.o, f->dkv, kv_n);
  b.r = act_of(b.o, f->r, r_n), b.dr = act_of(b.o, f->dr, r_n);
  b.logits = act_of(b.o, f->logits, f->LB * f->s->V);
  return b;
}

/* One op: per call, `act` activation elements and `f32` bytes of fp32 tensors moved at least,
 * `flops` arithmetic (0: n/a). */
typedef struct {
  const char *name;
  Call f;
  double act, f32, flops;
} Bench;

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--count")) return txl_count_main(argc - 2, argv + 2);
  if (txl_cuda_device_count() == 0) {
    printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const char *which = argc > 1 ? argv[1] : "wt103_base";
  const Shape *s0 = NULL;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
    if (!strcmp(which, k_shapes[i].name)) s0 = &k_shapes[i];
  if (!s0) {
    fprintf(stderr, "bench_cuda_kernels: unknown shape '%s' (wt103_base, enwik8_base, ref_base, tiny)\n", which);
    return 2;
  }
  Shape s = *s0;
  if (argc > 2) s.B = atoi(argv[2]);
  g_iters = argc > 3 ? atoi(argv[3]) : 20;
  if (s.B < 1 || g_iters < 1) {
    fprintf(stderr, "bench_cuda_kernels: columns and iterations must be >= 1\n");
    return 2;
  }
  TxlCudaDevice dev;
  txl_cuda_set_device(0, &dev);
  g_peak_bw = dev.dram_peak;
  g_peak_flops = dev.peak[TXL_PEAK_FP32];
  printf("device: %s, sm_%d%d, %d SMs, %.1f GiB; peaks: DRAM %.0f GB/s, fp32 %.1f TFLOP/s\n", dev.name, dev.major,
         dev.minor, dev.sms, (double)dev.memory / 1073741824.0, g_peak_bw / 1e9, g_peak_flops / 1e12);
  printf("shape %s: d %d, %d heads of %d, d_inner %d, L %d, memory %d, %d logits, %d columns; %d calls each\n",
         s.name, s.d, s.H, s.dh, s.di, s.L, s.M, s.V, s.B, g_iters);

  Bufs b;
  memset(&b, 0, sizeof b);
  b.o = txl_ops_cuda(TXL_F32);
  b.s = &s;
  const int K = s.L + s.M, HD = s.H * s.dh, wide = s.di > s.d ? s.di : s.d;
  b.LB = (int64_t)s.L * s.B;
  b.KB = (int64_t)K * s.B;
  b.o->reserve(b.LB, s.V, s.d); /* scratch: layer norms of d, the bias_backward of the logits */
  const int64_t wmax = (int64_t)(s.V > wide ? s.V : wide) * (wide > s.d ? wide : s.d);
  float *w32 = dev_rand(wmax, -0.05f, 0.05f);
  b.x = dev_rand(b.LB * wide, -1, 1), b.y = dev_rand(b.LB * wide, -1, 1), b.z = dev_rand(b.LB * wide, -1, 1);
  b.w = w32, b.wf = w32, b.b = dev_rand(wide, -0.1f, 0.1f);
  b.mean = dev_rand(b.LB, 0, 1), b.rstd = dev_rand(b.LB, 1, 2), b.dw = dev_rand(wide, 0, 1), b.db = dev_rand(s.V > wide ? s.V : wide, 0, 1);
  b.q = dev_rand(b.LB * HD, -1, 1), b.kv = dev_rand(b.KB * 2 * HD, -1, 1), b.r = dev_rand((int64_t)K * HD, -1, 1);
  b.u = dev_rand(HD, -0.1f, 0.1f), b.vb = dev_rand(HD, -0.1f, 0.1f);
  b.vec = dev_rand(b.LB * HD, -1, 1), b.dvec = dev_rand(b.LB * HD, -1, 1), b.dq = dev_rand(b.LB * HD, -1, 1);
  b.dkv = dev_rand(b.KB * 2 * HD, -1, 1), b.dr = dev_rand((int64_t)K * HD, -1, 1);
  b.du = dev_rand(HD, -1, 1), b.dvb = dev_rand(HD, -1, 1);
  b.saved = dev_rand((int64_t)txl_cuda_rel_attn_saved_floats(s.L, K, s.B, s.H), 0, 1);
  b.work = txl_cuda_alloc(txl_cuda_rel_attn_workspace(s.L, K, s.B, s.H, s.dh, 1), "attention workspace");
  b.logits = dev_rand(b.LB * s.V, -3, 3), b.loss = dev_rand(b.LB, 0, 1);
  b.tok = dev_tokens(b.LB, s.V), b.tgt = dev_tokens(b.LB, s.V);
  b.p = dev_rand(s.params, -0.1f, 0.1f), b.g = dev_rand(s.params, -1e-3f, 1e-3f);
  b.m = dev_rand(s.params, -1e-4f, 1e-4f), b.v = dev_rand(s.params, 0, 1e-6f);
  b.coef = dev_rand(1, 0.5f, 0.5f);
  const TxlOptimStep st = {txl_adam_coef(1e-4f, 0.9f, 0.999f, 1e-8f, 10, 0.0f), 0.0f, 0.0f, 0, 0};
  b.step = dev_from(&st, sizeof st, "bench: optimizer step");
  b.drop = (TxlDropout){0.1f, 1, 2, 3, NULL};
  b.dropatt0 = (TxlDropout){0.0f, 1, 4, 3, NULL};
  b.dropatt = (TxlDropout){0.1f, 1, 4, 3, NULL};
  b.as = (TxlAttnShape){s.L, s.M, s.B, s.H, s.dh, 0, 0, s.L, (float)(1.0 / sqrt((double)s.dh)), HD, 2 * HD, HD};
  Bufs bh = bufs_bf16(&b, b.LB * wide, wmax, b.LB * HD, b.KB * 2 * HD, (int64_t)K * HD);

  const double F = sizeof(float), LB = (double)b.LB, d = s.d, di = s.di, V = s.V;
  /* attention: AC, BD and P V, 2 L K dh each per (column, head), the causal half included */
  const double attn_flops = 3.0 * 2.0 * s.B * s.H * (double)s.L * K * s.dh;
  const double attn_act = 2.0 * LB * HD + (double)b.KB * 2 * HD + (double)K * HD;
  const Bench benches[] = {
      {"gemm FFN 1 [LB, d] x [d, d_inner]", call_gemm_ffn1, 0, 0, 2.0 * LB * d * di},
      {"gemm output [LB, d] x [d, V]^T", call_gemm_out, 0, 0, 2.0 * LB * d * V},
      {"rel_attn forward (dropatt 0)", call_attn_fwd, attn_act, 0, attn_flops},
      {"rel_attn backward", call_attn_bwd, 2.0 * attn_act, 0, 2.5 * attn_flops},
      {"rel_attn forward (dropatt 0.1)", call_attn_fwd_drop, attn_act, 0, attn_flops},
      {"bias + ReLU + dropout forward [LB, d_inner]", call_ffn_fwd, 3.0 * LB * di, 0, 0},
      {"ReLU + dropout backward [LB, d_inner]", call_ffn_bwd, 3.0 * LB * di, 0, 0},
      {"residual + layer norm forward [LB, d]", call_add_ln, 4.0 * LB * d, 0, 0},
      {"layer norm backward + dropout [LB, d]", call_ln_bwd, 4.0 * LB * d, 0, 0},
      {"dropout [LB, d]", call_dropout, 2.0 * LB * d, 0, 0},
      {"softmax cross-entropy fwd+bwd [LB, V]", call_xent, 2.0 * LB * V, 0, 0},
      {"bias backward (column sums) [LB, V]", call_bias_bwd, LB * V, 0, 0},
      {"embedding forward [LB, d]", call_emb_fwd, 2.0 * LB * d, 0, 0},
      /* reads dout, reads and writes the fp32 gradient rows */
      {"embedding backward (deterministic) [LB, d]", call_emb_bwd, LB * d, F * 2.0 * LB * d, 0},
  };
  Bufs *tables[] = {&b, &bh};
  for (size_t k = 0; k < sizeof benches / sizeof benches[0]; k++)
    for (int t = 0; t < 2; t++) {
      const Bench *e = &benches[k];
      char name[96];
      snprintf(name, sizeof name, "%s [%s]", e->name, tables[t]->o->name);
      const double bytes = e->act * (double)txl_dtype_size(tables[t]->o->act) + e->f32;
      timed(name, e->f, tables[t], bytes, e->flops);
    }
  /* fp32 in both tables: one row each */
  timed("Adam over every parameter", call_adam, &b, F * 7.0 * (double)s.params, 0);
  timed("sum of squares (gradient norm)", call_sumsq, &b, F * (double)s.params, 0);
  /* last: it zeroes the gradient. Reads p, g, m, v, writes p, m, v, the zeros and the bf16 copy */
  bh.p_act = txl_cuda_alloc((size_t)s.params * txl_dtype_size(bh.o->act), "bench: the weights' bf16 copy");
  timed("Adam fused (bf16 copy, gradient zeroed) over every parameter [cuda-bf16]", call_adam_fused, &bh,
        (F * 8.0 + 2.0) * (double)s.params, 0);
  txl_cuda_release();
  return 0;
}
