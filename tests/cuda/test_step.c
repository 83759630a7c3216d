/* Whole training steps of the model (src/model) on the CUDA backend, each of its three tables (fp32,
 * bf16 and fp16 activations), against the CPU backend: the same tiny configs, the same initial
 * parameters and tokens, three steps of forward (with memory carried over, dropout and dropatt
 * on), backward, gradient norm and Adam, then an inference run (no dropout, the key/value cache)
 * scoring one segment. Checked per step: the loss, the gradient norm, every parameter tensor's
 * gradient, and at the end every parameter and the inference log-probabilities.
 *
 * Tolerance. Each op is checked element by element with worst-case bounds in the other parity
 * tests; this test is about the wiring (the op table, the order of the calls, the buffers, the
 * memory, the cache, the adaptive softmax on the device), so it compares whole tensors by the
 * relative error of their norm, ||cuda - cpu|| / ||cpu||. One op adds at most c (k + a) u
 * relative error with k the longest sum behind an element: here k <= 100 (V = 97 logits, 64
 * hidden units, L*B = 27 rows), so about 4 * 100 * 6e-8 = 2.4e-5 per op, and a gradient passes
 * through at most ~8 such ops per layer and 2 layers, with a residual stream that does not
 * amplify errors (LayerNorm has unit gain on average): 16 * 2.4e-5 ~ 4e-4. TOL_NORM = 1e-3
 * leaves a factor 2.5 for the softmax's exp / log and Adam's division. A wrong index, a
 * missing term or a wrong mask gives errors of order 1; TF32 GEMMs (10-bit mantissa, u = 5e-4)
 * would sit near or above the tolerance, so this test also shows that fp32 GEMMs are fp32.
 * Parameters after Adam: an element whose gradient is near zero through cancellation may take
 * a step of either sign (Adam's first step is lr * g / |g|), so the parameters are compared on
 * their change over the three steps, with the same norm-relative tolerance times 10 (a few such
 * elements among thousands move the norm of the difference by lr each).
 *
 * The bf16 table (txl_ops_cuda(TXL_BF16)) runs the same steps against the same CPU fp32 run.
 * It stores every activation, activation gradient and the GEMMs' copy of the weights in bf16,
 * each a rounding of relative error at most u8 = 2^-8 (the fp32 arithmetic between them is
 * three orders of magnitude finer and plays no role). On the way to the deepest parameter
 * gradients a value is rounded about 60 times: forward, the embedding, R, per layer about 12
 * stored tensors (the input, q, kv, R W_r, the attention vectors and their projection, the
 * residual sums, the layer-norm outputs, the FFN hidden layer, its dropout and its output) and
 * the logits; backward, the gradient of each; and the bf16 copy of the weight each of the 11
 * GEMMs reads. Each rounding perturbs the result by at most u8 relative through maps whose gain
 * on a perturbation is that on the signal (the argument above: unit-gain layer norms, a
 * non-amplifying residual stream). Added up in the worst case that is 60 u8 = 0.23, which would
 * check little; but rounding to nearest makes the errors independent and of either sign, each
 * uniform within half an ulp (between u8 / 2 and u8 of the value): about u8 / sqrt(3) relative,
 * RMS, per element. Over a whole tensor they add in quadrature: sqrt(60) u8 / sqrt(3) = 1.7e-2.
 * TOL_BF16 = 5e-2 is three times that: the largest of the ~90 tensors compared per run sits a
 * few standard deviations out, and exp / log and the divisions amplify a little (what the fp32
 * tolerance also leaves room for); a wiring error still gives errors of order 1. The loss, the
 * gradient norm and the log-probabilities (reductions over all of it) are held to the same
 * bound, the parameters' change to 10 TOL_BF16 as in fp32 (an element's Adam step flips sign
 * where its gradient's error exceeds the gradient: a share of about TOL_BF16 of the elements,
 * each off by 2 lr against steps of lr: 2 sqrt(TOL_BF16) = 0.45 of the norm at worst).
 * One mechanism is not a small perturbation: the ReLU of the FFN. A hidden unit whose
 * pre-activation lies within the rounding error of zero may be active in one run and not in the
 * other, and then its whole gradient entry is present in one run and missing in the other. If a
 * share f of the active entries flips, the gradients behind them (W_ff1, b_ff1, and through them
 * everything below) lose or gain entries that carry about sqrt(f) of their norm (the flipped
 * entries are a random subset of typical size). The test counts the flips of every layer (the
 * ReLU outputs of both runs, kept for the backward) and adds 2 sqrt(f) to the gradient
 * tolerance of the step, f the largest share over the layers (2: flipped entries may be larger
 * than typical); in fp32 runs f = 0 (a pre-activation within 1e-7 relative of zero is rare), in
 * bf16 runs a few units in a thousand.
 * The fp16 table (txl_ops_cuda(TXL_F16)) runs the same steps, held to the bf16 tolerances: every
 * rounding to fp16 of a value in its normal range errs by at most u16 = 2^-11 <= u8 relative,
 * so the argument above bounds the fp16 runs a fortiori (its sharper counterpart, TOL_BF16 / 8,
 * does not hold after the first step: the parameters of the two runs part through Adam's sign
 * flips, 2 sqrt(share) of the change, and the later gradients follow them, which the rounding
 * count leaves out; observed up to 1.7e-2 on sm_75's data). A wiring error is still of order 1.
 * fp16's range is the other difference:
 * its normal numbers end at 2^-14 below, and unscaled (the loss gradient 1 / (L B) ~ 1/27) the
 * activation gradients behind w_r (dr, of order 1e-5 and below) fall among the subnormals, whose
 * absolute error 2^-25 is then a large part of the value: w_r's gradient came out 5% to 150% off
 * without a scale. So the fp16 runs scale the loss gradient by FP16_LOSS_SCALE on both sides
 * (the grad_scale argument, as the loss scaler of src/train does; a power of 2, exact in fp32 on
 * the CPU): the gradients compared are both S times the unscaled ones (the comparison is
 * relative), and Adam's clipping to norm 0.25 (which every step here reaches: norms 0.3 to 1.7
 * unscaled) divides S out again. S keeps every value far below 65504 (the largest scaled
 * gradients, of the logits, are below S / 27). Runs on sm_75 too (fp16 tensor cores came with
 * sm_70). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "tests/cuda/parity.h"

#define TOL_NORM 1e-3
#define TOL_BF16 5e-2
#define FP16_LOSS_SCALE 1024.0     /* the fp16 runs' static loss scale: see the file comment */
#define STEPS 3

