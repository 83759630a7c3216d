/* Relative multi-head attention: forward (vec, prob) against a naive double reference of the math
 * in kernels/ops.h, for each combination of optional parts the model uses (attn_type 0: u, vb, r;
 * 1: u, r, rb; 2 and 3: none), backward (dq, dkv, dr, du, dvb, drb) against central
 * finite differences of that reference, with causal / same_length masks, memory, dropatt (keyed
 * masks, so the reference draws the same ones), col0 > 0, odd sizes everywhere; thread-count
 * independence; rows ld > width apart (the shape's ldq, ldkv, ldr): the packed call's bits, the
 * gaps neither read nor written; a stride below its width ends the job. The reference is packed:
 * the calls checked against it are too. */
#define _POSIX_C_SOURCE 200809L /* fork, dup2 */
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/common/dropout.h"
#include "src/model/dropout_sites.h"
#include "kernels/cpu/cpu_kernels.h"
#include "src/model/params.h" /* txl_row_ld */
#include "tests/lib/ref_rel_attn.h"
#include "tests/ops/op_test.h"

/* The loss whose gradients the backward computes: sum(vec * dvec). */
static double ref_loss(void *ctx) {
  RefAttn *a = ctx;
  ref_attn_forward(a);
  const TxlAttnShape *s = &a->s;
  return ot_dot(a->vec, a->dvec, (int64_t)s->L * s->B * s->H * s->dh);
}

/* Which optional parts a case passes (the others NULL to the op, zeros to the reference). */
enum { V_TYPE0, V_SHAW, V_PLAIN };
static const char *const VARIANT_NAMES[] = {"u vb r (attn_type 0)", "u r rb (attn_type 1)", "plain (attn_type 2, 3)"};

typedef struct {
  int L, M, B, H, dh, col0, same_length, same_shift;
  float p;
  int use_fd;
  int variant; /* V_* */
} Case;

/* The shape of a case, its rows packed (each ld its rows' width). */
static TxlAttnShape case_shape(const Case *cs) {
  const int HD = cs->H * cs->dh;
  return (TxlAttnShape){cs->L, cs->M, cs->B, cs->H, cs->dh, cs->col0, cs->same_length, cs->same_shift,
                        (float)(1.0 / sqrt((double)cs->dh)), HD, 2 * HD, HD};
}

