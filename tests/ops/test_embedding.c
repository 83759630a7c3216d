/* embedding forward/backward (repeated token ids) and the sinusoidal position embedding. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

/* ---- double reference of the embedding forward, for finite differences ----------------- */
typedef struct {
  const int32_t *tok;
  double *emb; /* [V, d], perturbed by ot_fd_grad */
  const double *w; /* [n, d] projection */
  double scale;
  int64_t n;
  int d;
} EmbCtx;

static double emb_loss(void *p) {
  EmbCtx *c = p;
  double s = 0.0;
  for (int64_t t = 0; t < c->n; t++)
    for (int j = 0; j < c->d; j++) s += c->emb[(int64_t)c->tok[t] * c->d + j] * c->scale * c->w[t * c->d + j];
  return s;
}

static void test_embedding(int64_t n, int V, int d, int use_fd, OtRng *rng) {
  char name[96];
  const float scale = 2.6457513f; /* sqrt(7) */
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  for (int64_t t = 0; t < n; t++) tok[t] = ot_randint(rng, V);
  tok[0] = V - 1; /* the last row, and repeats of it */
  if (n > 3) tok[n - 1] = V - 1, tok[n / 2] = V - 1;
  float *emb = ot_alloc((int64_t)V * d), *out = ot_alloc(n * d), *dout = ot_alloc(n * d);
  float *demb = ot_alloc((int64_t)V * d);
  double *want = ot_alloc_d(n * d), *wd = ot_alloc_d(n * d), *embd = ot_alloc_d((int64_t)V * d);
  double *gw = ot_alloc_d((int64_t)V * d), *bound = ot_alloc_d((int64_t)V * d);
  ot_fill(emb, (int64_t)V * d, -1.0f, 1.0f, rng);
  ot_fill(dout, n * d, -1.0f, 1.0f, rng);
  ot_fill(demb, (int64_t)V * d, -0.5f, 0.5f, rng); /* demb accumulates */

  /* forward: one rounding (emb * scale): |err| <= u |want| */
  for (int64_t t = 0; t < n; t++)
    for (int j = 0; j < d; j++) want[t * d + j] = (double)emb[(int64_t)tok[t] * d + j] * scale;
  txl_cpu_embedding_forward(out, tok, emb, scale, n, d, d, d);
  snprintf(name, sizeof name, "embedding_forward n=%lld V=%d d=%d", (long long)n, V, d);
  ot_check(name, out, want, n * d, 0.0, OT_U);

  /* backward: gradient of loss = sum(out * dout) w.r.t. emb, added to demb0. */
  ot_to_double(wd, dout, n * d);
  ot_to_double(embd, emb, (int64_t)V * d);
  EmbCtx ctx = {tok, embd, wd, scale, n, d};
  const double eps = 1e-6;
  double l1 = 0.0; /* sum |terms| of the loss: bounds the roundoff of its double evaluation */
  for (int64_t t = 0; t < n; t++)
    for (int j = 0; j < d; j++) l1 += fabs(embd[(int64_t)tok[t] * d + j] * scale * wd[t * d + j]);
  if (use_fd) {
    ot_fd_grad(gw, embd, (int64_t)V * d, eps, emb_loss, &ctx);
  } else {
    for (int64_t t = 0; t < n; t++)
      for (int j = 0; j < d; j++) gw[(int64_t)tok[t] * d + j] += (double)dout[t * d + j] * scale;
  }
  /* Bound per element: demb0 + sum of c products dout*scale (c = count of the token): each
   * product one rounding, the c + 1 term sum gamma_{c+1}: (c + 2) u (|demb0| + sum |dout scale|).
   * Finite differences add at most ~100 double roundings of the loss divided by eps:
   * 100 * 2^-53 * l1 / eps (about 1e-9 relative to l1 here). */
  double *sabs = ot_alloc_d((int64_t)V * d);
  int *cnt = calloc((size_t)V, sizeof *cnt);
  for (int64_t t = 0; t < n; t++) {
    cnt[tok[t]]++;
    for (int j = 0; j < d; j++) sabs[(int64_t)tok[t] * d + j] += fabs((double)dout[t * d + j] * scale);
  }
  const double fd_tol = use_fd ? 100.0 * ldexp(1.0, -53) * l1 / eps : 0.0;
  for (int v = 0; v < V; v++)
    for (int j = 0; j < d; j++) {
      const int64_t k = (int64_t)v * d + j;
      gw[k] += demb[k];
      bound[k] = 1.01 * (cnt[v] + 2) * OT_U * (fabs(demb[k]) + sabs[k]) + fd_tol;
    }
  txl_cpu_embedding_backward(demb, TXL_F32, dout, tok, scale, n, d, d, d);
  snprintf(name, sizeof name, "embedding_backward demb (%s)", use_fd ? "vs FD" : "vs double sum");
  ot_check_bound(name, demb, gw, bound, (int64_t)V * d);
  free(tok), free(emb), free(out), free(dout), free(demb), free(want), free(wd), free(embd);
  free(gw), free(bound), free(sabs), free(cnt);
}