/* The norm-relative tolerances of one run: loss and gradient norm, each gradient tensor, each
 * parameter tensor's change over the steps, the inference log-probabilities. */
typedef struct {
  double loss, grad, param, logprob;
} Tols;

typedef struct {
  const char *name;
  TxlModelSpec spec;
  int L, B, mem_len, same_length, clamp_len;
} Case;

/* One backend's model, run state and optimizer. */
typedef struct {
  TxlModel m;
  TxlRun run;
  TxlAdam adam;
} Side;

static void side_create(Side *s, const TxlOps *ops, const Case *c) {
  txl_model_create(&s->m, ops, &c->spec);
  txl_model_init_params(&s->m, 0.02f, 0.01f, 1234u);
  TxlRunShape rs = {c->L, c->B, 0, c->mem_len, c->clamp_len, c->same_length, 1, 1, TXL_TAIL_NOT_COUNTED};
  txl_run_create(&s->run, &s->m, &rs);
  txl_adam_create(&s->adam, ops, s->m.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
}

static void side_destroy(Side *s) {
  txl_adam_destroy(&s->adam);
  txl_run_destroy(&s->run, &s->m);
  txl_model_destroy(&s->m);
}

/* A buffer of s's layout as the packed view (the backends pad the rows differently: the CPU not
 * at all, CUDA to 8 floats), [table.packed]. */
static float *to_host(const Side *s, const float *dev) {
  float *h = ot_alloc(s->m.table.total), *p = ot_alloc(s->m.table.packed);
  s->m.ops->to_host(h, dev, (size_t)s->m.table.total * sizeof(float));
  txl_params_pack(&s->m.table, h, p);
  free(h);
  return p;
}

/* ||a - b|| / ||b|| (0 when both are zero; NaN anywhere gives NaN). */
static double rel_norm(const float *a, const float *b, int64_t n) {
  double d = 0.0, r = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const double e = (double)a[i] - (double)b[i];
    d += e * e;
    r += (double)b[i] * b[i];
  }
  if (r == 0.0) return d == 0.0 ? 0.0 : INFINITY;
  return sqrt(d / r);
}

