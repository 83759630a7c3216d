/* The fused relative-position attention of the CUDA backend (kernels/cuda/rel_attn.cu) against
 * the CPU op (kernels/cpu/rel_attn.c, itself checked against a double reference and finite
 * differences in tests/ops/test_rel_attn.c) on the same random inputs: vec from the forward,
 * dq, dkv, dr (overwritten: poisoned with NaN before the call) and du, dvb (accumulated: they
 * start from random values) from the backward. The log-sum-exp the CUDA forward saves is
 * checked against log(sum exp(score)) computed in double from the inputs. Shapes: one query
 * (with and without memory), several query and key tiles, keys beyond one tile, tile edges
 * where a loop bound is off by one (see the cases), dh = 1, 8, 16, 41, 64 and 100 (both tile
 * sizes, every register width of the kernels), H 1-4, B 1-10 (B = 10 gives dq blocks two
 * columns each), col0 != 0, causal and same_length with mem_len giving every same_shift case
 * (0, inside (0, L), L; as src/model computes it) and the degenerate one where no query sees
 * any key (same_shift 0, M 0: both backends give zeros), dropatt 0 and > 0, peaked and flat
 * softmaxes. The workspace is poisoned too (the kernels must not rely on its contents).
 * Determinism: forward and backward run twice on the same inputs must give the same bits.
 *
 * Tolerances (see test_cuda_parity.c for the general argument: u = 2^-24, a float sum of k
 * terms in any order is within ~k u of the exact sum relative to the sum of |terms|, the two
 * backends are each within that of the exact value, TOL_C = 4 = 2 backends x 2 of slack).
 * Everything below is computed in double from the float inputs, per row i of (c, h):
 *   score:  s_ij is a sum of 2 dh products (the CUDA kernel sums the (q+u).k and (q+vb).r
 *           halves in one accumulator, the CPU in two GEMMs), plus the two bias additions and
 *           the scale: |ds_ij| <= (2 dh + 4) u A_ij, A_ij = scale sum_e |q+u||k_j| + |q+vb||r_p|;
 *           serr_i = max_j of it, sabs_i = max_j |s_ij|.
 *   lse:    lse = m + log(l) with l = sum_j exp(s_j - m), summed over at most K terms with one
 *           rescaling per key tile (<= K more roundings), exp within 2 ulp: the exact derivative
 *           of lse in s_j is p_j (sum 1), so |dlse| <= serr + (2K + 8) u + 4 u sabs (the
 *           roundings of s - m, |s - m| <= 2 sabs) + u |lse| + u log K.
 *   prob:   p = exp(s - lse) on the GPU, exp(s - m) / l on the CPU: relative error at most
 *           p_rel_i = 2 serr + (2K + 16) u + 8 u (sabs + log K + 1) on either side.
 *   vec:    a sum of K terms p~_j v_j (plus the rescalings and the final division):
 *           |dvec| <= (p_rel + (2K + 4) u) sum_j p~_j |v_j|.
 *   backward: as tests/ops/test_rel_attn.c, every gradient element is bounded by
 *           rel * mag, mag = the backward evaluated on absolute values (|dS| from p (|dP| +
 *           sum_k p_k |dP_k|), ...), rel = (4 dh + 2 K + 2 B L + 32) u + 2 max p_rel: the
 *           longest rounding chains are the score (2 dh), dP~ and D (dh each; D = dvec . vec
 *           inherits vec's error, which is within (K u + p_rel) of sum p |dP|), the sums over
 *           keys (K, dq and du) and over all B L query rows of every column (dr, dk, du, dvb,
 *           with the partial sums of the tiles), and a few single roundings; the probabilities
 *           enter dS up to quadratically: 2 p_rel. du, dvb add the rounding of the final +=:
 *           u (|du0| + |du|).
 * These are worst-case bounds: correct kernels sit orders of magnitude below them (the ratio
 * err/bound is printed), while a wrong index, a missing term or a wrong mask is far above. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/cuda/parity.h"

typedef struct {
  int L, M, B, H, dh, col0, same_length, mem_len;
  float p;
  double qmax; /* q uniform in [-qmax, qmax]: 3 makes the softmax peaked, 1 flat */
} Case;