static void run_case(const Case *cs, OtRng *rng) {
  char name[160];
  TxlAttnShape s = case_shape(cs);
  const int K = s.M + s.L, dh = s.dh, HD = s.H * dh;
  TxlDropout drop = {cs->p, 2024u, txl_layer_site(1, TXL_LSITE_ATTN_PROB), 5u, NULL};
  const int64_t nq = (int64_t)s.L * s.B * HD, nkv = (int64_t)K * s.B * 2 * HD, nr = (int64_t)K * HD;
  const int64_t np = (int64_t)s.B * s.H * s.L * K;
  printf("rel_attn L=%d M=%d B=%d H=%d dh=%d col0=%d same_length=%d same_shift=%d dropatt=%.2f, %s\n",
         s.L, s.M, s.B, s.H, dh, s.col0, s.same_length, s.same_shift, (double)cs->p, VARIANT_NAMES[cs->variant]);
  const int has_u = cs->variant != V_PLAIN, has_vb = cs->variant == V_TYPE0, has_r = cs->variant != V_PLAIN;
  const int has_rb = cs->variant == V_SHAW;
  const int64_t nrb = (int64_t)K * s.H;

  float *q = ot_alloc(nq), *kv = ot_alloc(nkv), *r = ot_alloc(nr), *u = ot_alloc(HD), *vb = ot_alloc(HD);
  float *dvec = ot_alloc(nq), *vec = ot_alloc(nq), *prob = ot_alloc(np);
  float *dq = ot_alloc(nq), *dkv = ot_alloc(nkv), *dr = ot_alloc(nr), *du = ot_alloc(HD), *dvb = ot_alloc(HD);
  ot_fill(q, nq, -1.0f, 1.0f, rng), ot_fill(kv, nkv, -1.0f, 1.0f, rng), ot_fill(r, nr, -1.0f, 1.0f, rng);
  ot_fill(u, HD, -0.5f, 0.5f, rng), ot_fill(vb, HD, -0.5f, 0.5f, rng), ot_fill(dvec, nq, -1.0f, 1.0f, rng);
  ot_fill(du, HD, -1.0f, 1.0f, rng), ot_fill(dvb, HD, -1.0f, 1.0f, rng); /* parameters: += */
  float *rb = ot_alloc(nrb), *drb = ot_alloc(nrb);
  ot_fill(rb, nrb, -0.5f, 0.5f, rng);
  for (int64_t k = 0; k < nrb; k++) drb[k] = NAN; /* overwritten */
  /* the absent parts: zeros for the reference, NULL for the op */
  if (!has_u) memset(u, 0, (size_t)HD * sizeof(float));
  if (!has_vb) memset(vb, 0, (size_t)HD * sizeof(float));
  if (!has_r) memset(r, 0, (size_t)nr * sizeof(float));
  const float *op_u = has_u ? u : NULL, *op_vb = has_vb ? vb : NULL, *op_r = has_r ? r : NULL;
  const float *op_rb = has_rb ? rb : NULL;
  for (int64_t k = 0; k < nq; k++) dq[k] = NAN; /* activations: must be overwritten, every element */
  for (int64_t k = 0; k < nkv; k++) dkv[k] = NAN;
  for (int64_t k = 0; k < nr; k++) dr[k] = NAN;
  for (int64_t k = 0; k < np; k++) prob[k] = NAN;
  for (int64_t k = 0; k < nq; k++) vec[k] = NAN;

  RefAttn a = {.s = s, .drop = drop, .K = K, .q = ot_alloc_d(nq), .kv = ot_alloc_d(nkv), .r = ot_alloc_d(nr),
               .u = ot_alloc_d(HD), .vb = ot_alloc_d(HD), .dvec = ot_alloc_d(nq), .vec = ot_alloc_d(nq),
               .prob = ot_alloc_d(np), .drop_factor = ot_alloc_d(np), .rb = has_rb ? ot_alloc_d(nrb) : NULL};
  if (has_rb) ot_to_double(a.rb, rb, nrb);
  ot_to_double(a.q, q, nq), ot_to_double(a.kv, kv, nkv), ot_to_double(a.r, r, nr);
  ot_to_double(a.u, u, HD), ot_to_double(a.vb, vb, HD), ot_to_double(a.dvec, dvec, nq);
  ref_attn_forward(&a);

  const size_t wbytes = txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1);
  void *work = ot_alloc((int64_t)(wbytes + 3) / 4);
  txl_cpu_rel_attn_forward(vec, prob, q, kv, op_r, op_u, op_vb, op_rb, s, drop, work);

  /* ---- forward bounds (u = 2^-24) -------------------------------------------------------
   * score: two length-dh dot products (q + u, q + vb: one rounding per term), their sum and
   *   the scale: ds <= (dh + 4) u A,  A = scale (sum_e (|q+u| |k| + |q+vb| |r|) + |rb|) (rb: one
   *   more addition, inside the 4 single roundings);
   * prob: p = exp(s_j - m) / sum; d ln p_j = ds_j - sum_k p_k ds_k, so a relative 2 max ds,
   *   plus exp (1-2 ulp), a K-term float sum (gamma_K), the division: (K + 4) u;
   *   masked entries must be exactly 0;
   * vec: K-term dot of dropatt(prob) with v: (K + 1) u sum |pd v| + sum_j |v| D bound_p.     */
  double ds_max = 0.0;
  for (int c = 0; c < s.B; c++)
    for (int h = 0; h < s.H; h++)
      for (int i = 0; i < s.L; i++)
        for (int j = 0; j < K; j++) {
          if (!attn_visible(&s, i, j)) continue;
          const int t = K - 1 - (s.M + i - j);
          double A = 0.0;
          for (int e = 0; e < dh; e++)
            A += fabs(a.q[q_at(&s, i, c, h) + e] + a.u[h * dh + e]) * fabs(a.kv[k_at(&s, j, c, h) + e]) +
                 fabs(a.q[q_at(&s, i, c, h) + e] + a.vb[h * dh + e]) * fabs(a.r[r_at(&s, t, h) + e]);
          if (has_rb) A += fabs(a.rb[(int64_t)t * s.H + h]);
          const double ds = (dh + 4) * OT_U * s.scale * A;
          if (ds > ds_max) ds_max = ds;
        }
  const double p_rel = 2.0 * ds_max + (K + 4) * OT_U;
  double *bp = ot_alloc_d(np), *bvec = ot_alloc_d(nq);
  for (int64_t k = 0; k < np; k++) bp[k] = 1.01 * a.prob[k] * p_rel;
  for (int c = 0; c < s.B; c++)
    for (int h = 0; h < s.H; h++)
      for (int i = 0; i < s.L; i++)
        for (int e = 0; e < dh; e++) {
          double sa = 0.0, sp = 0.0;
          for (int j = 0; j < K; j++) {
            const int64_t pk = row_at(&s, c, h, i) * K + j;
            const double vj = fabs(a.kv[v_at(&s, j, c, h) + e]);
            sa += a.prob[pk] * a.drop_factor[pk] * vj;
            sp += a.drop_factor[pk] * bp[pk] * vj;
          }
          bvec[q_at(&s, i, c, h) + e] = 1.01 * ((K + 1) * OT_U * sa + sp);
        }
  ot_check_bound("vec", vec, a.vec, bvec, nq);
  ot_check_bound("prob (before dropatt)", prob, a.prob, bp, np);

  /* ---- backward ------------------------------------------------------------------------ */
  double *gq = ot_alloc_d(nq), *gkv = ot_alloc_d(nkv), *gr = ot_alloc_d(nr), *gu = ot_alloc_d(HD), *gvb = ot_alloc_d(HD);
  double *aq = ot_alloc_d(nq), *akv = ot_alloc_d(nkv), *ar = ot_alloc_d(nr), *au = ot_alloc_d(HD), *avb = ot_alloc_d(HD);
  double *grb = ot_alloc_d(nrb), *arb = ot_alloc_d(nrb), *mrb = ot_alloc_d(nrb), *brb = ot_alloc_d(nrb);
  /* The gradients of the double reference: analytic, and (small cases) finite differences. */
  ref_attn_backward(aq, akv, ar, au, avb, has_rb ? arb : NULL, &a, 0, NULL);
  const double eps = 1e-6;
  if (cs->use_fd) {
    ot_fd_grad(gq, a.q, nq, eps, ref_loss, &a);
    ot_fd_grad(gkv, a.kv, nkv, eps, ref_loss, &a);
    ot_fd_grad(gr, a.r, nr, eps, ref_loss, &a);
    ot_fd_grad(gu, a.u, HD, eps, ref_loss, &a);
    ot_fd_grad(gvb, a.vb, HD, eps, ref_loss, &a);
    if (has_rb) ot_fd_grad(grb, a.rb, nrb, eps, ref_loss, &a);
    ref_attn_forward(&a);
  } else {
    memcpy(gq, aq, (size_t)nq * sizeof(double)), memcpy(gkv, akv, (size_t)nkv * sizeof(double));
    memcpy(gr, ar, (size_t)nr * sizeof(double)), memcpy(gu, au, (size_t)HD * sizeof(double));
    memcpy(gvb, avb, (size_t)HD * sizeof(double)), memcpy(grb, arb, (size_t)nrb * sizeof(double));
  }
  /* Magnitudes of the terms of every gradient element (the reference backward on |.|). */
  double *mq = ot_alloc_d(nq), *mkv = ot_alloc_d(nkv), *mr = ot_alloc_d(nr), *mu = ot_alloc_d(HD), *mvb = ot_alloc_d(HD);
  ref_attn_backward(mq, mkv, mr, mu, mvb, has_rb ? mrb : NULL, &a, 1, NULL);
  /* Bound per element (first-order running error analysis): a computed sum/product chain with
   * at most N roundings on any path is within N u of the exact value relative to the sum of the
   * absolute values of its terms, which is what the |.| backward computes. The longest chains:
   * the forward score (2 dh), the softmax sum (K), d prob (dh), the softmax-backward dot (K), dq
   * and dk (K and L), dr / du / dvb summed over all B columns and L rows (2 B L), plus ~16 single
   * roundings: N = 2 dh + 2 K + 2 B L + 16. The probabilities enter up to quadratically, each with
   * the relative error p_rel above: + 2 p_rel. Finite differences in double (eps = 1e-6):
   * truncation eps^2 |f'''| / 6 ~ 1e-12 and roundoff ~ 2^-53 |loss| sqrt(n) / eps ~ 1e-9 here;
   * allowed 1e-8 (1 + max |grad|) — the "FD vs analytic" lines below show the actual size.   */
  const double rel = (2.0 * dh + 2.0 * K + 2.0 * s.B * s.L + 16.0) * OT_U + 2.0 * p_rel;
  double gmax = fmax(fmax(ot_max_abs(gq, nq), ot_max_abs(gkv, nkv)), fmax(ot_max_abs(gr, nr), ot_max_abs(gu, HD)));
  gmax = fmax(fmax(gmax, ot_max_abs(gvb, HD)), ot_max_abs(grb, nrb));
  const double fd_tol = cs->use_fd ? 1e-8 * (1.0 + gmax) : 0.0;
  if (cs->use_fd) { /* self-check of the reference: FD vs its analytic backward */
    double worst = 0.0;
    const double *fd[6] = {gq, gkv, gr, gu, gvb, grb}, *an[6] = {aq, akv, ar, au, avb, arb};
    const int64_t nn[6] = {nq, nkv, nr, HD, HD, nrb};
    for (int t = 0; t < 6; t++)
      for (int64_t k = 0; k < nn[t]; k++) worst = fmax(worst, fabs(fd[t][k] - an[t][k]));
    ot_check_true("reference: FD vs analytic double", worst <= fd_tol, "max diff %.3e (allowed %.3e)", worst, fd_tol);
  }
  double *bq = ot_alloc_d(nq), *bkv = ot_alloc_d(nkv), *br = ot_alloc_d(nr), *bu = ot_alloc_d(HD), *bvb = ot_alloc_d(HD);
  for (int64_t k = 0; k < nq; k++) bq[k] = 1.01 * rel * mq[k] + fd_tol;
  for (int64_t k = 0; k < nkv; k++) bkv[k] = 1.01 * rel * mkv[k] + fd_tol;
  for (int64_t k = 0; k < nr; k++) br[k] = 1.01 * rel * mr[k] + fd_tol;
  for (int64_t k = 0; k < nrb; k++) brb[k] = 1.01 * rel * mrb[k] + fd_tol; /* a sum over B L terms */
  for (int e = 0; e < HD; e++) { /* du, dvb accumulate: + the rounding of the final += */
    gu[e] += du[e], gvb[e] += dvb[e];
    bu[e] = 1.01 * (rel * mu[e] + OT_U * (fabs(du[e]) + fabs(gu[e]))) + fd_tol;
    bvb[e] = 1.01 * (rel * mvb[e] + OT_U * (fabs(dvb[e]) + fabs(gvb[e]))) + fd_tol;
  }
  txl_cpu_rel_attn_backward(dq, dkv, has_r ? dr : NULL, has_u ? du : NULL, has_vb ? dvb : NULL, has_rb ? drb : NULL,
                            dvec, vec, q, kv, op_r, op_u, op_vb, op_rb, prob, s, drop, work);
  const char *how = cs->use_fd ? "FD" : "analytic double";
  snprintf(name, sizeof name, "dq vs %s", how);
  ot_check_bound(name, dq, gq, bq, nq);
  snprintf(name, sizeof name, "dkv vs %s", how);
  ot_check_bound(name, dkv, gkv, bkv, nkv);
  snprintf(name, sizeof name, "dr vs %s", how);
  if (has_r) ot_check_bound(name, dr, gr, br, nr);
  snprintf(name, sizeof name, "du (+=) vs %s", how);
  if (has_u) ot_check_bound(name, du, gu, bu, HD);
  snprintf(name, sizeof name, "dvb (+=) vs %s", how);
  if (has_vb) ot_check_bound(name, dvb, gvb, bvb, HD);
  snprintf(name, sizeof name, "drb vs %s", how);
  if (has_rb) ot_check_bound(name, drb, grb, brb, nrb);

  free(q), free(kv), free(r), free(u), free(vb), free(dvec), free(vec), free(prob), free(work);
  free(dq), free(dkv), free(dr), free(du), free(dvb);
  free(a.q), free(a.kv), free(a.r), free(a.u), free(a.vb), free(a.dvec), free(a.vec), free(a.prob), free(a.drop_factor);
  free(bp), free(bvec), free(gq), free(gkv), free(gr), free(gu), free(gvb), free(aq), free(akv), free(ar), free(au), free(avb);
  free(mq), free(mkv), free(mr), free(mu), free(mvb), free(bq), free(bkv), free(br), free(bu), free(bvb);
  free(rb), free(drb), free(a.rb), free(grb), free(arb), free(mrb), free(brb);
}

