/* The whole C model against the PyTorch reference (tests/reference/txl_ref.py) through the
 * golden file tests/golden/golden.h5 (layout in tests/golden/README.md).
 *
 * For each case (/post, /pre, /adaptive, /adaptive_one_table): the parameters and tokens come
 * from the file; phase A runs three segments with fixed parameters (memory empty, partly full,
 * full) comparing logits (adaptive: log-probabilities), loss, the new memory and every gradient; phase B runs 10 training steps (clipping, Adam, schedule) with
 * txl_train_grad and txl_train_update, the trainer's own step, comparing losses, gradient norms,
 * learning rates and the final parameters.
 *
 * Error measure: for each tensor, max |c - ref| / max |ref| (errors relative to the tensor's
 * scale, so tiny elements do not divide by ~0).
 *
 * Tolerances, from fp32 arithmetic (unit roundoff u = 2^-24 = 6e-8). Both sides compute in
 * float32 but sum in different orders. One pass through this model is a chain of about 30
 * dependent ops (2 layers x [3 projections, scores, softmax, P v, W_o, LayerNorm, 2 FFN GEMMs,
 * LayerNorm], embedding, output GEMM, log-softmax); each adds a relative error of at most
 * n * u for its longest dot product, n <= 45 here (3 H dh), i.e. 2.7e-6 per op and 8e-5 for the
 * chain in the worst case (errors of random sign grow like sqrt: about 1.5e-5). The backward
 * pass is about twice as long: worst case 2.4e-4.
 *   forward (logits, loss, memory):   TOL_FWD  = 1e-4   (worst case 8e-5)
 *   gradients:                        TOL_GRAD = 3e-4   (worst case 2.4e-4)
 * Phase B: the gradient norm and loss of step s depend on s earlier updates; Adam's update
 * m / (sqrt(v) + eps) has relative error at most about 2x that of the gradient when |g| >> eps,
 * and lr * error per step accumulates over 10 steps into the parameters: |dp| <= 10 * lr * 2 *
 * TOL_GRAD = 1.2e-5 absolute against parameters of scale 0.02 .. 1, so params: TOL_PARAM = 1e-3
 * relative to the tensor's max (0.02 * 1e-3 = 2e-5 > 1.2e-5). Losses: TOL_FWD. Learning rates are
 * computed in double on both sides: 1e-12.
 */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/threads.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/optim/schedule.h"
#include "src/train/step.h"
#include "src/train/config_map.h"

#define TOL_FWD 1e-4
#define TOL_GRAD 3e-4
#define TOL_PARAM 1e-3
#define TOL_LR 1e-12

static int g_fail = 0, g_checks = 0;

static void die(const char *what, const char *name) {
  fprintf(stderr, "test_golden: cannot read %s '%s'\n", what, name);
  exit(1);
}

static double attr_f64(hid_t g, const char *name) {
  double v;
  hid_t a = H5Aopen(g, name, H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) die("attribute", name);
  H5Aclose(a);
  return v;
}

static int attr_int(hid_t g, const char *name) { return (int)lround(attr_f64(g, name)); }

static void attr_str(hid_t g, const char *name, char *out, size_t n) {
  hid_t a = H5Aopen(g, name, H5P_DEFAULT);
  if (a < 0) die("attribute", name);
  hid_t t = H5Aget_type(a);
  if (H5Tis_variable_str(t) > 0) {
    char *s = NULL;
    if (H5Aread(a, t, &s) < 0) die("attribute", name); /* the file's own type: ASCII or UTF-8 */
    snprintf(out, n, "%s", s);
    H5free_memory(s);
  } else {
    size_t sz = H5Tget_size(t);
    char *buf = calloc(sz + 1, 1);
    if (H5Aread(a, t, buf) < 0) die("attribute", name);
    snprintf(out, n, "%s", buf);
    free(buf);
  }
  H5Tclose(t);
  H5Aclose(a);
}

/* Reads a dataset of exactly n elements. */
static void read_ds(hid_t g, const char *name, hid_t memtype, void *out, size_t n) {
  hid_t d = H5Dopen(g, name, H5P_DEFAULT);
  if (d < 0) die("dataset", name);
  hid_t s = H5Dget_space(d);
  hssize_t count = H5Sget_simple_extent_npoints(s);
  if (count != (hssize_t)n) {
    fprintf(stderr, "test_golden: dataset '%s' has %lld elements, expected %zu\n", name, (long long)count, n);
    exit(1);
  }
  if (H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) die("dataset", name);
  H5Sclose(s);
  H5Dclose(d);
}