static void test_embedding_threads(OtRng *rng) {
  const int64_t n = 4001;
  const int V = 37, d = 129;
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  for (int64_t t = 0; t < n; t++) tok[t] = ot_randint(rng, V);
  float *dout = ot_alloc(n * d), *g1 = ot_alloc((int64_t)V * d), *g2 = ot_alloc((int64_t)V * d);
  float *g3 = ot_alloc((int64_t)V * d);
  ot_fill(dout, n * d, -1.0f, 1.0f, rng);
  omp_set_num_threads(1);
  txl_cpu_embedding_backward(g1, TXL_F32, dout, tok, 0.5f, n, d, d, d);
  omp_set_num_threads(2);
  txl_cpu_embedding_backward(g2, TXL_F32, dout, tok, 0.5f, n, d, d, d);
  omp_set_num_threads(3);
  txl_cpu_embedding_backward(g3, TXL_F32, dout, tok, 0.5f, n, d, d, d);
  omp_set_num_threads(2);
  ot_check_same("embedding_backward threads 1 vs 2", g1, g2, (size_t)V * d * sizeof(float));
  ot_check_same("embedding_backward threads 1 vs 3", g1, g3, (size_t)V * d * sizeof(float));
  free(tok), free(dout), free(g1), free(g2), free(g3);
}

/* The activation rows ldo > d apart (the model's padded rows): the gather's output rows and the
 * scatter-add's dout rows. The same arithmetic in the same order as packed rows, so the packed
 * run's bits exactly; NaN in dout's gaps would poison a row that read them, and out's gaps must
 * keep their fill. */
static void test_embedding_padded(int64_t n, int V, int d, int lde, int ldo, OtRng *rng) {
  char name[128];
  const float nan = NAN;
  int32_t *tok = malloc((size_t)n * sizeof *tok);
  for (int64_t t = 0; t < n; t++) tok[t] = ot_randint(rng, V);
  float *emb = ot_alloc((int64_t)V * lde), *out = ot_alloc(n * d), *outp = ot_alloc(n * ldo);
  float *dout = ot_alloc(n * d), *doutp = ot_alloc(n * ldo);
  float *g = ot_alloc((int64_t)V * lde), *gp = ot_alloc((int64_t)V * lde);
  ot_fill(emb, (int64_t)V * lde, -1.0f, 1.0f, rng);
  ot_fill(dout, n * d, -1.0f, 1.0f, rng);
  ot_pad_rows(doutp, dout, n, d, ldo, nan);
  ot_pad_rows(outp, out, n, d, ldo, nan);
  txl_cpu_embedding_forward(out, tok, emb, 1.5f, n, d, lde, d);
  txl_cpu_embedding_forward(outp, tok, emb, 1.5f, n, d, lde, ldo);
  snprintf(name, sizeof name, "embedding_forward out, d %d", d);
  ot_check_padded(name, outp, out, n, d, ldo, nan);
  txl_cpu_embedding_backward(g, TXL_F32, dout, tok, 0.5f, n, d, lde, d);
  txl_cpu_embedding_backward(gp, TXL_F32, doutp, tok, 0.5f, n, d, lde, ldo);
  snprintf(name, sizeof name, "embedding_backward dout rows %d apart, d %d", ldo, d);
  ot_check_same(name, gp, g, (size_t)V * lde * sizeof(float));
  free(tok), free(emb), free(out), free(outp), free(dout), free(doutp), free(g), free(gp);
}

/* ---- position embedding ------------------------------------------------------------------ */
/* Ids below 0 (adaptive_group's padding): forward, a row of zeros and the other rows as without
 * them; backward, the gradient bit for bit that of the call without the padding rows. */