/* Forward and backward bit-identical with 1, 2 and 3 OpenMP threads, for each variant. */
static void test_threads(OtRng *rng, int variant) {
  const Case cs = {7, 9, 3, 4, 8, 1, 1, 3, 0.1f, 0, variant};
  TxlAttnShape s = case_shape(&cs);
  const int K = s.M + s.L, HD = s.H * s.dh;
  TxlDropout drop = {0.1f, 3u, txl_layer_site(0, TXL_LSITE_ATTN_PROB), 1u, NULL};
  const int64_t nq = (int64_t)s.L * s.B * HD, nkv = (int64_t)K * s.B * 2 * HD, nr = (int64_t)K * HD;
  const int64_t np = (int64_t)s.B * s.H * s.L * K, nrb = (int64_t)K * s.H;
  const int has[8] = {1, 1, 1, 1, variant != V_PLAIN, variant != V_PLAIN, variant == V_TYPE0, variant == V_SHAW};
  float *q = ot_alloc(nq), *kv = ot_alloc(nkv), *r = ot_alloc(nr), *u = ot_alloc(HD), *vb = ot_alloc(HD);
  float *dvec = ot_alloc(nq), *rb = ot_alloc(nrb);
  ot_fill(q, nq, -1.0f, 1.0f, rng), ot_fill(kv, nkv, -1.0f, 1.0f, rng), ot_fill(r, nr, -1.0f, 1.0f, rng);
  ot_fill(u, HD, -0.5f, 0.5f, rng), ot_fill(vb, HD, -0.5f, 0.5f, rng), ot_fill(dvec, nq, -1.0f, 1.0f, rng);
  ot_fill(rb, nrb, -0.5f, 0.5f, rng);
  float *out[3][8];
  const int64_t sizes[8] = {nq, np, nq, nkv, nr, HD, HD, nrb};
  for (int t = 0; t < 3; t++) {
    omp_set_num_threads(t + 1);
    for (int k = 0; k < 8; k++) out[t][k] = ot_alloc(sizes[k]);
    float *o[8];
    for (int k = 0; k < 8; k++) o[k] = has[k] ? out[t][k] : NULL;
    void *work = ot_alloc((int64_t)(txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, s.dh, 1) + 3) / 4);
    txl_cpu_rel_attn_forward(o[0], o[1], q, kv, has[4] ? r : NULL, has[5] ? u : NULL, has[6] ? vb : NULL,
                             has[7] ? rb : NULL, s, drop, work);
    txl_cpu_rel_attn_backward(o[2], o[3], o[4], o[5], o[6], o[7], dvec, o[0], q, kv, has[4] ? r : NULL,
                              has[5] ? u : NULL, has[6] ? vb : NULL, has[7] ? rb : NULL, o[1], s, drop, work);
    free(work);
  }
  omp_set_num_threads(2);
  const char *names[8] = {"vec", "prob", "dq", "dkv", "dr", "du", "dvb", "drb"};
  printf("rel_attn threads 1 / 2 / 3 (L=7 M=9 B=3 H=4 dh=8, same_length, dropatt 0.1), %s\n", VARIANT_NAMES[variant]);
  for (int k = 0; k < 8; k++) {
    if (!has[k]) continue;
    char name[64];
    snprintf(name, sizeof name, "%s threads 1 vs 2", names[k]);
    ot_check_same(name, out[0][k], out[1][k], (size_t)sizes[k] * sizeof(float));
    snprintf(name, sizeof name, "%s threads 1 vs 3", names[k]);
    ot_check_same(name, out[0][k], out[2][k], (size_t)sizes[k] * sizeof(float));
  }
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 8; k++) free(out[t][k]);
  free(q), free(kv), free(r), free(u), free(vb), free(dvec), free(rb);
}

