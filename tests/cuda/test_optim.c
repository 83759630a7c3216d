/* The fused optimizer passes (kernels/ops.def: adam_fused, sgd_fused, axpy_fused; kernels/cuda/
 * adam.cu and sgd_lamb.cu) against the unfused sequence they replace, bit for bit: no tolerance,
 * since each fused kernel runs the unfused kernel's element math (kernels/common/adam.h,
 * sgd_lamb.h) on the same inputs, then the rounding of to_act (txl_st) and a store of zero.
 *
 * 1. The ops, on each CUDA table (fp32, bf16 where the device has it, fp16): from the same state,
 *    the unfused op, then to_act into a copy of p's type, then zero of the gradient, against the
 *    fused op; p, the state (m, v / buf) and the act-type copy must be the same bits, and the
 *    gradient all +0.0. The fused op's copy is NaN-poisoned before the call (every element must be
 *    written; the fp32 table's copy is p itself). Odd sizes (1, 1001, 100003: more than one
 *    block, a partial last one); a stretch of every input is zero, as the padding of the
 *    parameter buffer, and must stay zero.
 * 2. The training step, on the CPU table and each CUDA table: two identical models trained side by
 *    side, one by the unfused sequence of before (txl_train_grad with its zeroing pass every step,
 *    txl_adam_step, txl_model_params_changed), the other by txl_train_grad + txl_train_update (the
 *    fused passes; the zeroing pass skipped after an update), for Adam, LAMB (per-tensor trust
 *    ratios, one axpy_fused per tensor) and SGD, with a loss scale and clipping active. Step 2 is
 *    skipped in both (the gradient computed, no update: the loss scaler's skip), so the fused side
 *    must zero its gradient again before step 3. After every step the gradient norm, the
 *    parameters (padding included), the weights' compute copy and the optimizer state must be the
 *    same bits on both sides. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/base/error.h"
#include "src/config/config.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/train/step.h"
#include "tests/cuda/parity.h"

/* ---- 1. the ops ------------------------------------------------------------------------------ */

/* host values in [lo, hi) with the padding stretch [n / 3, n / 3 + n / 4) zero */
static float *rand_pad(int64_t n, double lo, double hi) {
  float *x = host_rand(n, lo, hi);
  for (int64_t i = n / 3; i < n / 3 + n / 4; i++) x[i] = 0.0f;
  return x;
}

static float *dev_of(const float *host, int64_t n, const char *what) {
  return dev_from(host, (size_t)n * sizeof(float), what);
}

/* two device fp32 vectors: the same bits */
static void same_dev(const char *what, const float *got, const float *want, int64_t n) {
  float *g = host_from(got, n), *w = host_from(want, n);
  check_bits(what, g, w, n);
  free(g), free(w);
}

/* the gradient after a fused pass: every element +0.0 */
static void zero_dev(const char *what, const float *dev, int64_t n) {
  float *g = host_from(dev, n), *z = ot_alloc(n);
  check_bits(what, g, z, n);
  free(g), free(z);
}

/* the act-type copies of both sides: the same bits (widened exactly; a NaN left by the poison fails) */
static void same_act(const char *what, const void *got, const void *want, int64_t n, TxlDtype act) {
  float *g = host_from_act(got, n, act), *w = host_from_act(want, n, act);
  check_bits(what, g, w, n);
  free(g), free(w);
}

/* The unfused side's copy (to_act into a buffer of its own) and the fused side's (poisoned; the
 * fp32 table: p itself). */
typedef struct {
  void *want, *got;
} Copies;

static Copies copies(const TxlOps *o, float *p_fused, int64_t n) {
  Copies c = {NULL, p_fused};
  if (o->act != TXL_F32) {
    c.want = dev_poison_act(n, o->act, "test: unfused copy");
    c.got = dev_poison_act(n, o->act, "test: fused copy");
  }
  return c;
}

/* the unfused tail: to_act (nothing on the fp32 table) and the next step's zeroing */
static void unfused_tail(const TxlOps *o, void *copy, const float *p, float *g, int64_t n) {
  if (copy) o->to_act(copy, p, n);
  o->zero(g, (size_t)n * sizeof(float));
}