/* Tensor offsets (kernels/ops.h): q, vec [L,B,H,dh]; kv [K,B,2,H,dh]; r [K,H,dh]; rows [B,H,L]. */
static int64_t q_at(const TxlAttnShape *s, int i, int c, int h) {
  return (((int64_t)i * s->B + c) * s->H + h) * s->dh;
}
static int64_t k_at(const TxlAttnShape *s, int j, int c, int h) {
  return ((((int64_t)j * s->B + c) * 2) * s->H + h) * s->dh;
}
static int64_t v_at(const TxlAttnShape *s, int j, int c, int h) {
  return k_at(s, j, c, h) + (int64_t)s->H * s->dh;
}
static int64_t r_at(const TxlAttnShape *s, int p, int h) { return ((int64_t)p * s->H + h) * s->dh; }
static int64_t row_at(const TxlAttnShape *s, int c, int h, int i) {
  return ((int64_t)c * s->H + h) * s->L + i;
}

static int visible(const TxlAttnShape *s, int i, int j) {
  if (j > s->M + i) return 0;                             /* the future */
  if (s->same_length && j <= i - s->same_shift) return 0; /* too far back */
  return 1;
}

/* The double reference of the forward: probabilities, dropatt factors, lse and the score error
 * terms of every row (see the file comment). */
typedef struct {
  TxlAttnShape s;
  int K;
  TxlDropout drop;
  const float *q, *kv, *r, *u, *vb, *dvec;
  double *p, *df;          /* [B, H, L, K]: probability, dropatt factor (1 without dropatt) */
  double *lse, *serr, *sabs; /* [B, H, L] (lse -inf where no key is visible) */
  int *any;                /* [B, H, L]: the row sees at least one key */
} Ref;