static void check_rel(const char *what, double rel, double tol) {
  printf("%-60s rel err %.3e  (tol %.2e)%s\n", what, rel, tol, rel <= tol ? "  ok" : "  FAIL");
  if (!(rel <= tol)) check_fail(what);
  else ot_record(1);
}

/* Every tensor of two packed views (to_host) of t's tensors. */
static void check_tensors(const char *what, const TxlParamTable *t, const float *got, const float *want,
                          double tol) {
  double worst = 0.0;
  const char *worst_name = "";
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    const double rel = rel_norm(got + ti->packed_offset, want + ti->packed_offset, ti->numel);
    if (!(rel <= tol)) {
      char msg[160];
      snprintf(msg, sizeof msg, "%s: tensor %s rel err %.3e > %.2e", what, ti->name, rel, tol);
      check_fail(msg);
    }
    if (!(rel <= worst)) worst = rel, worst_name = ti->name;
  }
  char line[160];
  snprintf(line, sizeof line, "%s: %d tensors, worst %s", what, t->n_tensors, worst_name);
  printf("%-60s rel err %.3e  (tol %.2e)%s\n", line, worst, tol, worst <= tol ? "  ok" : "  FAIL");
  if (worst <= tol) ot_record(1); /* each tensor out of tolerance counted a failure above */
}

/* The largest share, over the layers, of the FFN's ReLU units of the last training forward that
 * are active in one run and not in the other (flips), relative to the CPU's active units; the
 * flips and active units of that layer in *flips, *active. */
static double relu_flips(const Side *cpu, const Side *gpu, const Case *c, int64_t LB, int *flips, int *active) {
  const int di = c->spec.dims.d_inner;
  const int lda = txl_model_ld(&cpu->m, di), ldb = txl_model_ld(&gpu->m, di); /* each side's padded rows */
  float *a = ot_alloc(LB * lda), *b = ot_alloc(LB * ldb);
  double worst = 0.0;
  *flips = *active = 0;
  for (int l = 0; l < c->spec.dims.n_layer; l++) {
    txl_act_to_host(&cpu->m, a, cpu->run.acts[l].ff_a, LB * lda);
    txl_act_to_host(&gpu->m, b, gpu->run.acts[l].ff_a, LB * ldb);
    int f = 0, on = 0;
    for (int64_t t = 0; t < LB; t++)
      for (int j = 0; j < di; j++) {
        const float x = a[t * lda + j], y = b[t * ldb + j];
        f += (x > 0.0f) != (y > 0.0f);
        on += x > 0.0f;
      }
    const double share = on > 0 ? (double)f / on : 0.0;
    if (share > worst || l == 0) worst = share, *flips = f, *active = on;
  }
  free(a), free(b);
  return worst;
}