static void check_copies(const char *what, const TxlOps *o, const Copies *c, int64_t n) {
  if (o->act == TXL_F32) return; /* the copy is p, checked as p */
  same_act(what, c->got, c->want, n, o->act);
}

static void free_copies(const TxlOps *o, Copies *c) {
  if (o->act == TXL_F32) return;
  o->free(c->want);
  o->free(c->got);
}

static void test_adam_op(TxlDtype act, int64_t n) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[160];
  float *hp = rand_pad(n, -1.0, 1.0), *hm = rand_pad(n, -0.1, 0.1), *hv = rand_pad(n, 0.0, 0.01);
  float *p = dev_of(hp, n, "p"), *m = dev_of(hm, n, "m"), *v = dev_of(hv, n, "v");
  float *fp = dev_of(hp, n, "p"), *fm = dev_of(hm, n, "m"), *fv = dev_of(hv, n, "v");
  Copies c = copies(o, fp, n);
  for (int step = 1; step <= 3; step++) {
    float *hg = rand_pad(n, -2.0, 2.0);
    float *g = dev_of(hg, n, "g"), *fg = dev_of(hg, n, "g");
    const float gs = step == 2 ? 0.25f : 1.0f;
    /* the fused pass reads the update's constants and the factor on the device */
    const TxlOptimStep st = {txl_adam_coef(1e-3f, 0.9f, 0.999f, 1e-8f, step, 0.0f), 0.0f, 0.0f, 0, 0};
    float *dgs = dev_of(&gs, 1, "grad_scale");
    TxlOptimStep *dst = dev_from(&st, sizeof st, "optimizer step");
    o->adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, step, gs);
    unfused_tail(o, c.want, p, g, n);
    o->adam_fused(fp, c.got, fg, fm, fv, n, dst, dgs);
    o->free(dgs), o->free(dst);
    snprintf(what, sizeof what, "adam_fused %s n=%lld step %d: p", act_name(act), (long long)n, step);
    same_dev(what, fp, p, n);
    snprintf(what, sizeof what, "adam_fused %s n=%lld step %d: m, v", act_name(act), (long long)n, step);
    same_dev(what, fm, m, n);
    same_dev(what, fv, v, n);
    snprintf(what, sizeof what, "adam_fused %s n=%lld step %d: copy of p", act_name(act), (long long)n, step);
    check_copies(what, o, &c, n);
    snprintf(what, sizeof what, "adam_fused %s n=%lld step %d: g zeroed", act_name(act), (long long)n, step);
    zero_dev(what, fg, n);
    o->free(g), o->free(fg), free(hg);
  }
  float *pad = host_from(fp, n);
  int bad = 0;
  for (int64_t i = n / 3; i < n / 3 + n / 4; i++) bad += pad[i] != 0.0f;
  snprintf(what, sizeof what, "adam_fused %s n=%lld: the padding of p zero", act_name(act), (long long)n);
  ot_check_true(what, bad == 0, "%d non-zero", bad);
  free(pad);
  free_copies(o, &c);
  o->free(p), o->free(m), o->free(v), o->free(fp), o->free(fm), o->free(fv);
  free(hp), free(hm), free(hv);
}

static void test_sgd_op(TxlDtype act, int64_t n, float mom) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[160];
  float *hp = rand_pad(n, -1.0, 1.0), *hb = rand_pad(n, -5.0, 5.0); /* buf: garbage before the first step */
  float *p = dev_of(hp, n, "p"), *b = dev_of(hb, n, "buf"), *fp = dev_of(hp, n, "p"), *fb = dev_of(hb, n, "buf");
  Copies c = copies(o, fp, n);
  for (int step = 1; step <= 2; step++) {
    float *hg = rand_pad(n, -2.0, 2.0);
    float *g = dev_of(hg, n, "g"), *fg = dev_of(hg, n, "g");
    o->sgd_update(p, g, b, n, 0.05f, mom, 0.5f, step == 1);
    unfused_tail(o, c.want, p, g, n);
    const float gs = 0.5f;
    const TxlOptimStep st = {{0}, 0.05f, mom, step == 1, 0};
    float *dgs = dev_of(&gs, 1, "grad_scale");
    TxlOptimStep *dst = dev_from(&st, sizeof st, "optimizer step");
    o->sgd_fused(fp, c.got, fg, fb, n, dst, dgs);
    o->free(dgs), o->free(dst);
    snprintf(what, sizeof what, "sgd_fused %s n=%lld mom=%g step %d: p, buf", act_name(act), (long long)n, mom, step);
    same_dev(what, fp, p, n);
    same_dev(what, fb, b, n);
    snprintf(what, sizeof what, "sgd_fused %s n=%lld mom=%g step %d: copy of p", act_name(act), (long long)n, mom,
             step);
    check_copies(what, o, &c, n);
    snprintf(what, sizeof what, "sgd_fused %s n=%lld mom=%g step %d: g zeroed", act_name(act), (long long)n, mom,
             step);
    zero_dev(what, fg, n);
    o->free(g), o->free(fg), free(hg);
  }
  free_copies(o, &c);
  o->free(p), o->free(b), o->free(fp), o->free(fb);
  free(hp), free(hb);
}