static void ref_forward(Ref *a) {
  const TxlAttnShape *s = &a->s;
  const int K = a->K, dh = s->dh;
  const double dscale = a->drop.p > 0.0f ? (double)txl_dropout_scale(a->drop.p) : 1.0;
  double *sc = malloc((size_t)K * sizeof *sc);
  for (int c = 0; c < s->B; c++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->L; i++) {
        const int64_t row = row_at(s, c, h, i);
        const float *qi = a->q + q_at(s, i, c, h);
        double mx = -INFINITY, serr = 0.0, sabs = 0.0;
        for (int j = 0; j < K; j++) {
          if (!visible(s, i, j)) continue;
          const float *kj = a->kv + k_at(s, j, c, h);
          const float *rp = a->r + r_at(s, s->L - 1 - i + j, h);
          double acc = 0.0, mag = 0.0;
          for (int e = 0; e < dh; e++) {
            const double qu = (double)qi[e] + a->u[h * dh + e], qv = (double)qi[e] + a->vb[h * dh + e];
            acc += qu * kj[e] + qv * rp[e];
            mag += fabs(qu) * fabs((double)kj[e]) + fabs(qv) * fabs((double)rp[e]);
          }
          sc[j] = acc * s->scale;
          serr = fmax(serr, (2.0 * dh + 4.0) * U_F32 * mag * s->scale);
          sabs = fmax(sabs, fabs(sc[j]));
          mx = fmax(mx, sc[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < K; j++)
          if (visible(s, i, j)) sum += exp(sc[j] - mx);
        a->any[row] = sum > 0.0;
        a->lse[row] = sum > 0.0 ? mx + log(sum) : -INFINITY;
        a->serr[row] = serr;
        a->sabs[row] = sabs;
        double *p = a->p + row * K, *df = a->df + row * K;
        for (int j = 0; j < K; j++) {
          p[j] = visible(s, i, j) ? exp(sc[j] - mx) / sum : 0.0;
          df[j] = a->drop.p > 0.0f ? (txl_dropout_keep(a->drop, (uint32_t)i, (uint32_t)(s->col0 + c),
                                                       (uint32_t)(h * K + j))
                                          ? dscale
                                          : 0.0)
                                   : 1.0;
        }
      }
  free(sc);
}

/* The backward on absolute values (tests/ops/test_rel_attn.c, ref_backward with absolute = 1):
 * for every gradient element, the sum of the magnitudes of the terms that enter it. */
static void ref_magnitudes(double *mq, double *mkv, double *mr, double *mu, double *mvb,
                           const Ref *a) {
  const TxlAttnShape *s = &a->s;
  const int K = a->K, dh = s->dh;
  double *dp = malloc((size_t)K * sizeof *dp);
  for (int c = 0; c < s->B; c++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->L; i++) {
        const int64_t row = row_at(s, c, h, i);
        const double *p = a->p + row * K, *df = a->df + row * K;
        const float *g = a->dvec + q_at(s, i, c, h), *qi = a->q + q_at(s, i, c, h);
        double dot = 0.0;
        for (int j = 0; j < K; j++) {
          double t = 0.0;
          for (int e = 0; e < dh; e++) {
            const double ge = fabs((double)g[e]);
            t += ge * fabs((double)a->kv[v_at(s, j, c, h) + e]);
            mkv[v_at(s, j, c, h) + e] += p[j] * df[j] * ge;
          }
          dp[j] = t * df[j];
          dot += p[j] * dp[j];
        }
        for (int j = 0; j < K; j++) {
          if (!visible(s, i, j)) continue;
          const double ds = p[j] * (dp[j] + dot) * s->scale;
          const int pr = s->L - 1 - i + j;
          for (int e = 0; e < dh; e++) {
            const double kj = fabs((double)a->kv[k_at(s, j, c, h) + e]);
            const double rp = fabs((double)a->r[r_at(s, pr, h) + e]);
            const double qe = fabs((double)qi[e]);
            mq[q_at(s, i, c, h) + e] += ds * (kj + rp);
            mu[h * dh + e] += ds * kj;
            mvb[h * dh + e] += ds * rp;
            mkv[k_at(s, j, c, h) + e] += ds * (qe + fabs((double)a->u[h * dh + e]));
            mr[r_at(s, pr, h) + e] += ds * (qe + fabs((double)a->vb[h * dh + e]));
          }
        }
      }
  free(dp);
}

static void run_case(const Case *cs) {
  TxlAttnShape s;
  s.L = cs->L;
  s.M = cs->M;
  s.B = cs->B;
  s.H = cs->H;
  s.dh = cs->dh;
  s.col0 = cs->col0;
  s.same_length = cs->same_length;
  const int K = s.M + s.L;
  /* as src/model: the original's tril(ones, -s) with s = L - (K - mem_len) when K > mem_len */
  s.same_shift = K > cs->mem_len ? s.L - (K - cs->mem_len) : s.L;
  s.scale = (float)(1.0 / sqrt((double)s.dh));
  const TxlDropout drop = {cs->p, 77u, txl_layer_site(3, TXL_LSITE_ATTN_PROB), 11u};
  const int dh = s.dh, HD = s.H * dh;
  const int64_t nq = (int64_t)s.L * s.B * HD, nkv = (int64_t)K * s.B * 2 * HD,
                nr = (int64_t)K * HD, nrow = (int64_t)s.B * s.H * s.L;
  char tag[128], what[192];
  snprintf(tag, sizeof tag, "L=%d M=%d B=%d H=%d dh=%d col0=%d sl=%d shift=%d p=%.1f", s.L, s.M,
           s.B, s.H, dh, s.col0, s.same_length, s.same_shift, (double)cs->p);

  float *q = host_rand(nq, -cs->qmax, cs->qmax), *kv = host_rand(nkv, -1.0, 1.0), *r = host_rand(nr, -1.0, 1.0);
  float *u = host_rand(HD, -0.5, 0.5), *vb = host_rand(HD, -0.5, 0.5), *dvec = host_rand(nq, -1.0, 1.0);
  float *du0 = host_rand(HD, -1.0, 1.0), *dvb0 = host_rand(HD, -1.0, 1.0);

  /* ---- CPU ---------------------------------------------------------------------------- */
  float *vec_c = host_rand(nq, 0, 1), *prob = host_rand((int64_t)txl_cpu_rel_attn_saved_floats(s.L, K, s.B, s.H), 0, 1);
  float *dq_c = host_rand(nq, 0, 1), *dkv_c = host_rand(nkv, 0, 1), *dr_c = host_rand(nr, 0, 1);
  float *du_c = host_copy(du0, HD), *dvb_c = host_copy(dvb0, HD);
  void *work_c = malloc(txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1) + 64);
  txl_cpu_rel_attn_forward(vec_c, prob, q, kv, r, u, vb, s, drop, work_c);
  txl_cpu_rel_attn_backward(dq_c, dkv_c, dr_c, du_c, dvb_c, dvec, vec_c, q, kv, r, u, vb, prob, s,
                            drop, work_c);

  /* ---- CUDA, twice --------------------------------------------------------------------- */
  float *d_q = dev_from(q, (size_t)nq * 4, "test: q"), *d_kv = dev_from(kv, (size_t)nkv * 4, "test: kv");
  float *d_r = dev_from(r, (size_t)nr * 4, "test: r"), *d_u = dev_from(u, (size_t)HD * 4, "test: u");
  float *d_vb = dev_from(vb, (size_t)HD * 4, "test: vb"), *d_dvec = dev_from(dvec, (size_t)nq * 4, "test: dvec");
  const size_t nsaved = txl_cuda_rel_attn_saved_floats(s.L, K, s.B, s.H);
  const size_t wbytes = txl_cuda_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1);
  float *d_work = dev_poison((int64_t)(wbytes / 4), "test: workspace");
  if (nsaved != (size_t)nrow) check_fail("saved floats != B * H * L");
  float *out[2][7]; /* vec, lse, dq, dkv, dr, du, dvb */
  const int64_t sizes[7] = {nq, nrow, nq, nkv, nr, HD, HD};
  for (int run = 0; run < 2; run++) {
    float *d_vec = dev_poison(nq, "test: vec"), *d_lse = dev_poison(nrow, "test: lse");
    float *d_dq = dev_poison(nq, "test: dq"), *d_dkv = dev_poison(nkv, "test: dkv");
    float *d_dr = dev_poison(nr, "test: dr");
    float *d_du = dev_from(du0, (size_t)HD * 4, "test: du"), *d_dvb = dev_from(dvb0, (size_t)HD * 4, "test: dvb");
    txl_cuda_rel_attn_forward(d_vec, d_lse, d_q, d_kv, d_r, d_u, d_vb, s, drop, d_work);
    txl_cuda_rel_attn_backward(d_dq, d_dkv, d_dr, d_du, d_dvb, d_dvec, d_vec, d_q, d_kv, d_r, d_u,
                               d_vb, d_lse, s, drop, d_work);
    float *dev[7] = {d_vec, d_lse, d_dq, d_dkv, d_dr, d_du, d_dvb};
    for (int k = 0; k < 7; k++) {
      out[run][k] = host_from(dev[k], sizes[k]);
      txl_cuda_free(dev[k]);
    }
  }

  /* ---- reference and bounds ------------------------------------------------------------ */
  Ref a;
  a.s = s;
  a.K = K;
  a.drop = drop;
  a.q = q, a.kv = kv, a.r = r, a.u = u, a.vb = vb, a.dvec = dvec;
  a.p = bounds_alloc(nrow * K), a.df = bounds_alloc(nrow * K);
  a.lse = bounds_alloc(nrow), a.serr = bounds_alloc(nrow), a.sabs = bounds_alloc(nrow);
  a.any = calloc((size_t)nrow, sizeof(int));
  ref_forward(&a);

  double *p_rel = bounds_alloc(nrow), p_rel_max = 0.0;
  for (int64_t w = 0; w < nrow; w++) {
    p_rel[w] = 2.0 * a.serr[w] + (2.0 * K + 16.0) * U_F32 + 8.0 * U_F32 * (a.sabs[w] + log((double)K) + 1.0);
    p_rel_max = fmax(p_rel_max, p_rel[w]);
  }

  /* vec */
  double *bvec = bounds_alloc(nq);
  for (int c = 0; c < s.B; c++)
    for (int h = 0; h < s.H; h++)
      for (int i = 0; i < s.L; i++) {
        const int64_t row = row_at(&s, c, h, i);
        for (int e = 0; e < dh; e++) {
          double mag = 0.0;
          for (int j = 0; j < K; j++)
            mag += a.p[row * K + j] * a.df[row * K + j] * fabs((double)kv[v_at(&s, j, c, h) + e]);
          bvec[q_at(&s, i, c, h) + e] = TOL_C * (p_rel[row] + (2.0 * K + 4.0) * U_F32) * mag;
        }
      }
  snprintf(what, sizeof what, "%s: vec", tag);
  check_close(what, out[0][0], vec_c, bvec, nq);

  /* lse: rows that see a key against the double value; rows that see none must be -inf */
  {
    float *got = malloc((size_t)nrow * sizeof(float)), *want = malloc((size_t)nrow * sizeof(float));
    float *got_none = malloc((size_t)nrow * sizeof(float)), *want_none = malloc((size_t)nrow * sizeof(float));
    double *blse = bounds_alloc(nrow);
    int64_t n = 0, n_none = 0;
    for (int64_t w = 0; w < nrow; w++) {
      if (a.any[w]) {
        got[n] = out[0][1][w];
        want[n] = (float)a.lse[w];
        /* + the rounding of the double value to float */
        blse[n] = TOL_C * (a.serr[w] + (2.0 * K + 8.0) * U_F32 + 4.0 * U_F32 * a.sabs[w] +
                           U_F32 * fabs(a.lse[w]) + U_F32 * log((double)K)) +
                  U_F32 * fabs(a.lse[w]);
        n++;
      } else {
        got_none[n_none] = out[0][1][w];
        want_none[n_none] = -INFINITY;
        n_none++;
      }
    }
    snprintf(what, sizeof what, "%s: lse", tag);
    if (n) check_close(what, got, want, blse, n);
    snprintf(what, sizeof what, "%s: lse = -inf (no visible key)", tag);
    if (n_none) check_bits(what, got_none, want_none, n_none);
    free(got), free(want), free(got_none), free(want_none), free(blse);
  }

  /* backward */
  double *mq = bounds_alloc(nq), *mkv = bounds_alloc(nkv), *mr = bounds_alloc(nr);
  double *mu = bounds_alloc(HD), *mvb = bounds_alloc(HD);
  ref_magnitudes(mq, mkv, mr, mu, mvb, &a);
  const double rel = (4.0 * dh + 2.0 * K + 2.0 * s.B * s.L + 32.0) * U_F32 + 2.0 * p_rel_max;
  for (int64_t k = 0; k < nq; k++) mq[k] *= TOL_C * rel;
  for (int64_t k = 0; k < nkv; k++) mkv[k] *= TOL_C * rel;
  for (int64_t k = 0; k < nr; k++) mr[k] *= TOL_C * rel;
  for (int e = 0; e < HD; e++) {
    mu[e] = TOL_C * (rel * mu[e] + U_F32 * (fabs((double)du0[e]) + fabs((double)du_c[e])));
    mvb[e] = TOL_C * (rel * mvb[e] + U_F32 * (fabs((double)dvb0[e]) + fabs((double)dvb_c[e])));
  }
  snprintf(what, sizeof what, "%s: dq", tag);
  check_close(what, out[0][2], dq_c, mq, nq);
  snprintf(what, sizeof what, "%s: dkv", tag);
  check_close(what, out[0][3], dkv_c, mkv, nkv);
  snprintf(what, sizeof what, "%s: dr", tag);
  check_close(what, out[0][4], dr_c, mr, nr);
  snprintf(what, sizeof what, "%s: du (+=)", tag);
  check_close(what, out[0][5], du_c, mu, HD);
  snprintf(what, sizeof what, "%s: dvb (+=)", tag);
  check_close(what, out[0][6], dvb_c, mvb, HD);

  /* determinism: the second run gives the same bits */
  const char *names[7] = {"vec", "lse", "dq", "dkv", "dr", "du", "dvb"};
  for (int k = 0; k < 7; k++) {
    snprintf(what, sizeof what, "%s: %s run 1 vs run 2", tag, names[k]);
    check_bits(what, out[1][k], out[0][k], sizes[k]);
  }

  for (int run = 0; run < 2; run++)
    for (int k = 0; k < 7; k++) free(out[run][k]);
  txl_cuda_free(d_q), txl_cuda_free(d_kv), txl_cuda_free(d_r), txl_cuda_free(d_u);
  txl_cuda_free(d_vb), txl_cuda_free(d_dvec), txl_cuda_free(d_work);
  free(q), free(kv), free(r), free(u), free(vb), free(dvec), free(du0), free(dvb0);
  free(vec_c), free(prob), free(dq_c), free(dkv_c), free(dr_c), free(du_c), free(dvb_c), free(work_c);
  free(a.p), free(a.df), free(a.lse), free(a.serr), free(a.sabs), free(a.any);
  free(p_rel), free(bvec), free(mq), free(mkv), free(mr), free(mu), free(mvb);
}