static void test_embedding_padding(int64_t n, int V, int d, OtRng *rng) {
  int32_t *tok = malloc((size_t)n * sizeof *tok), *kept = malloc((size_t)n * sizeof *kept);
  float *emb = ot_alloc((int64_t)V * d), *out = ot_alloc(n * d), *dout = ot_alloc(n * d), *dkept = ot_alloc(n * d);
  float *want = ot_alloc(n * d), *g = ot_alloc((int64_t)V * d), *gw = ot_alloc((int64_t)V * d);
  ot_fill(emb, (int64_t)V * d, -1.0f, 1.0f, rng);
  ot_fill(dout, n * d, -1.0f, 1.0f, rng);
  ot_fill(out, n * d, 5.0f, 6.0f, rng); /* every element must be written */
  int64_t m = 0;
  for (int64_t t = 0; t < n; t++) {
    tok[t] = t % 3 == 1 ? -1 : ot_randint(rng, V);
    if (tok[t] >= 0) {
      kept[m] = tok[t];
      memcpy(dkept + m * d, dout + t * d, (size_t)d * sizeof(float));
      m++;
    }
    for (int j = 0; j < d; j++) want[t * d + j] = tok[t] < 0 ? 0.0f : emb[(int64_t)tok[t] * d + j] * 0.5f;
  }
  txl_cpu_embedding_forward(out, tok, emb, 0.5f, n, d, d, d);
  char name[96];
  snprintf(name, sizeof name, "forward, ids -1 (n=%lld d=%d)", (long long)n, d);
  ot_check_same(name, out, want, (size_t)(n * d) * sizeof(float));
  ot_fill(g, (int64_t)V * d, -1.0f, 1.0f, rng);
  memcpy(gw, g, (size_t)V * d * sizeof(float));
  txl_cpu_embedding_backward(g, TXL_F32, dout, tok, 0.5f, n, d, d, d);
  txl_cpu_embedding_backward(gw, TXL_F32, dkept, kept, 0.5f, m, d, d, d);
  snprintf(name, sizeof name, "backward, ids -1 add nothing");
  ot_check_same(name, g, gw, (size_t)V * d * sizeof(float));
  free(tok), free(kept), free(emb), free(out), free(dout), free(dkept), free(want), free(g), free(gw);
}

static void test_posemb(int K, int d, int clamp_len) {
  char name[96];
  float *R = ot_alloc((int64_t)K * d);
  double *want = ot_alloc_d((int64_t)K * d);
  for (int p = 0; p < K; p++) {
    double pos = K - 1 - p;
    if (clamp_len > 0 && pos > clamp_len) pos = clamp_len;
    for (int i = 0; i < d / 2; i++) {
      const double inv_freq = exp(-log(10000.0) * (2.0 * i) / d); /* 1 / 10000^(2i/d) */
      want[(int64_t)p * d + i] = sin(pos * inv_freq);
      want[(int64_t)p * d + d / 2 + i] = cos(pos * inv_freq);
    }
  }
  txl_cpu_posemb_forward(R, K, d, d, clamp_len);
  /* The op computes in double and rounds once to float: within 1 ulp (<= 2u relative) of the
   * exact value, allowing for the last bits of the double computation landing on the other side
   * of a float rounding boundary; 1e-12 absolute covers values near 0 (the double argument
   * pos * f carries an error of about pos * 2^-53). */
  snprintf(name, sizeof name, "posemb K=%d d=%d clamp_len=%d", K, d, clamp_len);
  ot_check(name, R, want, (int64_t)K * d, 1e-12, 2 * OT_U);
  /* rows ld > d apart (the model's padded rows): the same values per row, the gaps untouched */
  const int ld = d + 5;
  float *Rp = ot_alloc((int64_t)K * ld);
  ot_pad_rows(Rp, R, K, d, ld, NAN);
  txl_cpu_posemb_forward(Rp, K, d, ld, clamp_len);
  snprintf(name, sizeof name, "posemb K=%d d=%d padded rows", K, d);
  ot_check_padded(name, Rp, R, K, d, ld, NAN);
  free(Rp);
  free(R), free(want);
}

int main(void) {
  OtRng rng = ot_rng(3);
  printf("embedding\n");
  test_embedding(1, 13, 7, 1, &rng);
  test_embedding(37, 13, 7, 1, &rng);
  test_embedding(29, 5, 33, 1, &rng);
  test_embedding(2003, 41, 67, 0, &rng); /* parallel path */
  test_embedding_threads(&rng);
  test_embedding_padded(37, 13, 7, 8, 8, &rng);
  test_embedding_padded(2003, 41, 67, 72, 72, &rng); /* parallel path */
  test_embedding_padded(50, 11, 410, 416, 419, &rng);
  test_embedding_padding(40, 9, 5, &rng);
  test_embedding_padding(2003, 41, 67, &rng); /* parallel path */
  printf("posemb\n");
  test_posemb(1, 2, 0);
  test_posemb(1, 8, 3);
  test_posemb(13, 8, 0);
  test_posemb(20, 10, 5);
  test_posemb(300, 64, 0);
  test_posemb(300, 64, 100);
  return ot_finish("test_op_embedding");
}