/* max |c - ref| / max |ref|; fails on NaN (the comparison is written so NaN fails). */
static void compare(const char *what, const float *c, const float *ref, size_t n, double tol) {
  double maxref = 0.0, maxerr = 0.0;
  for (size_t i = 0; i < n; i++) {
    double r = fabs((double)ref[i]);
    if (r > maxref) maxref = r;
  }
  int nan = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)c[i] - (double)ref[i]);
    if (!(e == e)) nan = 1;
    if (e > maxerr) maxerr = e;
  }
  double rel = maxref > 0.0 ? maxerr / maxref : maxerr;
  int ok = !nan && rel <= tol;
  g_checks++;
  if (!ok) g_fail++;
  printf("  %-34s max rel err %.2e (tol %.0e, scale %.3e) %s\n", what, nan ? NAN : rel, tol, maxref,
         ok ? "PASS" : "FAIL");
}

static void compare_scalar(const char *what, double c, double ref, double tol) {
  double rel = fabs(c - ref) / fmax(fabs(ref), 1e-30);
  int ok = rel <= tol;
  g_checks++;
  if (!ok) g_fail++;
  printf("  %-34s %.9g vs %.9g rel err %.2e (tol %.0e) %s\n", what, c, ref, rel, tol, ok ? "PASS" : "FAIL");
}