int main(void) {
  parity_begin("test_cuda_rel_attn");
  static const Case cases[] = {
      /* L   M   B  H  dh  col0 sl mem_len p  qmax */
      {1, 0, 1, 1, 8, 0, 0, 0, 0.0f, 3},      /* one query, one key                            */
      {1, 6, 2, 2, 16, 1, 1, 6, 0.1f, 3},     /* one query with memory (a generation step),
                                                 same_shift 0: it sees keys 1..6                */
      {7, 0, 2, 2, 16, 3, 1, 4, 0.1f, 3},     /* same_shift 4, in (0, L)                        */
      {13, 9, 3, 3, 41, 1, 1, 9, 0.1f, 3},    /* same_shift 0 (mem_len = M): keys (i, M+i]     */
      {13, 9, 2, 4, 41, 5, 0, 9, 0.0f, 3},    /* causal only (same_shift 0 is ignored), odd dh */
      {33, 70, 2, 2, 64, 2, 1, 80, 0.1f, 3},  /* K = 103 > one key tile, same_shift 10          */
      {33, 70, 1, 1, 64, 0, 1, 200, 0.0f, 3}, /* same_shift L (mem_len >= K): the causal mask   */
      {70, 1, 2, 1, 8, 1, 0, 1, 0.1f, 1},     /* 2 query tiles; row 63 of the first sees key 64,
                                                 the first of the second key tile; a flat
                                                 softmax, so that every key weighs             */
      {40, 30, 2, 2, 100, 4, 1, 32, 0.1f, 3}, /* dh in (64, 128]: 32 x 32 tiles; same_shift 2:
                                                 row 32, the first of query tile 1, is the last
                                                 that sees key tile 0                           */
      {5, 3, 3, 2, 1, 0, 0, 3, 0.2f, 3},      /* dh = 1                                         */
      {7, 5, 10, 1, 8, 2, 1, 9, 0.1f, 3},     /* B = 10 > 8 column groups: a dq block does 2   */
      {4, 0, 2, 2, 8, 0, 1, 0, 0.0f, 3},      /* same_shift 0, M = 0: no query sees any key     */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k]);
  return parity_end();
}