static void run_case(const Case *c, TxlDtype act, const Tols *tol, double loss_scale) {
  printf("-- %s, %s activations: %d layers, d %d, %d heads of %d, d_inner %d, V %d, L %d, B %d, mem %d%s%s\n", c->name,
         act_name(act), c->spec.dims.n_layer, c->spec.dims.d_model, c->spec.dims.n_head, c->spec.dims.d_head, c->spec.dims.d_inner,
         c->spec.dims.n_token, c->L, c->B, c->mem_len, c->same_length ? ", same_length" : "",
         c->spec.dims.n_clusters ? ", adaptive" : "");
  Side cpu, gpu;
  side_create(&cpu, txl_ops_cpu(), c);
  side_create(&gpu, txl_ops_cuda(act), c);
  const int64_t LB = (int64_t)c->L * c->B, packed = cpu.m.table.packed;
  const int V = c->spec.dims.n_token;
  int32_t *tok = malloc((size_t)(LB + c->B) * sizeof(int32_t));
  float *p0 = to_host(&cpu, cpu.m.param_buf);
  for (int step = 0; step < STEPS; step++) {
    for (int64_t i = 0; i < LB + c->B; i++) tok[i] = (int32_t)(parity_urand() * V);
    const float gscale = (float)(loss_scale / (double)LB);
    double loss[2], norm[2];
    Side *sides[2] = {&cpu, &gpu};
    for (int k = 0; k < 2; k++) {
      Side *s = sides[k];
      s->m.ops->zero(s->m.grad_buf, (size_t)s->m.table.total * sizeof(float));
      loss[k] = txl_model_forward(&s->m, &s->run, tok, tok + c->B, c->L, step, 1, gscale) / (double)LB;
      txl_model_backward(&s->m, &s->run, NULL, NULL);
      norm[k] = txl_grad_norm(s->m.ops, s->m.grad_buf, &s->m.table);
      txl_adam_step(&s->adam, s->m.param_buf, s->m.grad_buf, norm[k], 1.0, 1e-3f);
      txl_model_params_changed(&s->m);
    }
    char what[96];
    snprintf(what, sizeof what, "step %d: loss (cuda %.7f, cpu %.7f)", step, loss[1], loss[0]);
    check_rel(what, fabs(loss[1] - loss[0]) / fabs(loss[0]), tol->loss);
    snprintf(what, sizeof what, "step %d: gradient norm (cuda %.6g, cpu %.6g)", step, norm[1], norm[0]);
    check_rel(what, fabs(norm[1] - norm[0]) / norm[0], tol->loss);
    int flips, active;
    const double f = relu_flips(&cpu, &gpu, c, LB, &flips, &active);
    float *gc = to_host(&cpu, cpu.m.grad_buf), *gg = to_host(&gpu, gpu.m.grad_buf);
    snprintf(what, sizeof what, "step %d: gradients (ReLU flips %d of %d)", step, flips, active);
    check_tensors(what, &cpu.m.table, gg, gc, tol->grad + 2.0 * sqrt(f));
    free(gc), free(gg);
  }
  /* parameters: their change over the steps */
  float *pc = to_host(&cpu, cpu.m.param_buf), *pg = to_host(&gpu, gpu.m.param_buf);
  for (int64_t i = 0; i < packed; i++) pc[i] -= p0[i], pg[i] -= p0[i];
  check_tensors("parameters after Adam (change)", &cpu.m.table, pg, pc, tol->param);
  free(pc), free(pg);

  /* inference: two segments through the key/value cache, log-probabilities of the last row */
  TxlRun inf[2];
  TxlRunShape rs = {c->L, c->B, 0, c->mem_len, c->clamp_len, c->same_length, 0, 1, TXL_TAIL_NOT_COUNTED};
  float *lp[2];
  Side *sides[2] = {&cpu, &gpu};
  for (int k = 0; k < 2; k++) {
    txl_run_create(&inf[k], &sides[k]->m, &rs);
    for (int seg = 0; seg < 2; seg++) txl_model_forward(&sides[k]->m, &inf[k], tok, NULL, c->L, 0, 0, 0.0f);
    lp[k] = malloc((size_t)V * sizeof(float));
    txl_model_logprobs(&sides[k]->m, &inf[k], (int)LB - 1, lp[k]);
    txl_run_destroy(&inf[k], &sides[k]->m);
  }
  check_rel("inference (cached keys/values): log-probabilities", rel_norm(lp[1], lp[0], V), tol->logprob);
  free(lp[0]), free(lp[1]);
  free(tok), free(p0);
  side_destroy(&cpu);
  side_destroy(&gpu);
}