static void run_case(hid_t file, const char *case_name) {
  hid_t g = H5Gopen(file, case_name, H5P_DEFAULT);
  if (g < 0) die("group", case_name);
  printf("case %s\n", case_name);
  const TxlOps *ops = txl_ops_cpu();
  TxlModelSpec spec;
  memset(&spec, 0, sizeof spec);
  spec.dims.n_token = attr_int(g, "n_token");
  spec.dims.n_layer = attr_int(g, "n_layer");
  spec.dims.d_model = attr_int(g, "d_model");
  spec.dims.n_head = attr_int(g, "n_head");
  spec.dims.d_head = attr_int(g, "d_head");
  spec.dims.d_inner = attr_int(g, "d_inner");
  spec.dims.untie_r = attr_int(g, "untie_r");
  spec.dims.tie_weight = attr_int(g, "tie_weight");
  /* model.attn_type: written only when not 0 (the cases made before it have none) */
  spec.dims.attn_type = H5Aexists(g, "attn_type") > 0 ? attr_int(g, "attn_type") : 0;
  spec.dims.max_klen = spec.dims.attn_type == 1 || spec.dims.attn_type == 3
                           ? attr_int(g, "tgt_len") + attr_int(g, "mem_len")
                           : 0;
  /* adaptive input / softmax: cutoffs as text ("8,17"; "" for one softmax) */
  txl_dims_single_softmax(&spec.dims);
  char cutoffs[128];
  attr_str(g, "cutoffs", cutoffs, sizeof cutoffs);
  for (char *p = cutoffs, *end; *p; p = *end ? end + 1 : end) {
    spec.dims.cut[++spec.dims.n_clusters] = (int)strtol(p, &end, 10);
    if (end == p) die("attribute", "cutoffs");
  }
  spec.dims.cut[spec.dims.n_clusters + 1] = spec.dims.n_token;
  spec.dims.div_val = attr_int(g, "div_val");
  spec.dims.d_embed = attr_int(g, "d_embed") > 0 ? attr_int(g, "d_embed") : spec.dims.d_model;
  spec.dims.tie_projs = attr_int(g, "tie_projs");
  const int adaptive = spec.dims.n_clusters > 0 || txl_dims_has_proj(&spec.dims);
  spec.dropout = (float)attr_f64(g, "dropout");
  spec.dropatt = (float)attr_f64(g, "dropatt");
  spec.pre_lnorm = attr_int(g, "pre_lnorm");
  spec.ln_eps = TXL_LAYER_NORM_EPS;
  spec.seed = (uint32_t)attr_int(g, "seed");
  const int L = attr_int(g, "tgt_len"), B = attr_int(g, "batch"), mem_len = attr_int(g, "mem_len");
  const int V = spec.dims.n_token, d = spec.dims.d_model, n_layer = spec.dims.n_layer;
  const int n_seg = attr_int(g, "phaseA_segments"), n_steps = attr_int(g, "train_steps");

  TxlModel m;
  txl_model_create(&m, ops, &spec);
  const size_t total = (size_t)m.table.total;
  float *init = calloc(total, sizeof(float)); /* the padding between the tensors stays zero */
  char path[256];
  for (int k = 0; k < m.table.n_tensors; k++) {
    const TxlTensorInfo *ti = &m.table.tensors[k];
    snprintf(path, sizeof path, "params/%s", ti->name);
    read_ds(g, path, H5T_NATIVE_FLOAT, init + ti->offset, (size_t)ti->numel);
  }
  memcpy(m.param_buf, init, total * sizeof(float));
  const int rows = 10 * L + 1;
  int32_t *data = malloc((size_t)rows * B * sizeof(int32_t));
  read_ds(g, "data", H5T_NATIVE_INT32, data, (size_t)rows * B);

  TxlRunShape shape = {L, B, 0, mem_len, attr_int(g, "clamp_len"), attr_int(g, "same_length"), 1, 1,
                       TXL_TAIL_NOT_COUNTED};
  TxlRun run;
  txl_run_create(&run, &m, &shape);
  const size_t mem_floats = (size_t)n_layer * mem_len * B * d;
  float *mem_save = malloc(mem_floats * sizeof(float) + 4);
  float *ref = malloc((total > (size_t)L * B * V ? total : (size_t)L * B * V) * sizeof(float));
  float *mem_c = malloc(mem_floats * sizeof(float) + 4), *mem_now = malloc(mem_floats * sizeof(float) + 4);
  float *lp = malloc((size_t)L * B * V * sizeof(float));

  /* ---- phase A: fixed parameters, three segments, memory carried ---- */
  for (int s = 0; s < n_seg; s++) {
    const int32_t *in = data + (size_t)s * L * B, *tg = in + B;
    int M = run.mem_rows;
    txl_run_mems_to_host(&m, &run, mem_save); /* packed: in run.mems the layers lie mem_stride apart */
    /* logits (adaptive: log-probabilities): a forward without gradient, then the memory is put back */
    double loss_sum = txl_model_forward(&m, &run, in, tg, L, s, 1, 0.0f);
    snprintf(path, sizeof path, "segA%d/logits", s);
    read_ds(g, path, H5T_NATIVE_FLOAT, ref, (size_t)L * B * V);
    char what[96];
    if (adaptive) {
      for (int row = 0; row < L * B; row++) txl_model_logprobs(&m, &run, row, lp + (size_t)row * V);
      snprintf(what, sizeof what, "segment %d (M=%d) log-probabilities", s, M);
      compare(what, lp, ref, (size_t)L * B * V, TOL_FWD);
    } else {
      snprintf(what, sizeof what, "segment %d (M=%d) logits", s, M);
      compare(what, run.logits, ref, (size_t)L * B * V, TOL_FWD);
    }
    double ref_loss;
    snprintf(path, sizeof path, "segA%d/loss", s);
    read_ds(g, path, H5T_NATIVE_DOUBLE, &ref_loss, 1);
    snprintf(what, sizeof what, "segment %d loss", s);
    compare_scalar(what, loss_sum / ((double)L * B), ref_loss, TOL_FWD);
    txl_run_mems_to_device(&m, &run, mem_save);
    run.mem_rows = M;
    /* gradients */
    ops->zero(m.grad_buf, total * sizeof(float));
    txl_model_forward(&m, &run, in, tg, L, s, 1, (float)(1.0 / ((double)L * B)));
    txl_model_backward(&m, &run, NULL, NULL);
    int Mn = run.mem_rows;
    txl_run_mems_to_host(&m, &run, mem_now);
    for (int l = 0; l < n_layer; l++)
      memcpy(mem_c + (size_t)l * Mn * B * d, mem_now + (size_t)l * mem_len * B * d, (size_t)Mn * B * d * sizeof(float));
    snprintf(path, sizeof path, "segA%d/mems", s);
    read_ds(g, path, H5T_NATIVE_FLOAT, ref, (size_t)n_layer * Mn * B * d);
    snprintf(what, sizeof what, "segment %d new memory (%d rows)", s, Mn);
    compare(what, mem_c, ref, (size_t)n_layer * Mn * B * d, TOL_FWD);
    for (int k = 0; k < m.table.n_tensors; k++) {
      const TxlTensorInfo *ti = &m.table.tensors[k];
      snprintf(path, sizeof path, "segA%d/grads/%s", s, ti->name);
      read_ds(g, path, H5T_NATIVE_FLOAT, ref, (size_t)ti->numel);
      snprintf(what, sizeof what, "segment %d d %s", s, ti->name);
      compare(what, m.grad_buf + ti->offset, ref, (size_t)ti->numel, TOL_GRAD);
    }
  }

  /* ---- an inference run (memory rows' keys and values and R W_r cached) against the training
   * run, both without dropout, over the same three segments: the same losses and outputs ---- */
  {
    TxlRunShape ishape = shape;
    ishape.training = 0;
    TxlRun inf;
    txl_run_create(&inf, &m, &ishape);
    txl_run_reset_memory(&run);
    const size_t out_n = (size_t)L * B * V;
    float *want = malloc(out_n * sizeof(float)), *got = malloc(out_n * sizeof(float));
    for (int s = 0; s < n_seg; s++) {
      const int32_t *in = data + (size_t)s * L * B, *tg = in + B;
      const double lt = txl_model_forward(&m, &run, in, tg, L, s, 0, 0.0f);
      const double li = txl_model_forward(&m, &inf, in, tg, L, s, 0, 0.0f);
      for (int row = 0; row < L * B; row++) {
        txl_model_logprobs(&m, &run, row, want + (size_t)row * V);
        txl_model_logprobs(&m, &inf, row, got + (size_t)row * V);
      }
      char what[96];
      snprintf(what, sizeof what, "inference run segment %d log-probs", s);
      compare(what, got, want, out_n, TOL_FWD);
      snprintf(what, sizeof what, "inference run segment %d loss", s);
      compare_scalar(what, li, lt, TOL_FWD);
    }
    free(want);
    free(got);
    txl_run_destroy(&inf, &m);
  }

  /* ---- phase B: 10 training steps from the initial parameters ---- */
  memcpy(m.param_buf, init, total * sizeof(float));
  txl_run_reset_memory(&run);
  TxlAdam adam;
  txl_adam_create(&adam, ops, m.table.total, (float)attr_f64(g, "beta1"), (float)attr_f64(g, "beta2"),
                  (float)attr_f64(g, "eps"), (float)attr_f64(g, "clip"));
  char sched_name[32];
  attr_str(g, "scheduler", sched_name, sizeof sched_name);
  TxlSchedule sched = {.kind = txl_sched_kind_of(txl_config_choice_value(TXL_CFG_KEY_scheduler, sched_name)), .lr = attr_f64(g, "lr"),
                       .eta_min = attr_f64(g, "eta_min"), .warmup_step = attr_int(g, "warmup_step"),
                       .max_step = attr_int(g, "max_step")};
  double ref_loss[64], ref_norm[64], ref_lr[64];
  read_ds(g, "train/loss", H5T_NATIVE_DOUBLE, ref_loss, (size_t)n_steps);
  read_ds(g, "train/grad_norm", H5T_NATIVE_DOUBLE, ref_norm, (size_t)n_steps);
  read_ds(g, "train/lr", H5T_NATIVE_DOUBLE, ref_lr, (size_t)n_steps);
  for (int s = 0; s < n_steps; s++) {
    const int32_t *in = data + (size_t)s * L * B, *tg = in + B;
    const double loss = txl_train_grad(&m, &run, s, B, NULL, NULL, in, tg, L, 1.0);
    txl_train_clip(&m, &adam, NULL, 1.0);
    TxlGradClip rec; /* the norm the step left on the device */
    txl_optim_read_clip(&adam, &rec);
    const double norm = rec.norm;
    txl_train_update(&m, &adam, NULL, &sched, s);
    char what[64];
    snprintf(what, sizeof what, "step %d loss", s);
    compare_scalar(what, loss, ref_loss[s], TOL_FWD);
    snprintf(what, sizeof what, "step %d grad norm", s);
    compare_scalar(what, norm, ref_norm[s], TOL_GRAD);
    snprintf(what, sizeof what, "step %d lr", s);
    compare_scalar(what, txl_schedule_lr(&sched, s), ref_lr[s], TOL_LR);
  }
  for (int k = 0; k < m.table.n_tensors; k++) {
    const TxlTensorInfo *ti = &m.table.tensors[k];
    snprintf(path, sizeof path, "train/params/%s", ti->name);
    read_ds(g, path, H5T_NATIVE_FLOAT, ref, (size_t)ti->numel);
    char what[96];
    snprintf(what, sizeof what, "after 10 steps %s", ti->name);
    compare(what, m.param_buf + ti->offset, ref, (size_t)ti->numel, TOL_PARAM);
  }
  txl_adam_destroy(&adam);
  txl_run_destroy(&run, &m);
  txl_model_destroy(&m);
  free(init);
  free(data);
  free(mem_save);
  free(mem_c);
  free(mem_now);
  free(lp);
  free(ref);
  H5Gclose(g);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_golden GOLDEN.h5\n");
    return 2;
  }
  txl_cpu_set_threads(2);
  hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) die("file", argv[1]);
  run_case(f, "post");
  run_case(f, "pre");
  run_case(f, "adaptive");
  run_case(f, "adaptive_one_table");
  run_case(f, "shaw");
  run_case(f, "abs_sin");
  run_case(f, "abs_learned");
  run_case(f, "abs_learned_pre");
  H5Fclose(f);
  printf("golden: %d checks, %d failed\n", g_checks, g_fail);
  return g_fail ? 1 : 0;
}