/* ---- padded rows ------------------------------------------------------------------------
 * Rows ld > width apart (the shape's ldq, ldkv, ldr): forward and backward read and write the
 * first width elements of each row only, with the arithmetic of packed rows, so every output is
 * the packed call's bits and every gap keeps its value. The inputs' gaps hold NaN (a gap read
 * would poison an output). The packed call's outputs start as NaN, the padded call's as PAD_FILL,
 * rows and gaps: an element that neither call writes differs, a gap written differs from PAD_FILL. */

/* The tensors of one call: inputs q, kv, r, u, vb, rb, dvec, outputs vec, prob, dq, dkv, dr, du,
 * dvb, drb (NULL: an absent part), in the layout of the shape they are called with. */
typedef struct {
  float *q, *kv, *r, *u, *vb, *rb, *dvec;
  float *vec, *prob, *dq, *dkv, *dr, *du, *dvb, *drb;
} Tensors;

/* forward, then backward on the forward's vec and prob */
static void call_attn(const Tensors *t, TxlAttnShape s, TxlDropout drop) {
  const int K = s.M + s.L;
  void *work = ot_alloc((int64_t)(txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, s.dh, 1) + 3) / 4);
  txl_cpu_rel_attn_forward(t->vec, t->prob, t->q, t->kv, t->r, t->u, t->vb, t->rb, s, drop, work);
  txl_cpu_rel_attn_backward(t->dq, t->dkv, t->dr, t->du, t->dvb, t->drb, t->dvec, t->vec, t->q, t->kv, t->r, t->u,
                            t->vb, t->rb, t->prob, s, drop, work);
  free(work);
}