/* A NaN factor on the device (the updates halted: kernels/common/clip.h): adam_fused and
 * sgd_fused write nothing at all, not p, its copy, the state or the gradient. */
static void test_halted(TxlDtype act, int64_t n) {
  const TxlOps *o = txl_ops_cuda(act);
  float *hp = rand_pad(n, -1.0, 1.0), *hg = rand_pad(n, -2.0, 2.0), *hm = rand_pad(n, -0.1, 0.1);
  float *hv = rand_pad(n, 0.0, 0.01);
  float *p = dev_of(hp, n, "p"), *g = dev_of(hg, n, "g"), *m = dev_of(hm, n, "m"), *v = dev_of(hv, n, "v");
  Copies c = copies(o, p, n);
  const size_t A = (size_t)n * txl_dtype_size(act);
  unsigned char *copy0 = (unsigned char *)ot_alloc(n), *copy1 = (unsigned char *)ot_alloc(n); /* >= A bytes */
  o->to_host(copy0, c.got, A);
  const float nan = NAN;
  float *dgs = dev_of(&nan, 1, "grad_scale");
  const TxlOptimStep st = {txl_adam_coef(1e-3f, 0.9f, 0.999f, 1e-8f, 3, 0.0f), 0.05f, 0.9f, 0, 0};
  TxlOptimStep *dst = dev_from(&st, sizeof st, "optimizer step");
  char what[160];
  for (int k = 0; k < 2; k++) {
    if (k == 0) o->adam_fused(p, c.got, g, m, v, n, dst, dgs);
    else o->sgd_fused(p, c.got, g, m, n, dst, dgs);
    const char *op = k == 0 ? "adam_fused" : "sgd_fused";
    snprintf(what, sizeof what, "%s %s n=%lld halted: p, g, m, v unchanged", op, act_name(act), (long long)n);
    float *gp = host_from(p, n), *gg = host_from(g, n), *gm = host_from(m, n), *gv = host_from(v, n);
    check_bits(what, gp, hp, n);
    check_bits(what, gg, hg, n);
    check_bits(what, gm, hm, n);
    check_bits(what, gv, hv, n);
    free(gp), free(gg), free(gm), free(gv);
    o->to_host(copy1, c.got, A);
    snprintf(what, sizeof what, "%s %s n=%lld halted: the copy of p unchanged", op, act_name(act), (long long)n);
    ot_check_true(what, memcmp(copy0, copy1, A) == 0, "bytes differ");
  }
  free(copy0), free(copy1);
  o->free(dgs), o->free(dst);
  free_copies(o, &c);
  o->free(p), o->free(g), o->free(m), o->free(v);
  free(hp), free(hg), free(hm), free(hv);
}