static TxlModelSpec spec(int n_layer, int d, int H, int dh, int di, int V, int pre, int untie) {
  TxlModelSpec s;
  memset(&s, 0, sizeof s);
  s.dims.n_token = V;
  s.dims.n_layer = n_layer;
  s.dims.d_model = d;
  s.dims.n_head = H;
  s.dims.d_head = dh;
  s.dims.d_inner = di;
  s.dims.untie_r = untie;
  s.dims.tie_weight = 1;
  txl_dims_single_softmax(&s.dims);
  s.dropout = 0.1f;
  s.dropatt = 0.1f;
  s.pre_lnorm = pre;
  s.ln_eps = TXL_LAYER_NORM_EPS;
  s.seed = 77;
  return s;
}

int main(void) {
  parity_begin("cuda whole training steps against the CPU backend");
  Case post = {"post-norm, full softmax", spec(2, 32, 2, 13, 64, 97, 0, 0), 9, 3, 11, 0, 0};
  Case pre = {"pre-norm, same_length, untied r biases, clamp_len", spec(2, 24, 3, 8, 40, 97, 1, 1), 7, 2, 10, 1, 6};
  Case ad = {"adaptive input and softmax (cutoffs 20, 60; div_val 2)", spec(2, 32, 2, 16, 48, 97, 0, 0), 9, 3, 9, 0, 0};
  ad.spec.dims.n_clusters = 2;
  ad.spec.dims.cut[1] = 20;
  ad.spec.dims.cut[2] = 60;
  ad.spec.dims.cut[3] = 97;
  ad.spec.dims.div_val = 2;
  ad.spec.dims.d_embed = 32;
  ad.spec.dims.tie_projs = 1;
  const Tols f32 = {TOL_NORM, TOL_NORM, 10 * TOL_NORM, TOL_NORM};
  const Tols bf16 = {TOL_BF16, TOL_BF16, 10 * TOL_BF16, TOL_BF16};
  /* the attention variants (model.attn_type; tables of max_klen = L + mem_len rows): Shaw et al.'s
   * with clamp_len (fewer rows than keys: the first one repeated), absolute sinusoids (pre-norm),
   * learned absolute positions per layer; attn_type 1 has no bf16 table (config.c refuses it) */
  Case shaw = {"attn_type 1 (Shaw et al.), clamp_len 8 < 20 keys, same_length", spec(2, 32, 2, 13, 64, 97, 0, 0), 9, 3,
               11, 1, 8};
  shaw.spec.dims.attn_type = 1;
  shaw.spec.dims.max_klen = 9 + 11;
  Case sin = {"attn_type 2 (absolute sinusoids), pre-norm", spec(2, 24, 3, 8, 40, 97, 1, 0), 7, 2, 10, 0, 0};
  sin.spec.dims.attn_type = 2;
  Case learned = {"attn_type 3 (learned absolute per layer)", spec(2, 32, 2, 16, 48, 97, 0, 0), 9, 3, 11, 1, 0};
  learned.spec.dims.attn_type = 3;
  learned.spec.dims.max_klen = 9 + 11;
  const Case *cases[] = {&post, &pre, &ad, &shaw, &sin, &learned};
  const int bf16_ok = parity_has_tf32_bf16("the bf16 steps");
  for (int k = 0; k < 6; k++) {
    run_case(cases[k], TXL_F32, &f32, 1.0);
    if (cases[k]->spec.dims.attn_type == 1) continue; /* fp32 only (model.attn_type = 1 refuses bf16, fp16) */
    if (bf16_ok) run_case(cases[k], TXL_BF16, &bf16, 1.0);
    run_case(cases[k], TXL_F16, &bf16, FP16_LOSS_SCALE); /* the bf16 bounds: file comment */
  }
  return parity_end();
}