/* A new copy of packed rows x [n, width] with its rows ld apart, NaN in the gaps (an input). */
static float *nan_padded(const float *x, int64_t n, int width, int ld) {
  float *p = ot_alloc(n * ld);
  ot_pad_rows(p, x, n, width, ld, NAN);
  return p;
}

static void free_tensors(Tensors *t) {
  float *all[] = {t->q, t->kv, t->r, t->dvec, t->vec, t->prob, t->dq, t->dkv, t->dr, t->du, t->dvb, t->drb};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
}

/* An output of the padded call [n, ld] against the packed call's [n, width], gaps PAD_FILL. */
static void check_rows(const char *part, const float *padded, const float *packed, int64_t n, int width, int ld) {
  char what[96];
  snprintf(what, sizeof what, "padded vs packed: %s", part);
  ot_check_padded(what, padded, packed, n, width, ld, PAD_FILL);
}

/* An output without rows (prob, the parameter gradients): the same bits. */
static void check_same(const char *part, const float *padded, const float *packed, int64_t n) {
  char what[96];
  snprintf(what, sizeof what, "padded vs packed: %s", part);
  ot_check_same(what, padded, packed, (size_t)n * sizeof(float));
}

/* The case with packed rows and with rows ldq, ldkv, ldr apart (each >= its width). */
static void test_padded(const Case *cs, int ldq, int ldkv, int ldr, OtRng *rng) {
  const TxlAttnShape s = case_shape(cs);
  TxlAttnShape sp = s;
  sp.ldq = ldq, sp.ldkv = ldkv, sp.ldr = ldr;
  const int K = s.M + s.L, HD = s.H * s.dh;
  const TxlDropout drop = {cs->p, 99u, txl_layer_site(2, TXL_LSITE_ATTN_PROB), 4u, NULL};
  const int has_u = cs->variant != V_PLAIN, has_vb = cs->variant == V_TYPE0, has_r = cs->variant != V_PLAIN;
  const int has_rb = cs->variant == V_SHAW;
  /* rows and widths: q, vec, dq, dvec [LB, HD]; kv, dkv [KB, 2 HD]; r, dr [K, HD] */
  const int64_t LB = (int64_t)s.L * s.B, KB = (int64_t)K * s.B, np = LB * s.H * K, nrb = (int64_t)K * s.H;
  printf("rel_attn rows ldq %d ldkv %d ldr %d (HD=%d) L=%d M=%d B=%d H=%d dh=%d same_length=%d shift=%d "
         "dropatt=%.2f, %s\n", ldq, ldkv, ldr, HD, s.L, s.M, s.B, s.H, s.dh, s.same_length, s.same_shift,
         (double)cs->p, VARIANT_NAMES[cs->variant]);

  Tensors a = {0}, b = {0}; /* packed, padded */
  a.q = ot_alloc(LB * HD), a.kv = ot_alloc(KB * 2 * HD), a.r = ot_alloc((int64_t)K * HD), a.dvec = ot_alloc(LB * HD);
  float *u = ot_alloc(HD), *vb = ot_alloc(HD), *rb = ot_alloc(nrb), *du0 = ot_alloc(HD), *dvb0 = ot_alloc(HD);
  ot_fill(a.q, LB * HD, -1.0f, 1.0f, rng), ot_fill(a.kv, KB * 2 * HD, -1.0f, 1.0f, rng);
  ot_fill(a.r, (int64_t)K * HD, -1.0f, 1.0f, rng), ot_fill(a.dvec, LB * HD, -1.0f, 1.0f, rng);
  ot_fill(u, HD, -0.5f, 0.5f, rng), ot_fill(vb, HD, -0.5f, 0.5f, rng), ot_fill(rb, nrb, -0.5f, 0.5f, rng);
  ot_fill(du0, HD, -1.0f, 1.0f, rng), ot_fill(dvb0, HD, -1.0f, 1.0f, rng);
  b.q = nan_padded(a.q, LB, HD, ldq), b.kv = nan_padded(a.kv, KB, 2 * HD, ldkv);
  b.r = nan_padded(a.r, K, HD, ldr), b.dvec = nan_padded(a.dvec, LB, HD, ldq);
  if (!has_r) free(a.r), free(b.r), a.r = b.r = NULL;
  a.u = b.u = has_u ? u : NULL, a.vb = b.vb = has_vb ? vb : NULL, a.rb = b.rb = has_rb ? rb : NULL;

  a.vec = ot_alloc_filled(LB * HD, NAN), a.dq = ot_alloc_filled(LB * HD, NAN);
  a.dkv = ot_alloc_filled(KB * 2 * HD, NAN), a.prob = ot_alloc_filled(np, NAN);
  b.vec = ot_alloc_filled(LB * ldq, PAD_FILL), b.dq = ot_alloc_filled(LB * ldq, PAD_FILL);
  b.dkv = ot_alloc_filled(KB * ldkv, PAD_FILL), b.prob = ot_alloc_filled(np, PAD_FILL);
  if (has_r) a.dr = ot_alloc_filled((int64_t)K * HD, NAN), b.dr = ot_alloc_filled((int64_t)K * ldr, PAD_FILL);
  if (has_rb) a.drb = ot_alloc_filled(nrb, NAN), b.drb = ot_alloc_filled(nrb, PAD_FILL);
  for (int t = 0; t < 2; t++) { /* the parameter gradients (+=) from the same start */
    Tensors *x = t ? &b : &a;
    if (has_u) x->du = ot_alloc(HD), memcpy(x->du, du0, (size_t)HD * sizeof(float));
    if (has_vb) x->dvb = ot_alloc(HD), memcpy(x->dvb, dvb0, (size_t)HD * sizeof(float));
  }

  call_attn(&a, s, drop);
  call_attn(&b, sp, drop);

  check_rows("vec", b.vec, a.vec, LB, HD, ldq);
  check_same("prob", b.prob, a.prob, np);
  check_rows("dq", b.dq, a.dq, LB, HD, ldq);
  check_rows("dkv", b.dkv, a.dkv, KB, 2 * HD, ldkv);
  if (has_r) check_rows("dr", b.dr, a.dr, K, HD, ldr);
  if (has_u) check_same("du (+=)", b.du, a.du, HD);
  if (has_vb) check_same("dvb (+=)", b.dvb, a.dvb, HD);
  if (has_rb) check_same("drb", b.drb, a.drb, nrb);
  free_tensors(&a), free_tensors(&b);
  free(u), free(vb), free(rb), free(du0), free(dvb0);
}