static void test_axpy_op(TxlDtype act, int64_t n, float a) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[160];
  float *hy = rand_pad(n, -1.0, 1.0), *hx = rand_pad(n, -3.0, 3.0);
  float *y = dev_of(hy, n, "y"), *x = dev_of(hx, n, "x"), *fy = dev_of(hy, n, "y"), *fx = dev_of(hx, n, "x");
  Copies c = copies(o, fy, n);
  o->axpy(y, x, a, n);
  unfused_tail(o, c.want, y, x, n);
  o->axpy_fused(fy, c.got, fx, a, n);
  snprintf(what, sizeof what, "axpy_fused %s n=%lld a=%g: y", act_name(act), (long long)n, a);
  same_dev(what, fy, y, n);
  snprintf(what, sizeof what, "axpy_fused %s n=%lld a=%g: copy of y", act_name(act), (long long)n, a);
  check_copies(what, o, &c, n);
  snprintf(what, sizeof what, "axpy_fused %s n=%lld a=%g: x zeroed", act_name(act), (long long)n, a);
  zero_dev(what, fx, n);
  free_copies(o, &c);
  o->free(y), o->free(x), o->free(fy), o->free(fx);
  free(hy), free(hx);
}

/* ---- 2. the training step -------------------------------------------------------------------- */

enum { L = 9, B = 3, MEM = 11, STEPS = 5, SKIPPED = 2 };

typedef struct {
  TxlModel m;
  TxlRun run;
  TxlAdam adam;
} Side;

static TxlModelSpec model_spec(void) {
  TxlModelSpec s;
  memset(&s, 0, sizeof s);
  s.dims.n_token = 97;
  s.dims.n_layer = 2;
  s.dims.d_model = 32;
  s.dims.n_head = 2;
  s.dims.d_head = 13; /* rows of 26 and 78: padded to 8 on CUDA */
  s.dims.d_inner = 61;
  s.dims.tie_weight = 1;
  txl_dims_single_softmax(&s.dims);
  s.dropout = 0.1f;
  s.dropatt = 0.1f;
  s.seed = 77;
  s.ln_eps = TXL_LAYER_NORM_EPS;
  return s;
}