/* The call a child process makes: forward or backward with the shape g_bad, no tensors (the op
 * must end the job before it touches any). */
static TxlAttnShape g_bad;
static void call_bad(int backward) {
  const TxlDropout none = {0.0f, 0u, 0u, 0u, NULL};
  if (backward)
    txl_cpu_rel_attn_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              g_bad, none, NULL);
  else
    txl_cpu_rel_attn_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, g_bad, none, NULL);
}

/* A stride one below its rows' width is a caller's bug: forward and backward end the job as an
 * internal error (exit status 1, before any memory is touched), each call in a child process with
 * its stderr discarded. Run before any OpenMP region, so that the children fork no thread pool. */
static void test_bad_strides(void) {
  const Case cs = {3, 2, 2, 2, 5, 0, 0, 0, 0.0f, 0, V_TYPE0};
  const char *const names[3] = {"ldq", "ldkv", "ldr"};
  for (int k = 0; k < 3; k++)
    for (int backward = 0; backward < 2; backward++) {
      g_bad = case_shape(&cs);
      int *ld = k == 0 ? &g_bad.ldq : k == 1 ? &g_bad.ldkv : &g_bad.ldr;
      *ld -= 1;
      fflush(stdout);
      const pid_t pid = fork();
      if (pid == 0) {
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        call_bad(backward);
        _exit(0); /* returned: no error */
      }
      int status = 0;
      if (pid > 0) waitpid(pid, &status, 0);
      char what[96];
      snprintf(what, sizeof what, "rel_attn_%s with %s = width - 1", backward ? "backward" : "forward", names[k]);
      ot_check_true(what, pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, "exit status %d",
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

int main(void) {
  OtRng rng = ot_rng(8);
  test_bad_strides();
  /*            L  M  B  H  dh col0 same_length shift dropatt fd variant */
  const Case cases[] = {
      {5, 0, 3, 3, 5, 2, 0, 0, 0.0f, 1, V_TYPE0},
      {5, 0, 3, 3, 5, 2, 0, 0, 0.2f, 1, V_TYPE0},
      {5, 7, 3, 3, 5, 2, 0, 0, 0.0f, 1, V_TYPE0},
      {5, 7, 3, 3, 5, 2, 0, 0, 0.2f, 1, V_TYPE0},
      {3, 9, 3, 3, 5, 2, 1, 2, 0.0f, 1, V_TYPE0},
      {3, 9, 3, 3, 5, 2, 1, 2, 0.2f, 1, V_TYPE0},
      {4, 4, 2, 3, 3, 7, 1, 0, 0.2f, 1, V_TYPE0}, /* same_shift 0: query i sees keys (i, M + i] */
      {4, 2, 1, 2, 3, 0, 1, 4, 0.0f, 1, V_TYPE0}, /* same_shift = L: the same as the causal mask */
      {1, 0, 1, 1, 1, 0, 0, 0, 0.0f, 1, V_TYPE0}, /* one key: prob 1, dq = 0 */
      {17, 15, 4, 4, 16, 3, 1, 5, 0.1f, 0, V_TYPE0}, /* larger: against the analytic double backward */
      /* attn_type 1 (Shaw et al.): the per-key bias rb, no vb */
      {5, 7, 3, 3, 5, 2, 0, 0, 0.0f, 1, V_SHAW},
      {3, 9, 3, 3, 5, 2, 1, 2, 0.2f, 1, V_SHAW},
      {5, 0, 2, 2, 4, 1, 0, 0, 0.0f, 1, V_SHAW},
      {17, 15, 4, 4, 16, 3, 1, 5, 0.1f, 0, V_SHAW},
      /* attn_type 2 and 3: plain attention (no u, vb, r) */
      {5, 7, 3, 3, 5, 2, 0, 0, 0.0f, 1, V_PLAIN},
      {3, 9, 3, 3, 5, 2, 1, 2, 0.2f, 1, V_PLAIN},
      {1, 0, 1, 1, 1, 0, 0, 0, 0.0f, 1, V_PLAIN},
      {17, 15, 4, 4, 16, 3, 1, 5, 0.1f, 0, V_PLAIN},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], &rng);
  for (int v = V_TYPE0; v <= V_PLAIN; v++) test_threads(&rng, v);
  /* padded rows: each width rounded up to 8 (the model's rows on CUDA, txl_row_ld), and width + 3
   * / + 1: three different strides (a stride used for the wrong tensor shows) */
  const Case padded[] = {
      {5, 0, 3, 3, 5, 2, 0, 0, 0.0f, 0, V_TYPE0},    /* M = 0 */
      {3, 9, 3, 3, 5, 2, 1, 2, 0.2f, 0, V_TYPE0},    /* same_length, dropatt */
      {13, 9, 2, 3, 41, 1, 1, 4, 0.1f, 0, V_TYPE0},  /* d_head 41 */
      {4, 0, 2, 3, 5, 0, 1, 0, 0.0f, 0, V_TYPE0},    /* same_shift 0, M = 0: no query sees a key */
      {5, 7, 3, 3, 5, 2, 0, 0, 0.2f, 0, V_SHAW},     /* r and rb, no vb */
      {13, 9, 2, 3, 41, 1, 1, 4, 0.1f, 0, V_SHAW},
      {3, 9, 3, 3, 5, 2, 1, 2, 0.2f, 0, V_PLAIN},    /* no u, vb, r */
      {7, 5, 2, 1, 41, 3, 0, 0, 0.0f, 0, V_PLAIN},
      {0, 5, 2, 3, 5, 0, 0, 0, 0.0f, 0, V_TYPE0},    /* no query: zero dkv, dr (not the gaps) */
  };
  for (size_t k = 0; k < sizeof padded / sizeof padded[0]; k++) {
    const int HD = padded[k].H * padded[k].dh;
    test_padded(&padded[k], (int)txl_row_ld(8, HD), (int)txl_row_ld(8, 2 * HD), (int)txl_row_ld(8, HD), &rng);
    test_padded(&padded[k], HD + 3, 2 * HD + 3, HD + 1, &rng);
  }
  return ot_finish("test_op_rel_attn");
}