static void side_create(Side *s, const TxlOps *o, TxlOptimKind kind) {
  const TxlModelSpec spec = model_spec();
  txl_model_create(&s->m, o, &spec);
  txl_model_init_params(&s->m, 0.02f, 0.01f, 1234u);
  TxlRunShape rs = {L, B, 0, MEM, 0, 0, 1, 1, TXL_TAIL_NOT_COUNTED};
  txl_run_create(&s->run, &s->m, &rs);
  txl_adam_create(&s->adam, o, s->m.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
  txl_optim_set_kind(&s->adam, kind, 0.9f, 0.01f, &s->m.table);
}

static void side_destroy(Side *s) {
  txl_adam_destroy(&s->adam);
  txl_run_destroy(&s->run, &s->m);
  txl_model_destroy(&s->m);
}

/* n bytes of memory of table o (the CPU's or a device's): the same bits on both sides */
static void same_bytes(const char *what, const TxlOps *o, const void *got, const void *want, size_t bytes) {
  unsigned char *g = malloc(bytes), *w = malloc(bytes);
  if (!g || !w) txl_fatal("test: out of memory");
  o->to_host(g, got, bytes);
  o->to_host(w, want, bytes);
  ot_check_same(what, g, w, bytes);
  free(g), free(w);
}

static void test_step(const TxlOps *o, TxlOptimKind kind, const char *kind_name, double loss_scale) {
  Side ref, fus; /* the unfused sequence of before; txl_train_update's fused passes */
  side_create(&ref, o, kind);
  side_create(&fus, o, kind);
  const int64_t n = ref.m.table.total;
  const size_t F = (size_t)n * sizeof(float), A = (size_t)n * txl_dtype_size(o->act);
  const TxlSchedule sched = {.kind = TXL_SCHED_CONSTANT, .lr = 2e-3};
  int32_t tok[(L + 1) * B];
  int zero_skipped = 0;
  for (int step = 0; step < STEPS; step++) {
    for (int i = 0; i < (L + 1) * B; i++) tok[i] = (int32_t)(parity_urand() * 97);
    double norm[2];
    ref.m.grad_zero = 0; /* before: the zeroing pass every step */
    zero_skipped += fus.m.grad_zero;
    txl_train_grad(&ref.m, &ref.run, step, B, NULL, NULL, tok, tok + B, L, loss_scale);
    txl_train_grad(&fus.m, &fus.run, step, B, NULL, NULL, tok, tok + B, L, loss_scale);
    /* before: the norm on the host; now: the record on the device */
    norm[0] = txl_grad_norm(o, ref.m.grad_buf, &ref.m.table) / loss_scale;
    txl_train_clip(&fus.m, &fus.adam, NULL, loss_scale);
    TxlGradClip rec;
    txl_optim_read_clip(&fus.adam, &rec);
    norm[1] = rec.norm;
    char what[200];
    snprintf(what, sizeof what, "%s %s step %d: gradient norm", o->name, kind_name, step);
    ot_check_true(what, memcmp(&norm[0], &norm[1], sizeof(double)) == 0, "%.17g against %.17g", norm[1], norm[0]);
    if (step != SKIPPED) { /* step SKIPPED: no update, as the loss scaler's skip */
      txl_adam_step(&ref.adam, ref.m.param_buf, ref.m.grad_buf, norm[0], loss_scale,
                    (float)txl_schedule_lr(&sched, step));
      txl_model_params_changed(&ref.m);
      txl_train_update(&fus.m, &fus.adam, NULL, &sched, step);
      snprintf(what, sizeof what, "%s %s step %d: gradient zeroed by the fused pass", o->name, kind_name, step);
      float *z = ot_alloc(n), *gz = ot_alloc(n);
      o->to_host(gz, fus.m.grad_buf, F);
      check_bits(what, gz, z, n);
      free(z), free(gz);
    }
    snprintf(what, sizeof what, "%s %s step %d: parameters (padding included)", o->name, kind_name, step);
    same_bytes(what, o, fus.m.param_buf, ref.m.param_buf, F);
    snprintf(what, sizeof what, "%s %s step %d: the weights' compute copy", o->name, kind_name, step);
    same_bytes(what, o, fus.m.param_act, ref.m.param_act, A);
    snprintf(what, sizeof what, "%s %s step %d: optimizer state m, v", o->name, kind_name, step);
    same_bytes(what, o, fus.adam.m, ref.adam.m, F);
    same_bytes(what, o, fus.adam.v, ref.adam.v, F);
  }
  /* the zeroing pass is skipped after each update but the first step's and the skipped step's */
  char what[200];
  snprintf(what, sizeof what, "%s %s: zeroing passes skipped", o->name, kind_name);
  ot_check_true(what, zero_skipped == STEPS - 2, "%d of %d steps", zero_skipped, STEPS);
  side_destroy(&ref);
  side_destroy(&fus);
}

static void test_steps(const TxlOps *o, double loss_scale) {
  test_step(o, TXL_OPTIMIZER_ADAM, "adam", loss_scale);
  test_step(o, TXL_OPTIMIZER_LAMB, "lamb", loss_scale);
  test_step(o, TXL_OPTIMIZER_SGD, "sgd", loss_scale);
}

int main(void) {
  /* the CPU table first: it needs no device */
  printf("-- training steps, fused against unfused, on the cpu table\n");
  test_steps(txl_ops_cpu(), 8.0);
  if (txl_cuda_device_count() == 0) {
    printf("SKIPPED: no CUDA device (the cpu table's steps above are checked)\n");
    /* the CUDA tables did not run: skipped (77), unless the cpu table's steps failed */
    return ot_finish("fused optimizer passes (cpu table)") ? 1 : 77;
  }
  parity_begin("cuda fused optimizer passes (adam_fused, sgd_fused, axpy_fused) against the unfused ops");
  TxlDtype acts[3];
  const int n_acts = parity_acts(acts, "the bf16 optimizer passes");
  const int64_t sizes[] = {1, 1001, 100003};
  for (int a = 0; a < n_acts; a++) {
    for (int k = 0; k < 3; k++) {
      test_adam_op(acts[a], sizes[k]);
      test_sgd_op(acts[a], sizes[k], 0.9f);
      test_halted(acts[a], sizes[k]);
      test_axpy_op(acts[a], sizes[k], -3e-3f);
    }
    test_sgd_op(acts[a], 1001, 0.0f);
    printf("-- training steps, fused against unfused, on the %s table\n", txl_ops_cuda(acts[a])->name);
    test_steps(txl_ops_cuda(acts[a]), acts[a] == TXL_F16 ? 1024.0 : 8.0);
  }
  return parity_end();
}
