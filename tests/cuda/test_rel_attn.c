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
 * Tolerances (see test_parity.c for the general argument: u = 2^-24, a float sum of k
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
 * err/bound is printed), while a wrong index, a missing term or a wrong mask is far above.
 *
 * bf16 (txl_cuda_rel_attn_*_bf16): every case again with q, kv, r, dvec rounded to bf16 (bf16
 * arrays on the device; the CPU op and the double reference get the same values widened to
 * float, so both backends see identical inputs); vec, dq, dkv, dr are bf16 (poisoned with the
 * NaN pattern 0x7fc0), lse, du, dvb float. Besides the fp32 bound b32 above, with u8 = U_BF16 =
 * 2^-8 the relative error of one rounding to bf16:
 *   stores: the device rounds its fp32 result x once, |bf16(x) - x| <= u8 |x| <= u8 (|ref| + b32),
 *           so an output stored in bf16 is within (1 + u8) b32 + u8 |ref| (bounds_act: vec, dq,
 *           dkv, dr).
 *   D:      the backward reads back the bf16 vec of the forward: D_i = dvec_i . bf16(vec_i) moves
 *           by at most dD_i = u8 sum_e |dvec_ie| |vec_ie|, |vec_ie| <= sum_j p~_ij |v_je| (to
 *           first order). It enters dS_ij = P_ij (dP_ij - D_i) scale linearly: every gradient but
 *           dv moves by at most the backward on absolute values with dS_ij = P_ij scale dD_i
 *           (ref_attn_backward with dD), eD. The CPU takes D from its probabilities (no bf16 in it):
 *           this term is the device's alone; a factor 2 covers what was left at first order
 *           (the p_rel of the device's P, the fp32 error of vec, the fp32 sums of the extra
 *           terms, all << 1). So dq, dkv, dr: (1 + u8)(b32 + 2 eD) + u8 |ref|; du, dvb (float,
 *           summed from the fp32 dq halves, not from the stored dq): b32 + 2 eD.
 * The largest err/bound of the bf16 checks is printed at the end. Unlike the fp32 ratios it comes
 * close to 1: half an ulp of bf16 just above a power of two is u8 of the value, so the output
 * rounding alone reaches nearly all of the u8 |ref| term (never more: correct kernels stay <= 1). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/model.h"
#include "tests/cuda/parity.h"
#include "tests/lib/ref_rel_attn.h"

/* The largest err/bound of the bf16 checks (printed by main). */
static double g_bf16_ratio = 0.0;

typedef struct {
  int L, M, B, H, dh, col0, same_length, mem_len;
  float p;
  double qmax; /* q uniform in [-qmax, qmax]: 3 makes the softmax peaked, 1 flat */
} Case;

/* check_close, and for the bf16 runs the largest err/bound kept for the summary (a NaN fails in
 * check_close and makes the summary NaN). */
static void check_act(const char *what, const float *got, const float *want, const double *bound,
                      int64_t n, TxlDtype t) {
  check_close(what, got, want, bound, n);
  if (t != TXL_BF16) return;
  for (int64_t i = 0; i < n; i++) {
    const double q = fabs((double)got[i] - (double)want[i]) / fmax(bound[i], 1e-300);
    if (q > g_bf16_ratio || isnan(q)) g_bf16_ratio = q;
  }
}

/* One case with activations of type act: TXL_F32 (txl_cuda_rel_attn_forward / _backward) or
 * TXL_BF16 (the _bf16 pair, bounds as in the file comment). */
static void run_case(const Case *cs, TxlDtype act) {
  TxlAttnShape s;
  s.L = cs->L;
  s.M = cs->M;
  s.B = cs->B;
  s.H = cs->H;
  s.dh = cs->dh;
  s.col0 = cs->col0;
  s.same_length = cs->same_length;
  const int K = s.M + s.L;
  s.same_shift = txl_attn_same_shift(s.L, K, cs->mem_len); /* as the model computes it */
  s.scale = (float)(1.0 / sqrt((double)s.dh));
  const TxlDropout drop = {cs->p, 77u, txl_layer_site(3, TXL_LSITE_ATTN_PROB), 11u};
  const int dh = s.dh, HD = s.H * dh;
  const int64_t nq = (int64_t)s.L * s.B * HD, nkv = (int64_t)K * s.B * 2 * HD,
                nr = (int64_t)K * HD, nrow = (int64_t)s.B * s.H * s.L;
  char tag[128], what[192];
  const int bf16 = act == TXL_BF16;
  snprintf(tag, sizeof tag, "%sL=%d M=%d B=%d H=%d dh=%d col0=%d sl=%d shift=%d p=%.1f",
           bf16 ? "bf16 " : "", s.L, s.M, s.B, s.H, dh, s.col0, s.same_length, s.same_shift,
           (double)cs->p);

  float *q = host_rand(nq, -cs->qmax, cs->qmax), *kv = host_rand(nkv, -1.0, 1.0), *r = host_rand(nr, -1.0, 1.0);
  float *u = host_rand(HD, -0.5, 0.5), *vb = host_rand(HD, -0.5, 0.5), *dvec = host_rand(nq, -1.0, 1.0);
  float *du0 = host_rand(HD, -1.0, 1.0), *dvb0 = host_rand(HD, -1.0, 1.0);
  round_act(q, nq, act), round_act(kv, nkv, act), round_act(r, nr, act), round_act(dvec, nq, act);

  /* ---- CPU ---------------------------------------------------------------------------- */
  float *vec_c = host_rand(nq, 0, 1), *prob = host_rand((int64_t)txl_cpu_rel_attn_saved_floats(s.L, K, s.B, s.H), 0, 1);
  float *dq_c = host_rand(nq, 0, 1), *dkv_c = host_rand(nkv, 0, 1), *dr_c = host_rand(nr, 0, 1);
  float *du_c = host_copy(du0, HD), *dvb_c = host_copy(dvb0, HD);
  void *work_c = malloc(txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1) + 64);
  txl_cpu_rel_attn_forward(vec_c, prob, q, kv, r, u, vb, s, drop, work_c);
  txl_cpu_rel_attn_backward(dq_c, dkv_c, dr_c, du_c, dvb_c, dvec, vec_c, q, kv, r, u, vb, prob, s,
                            drop, work_c);

  /* ---- CUDA, twice --------------------------------------------------------------------- */
  void *d_q = dev_act(q, nq, act, "test: q"), *d_kv = dev_act(kv, nkv, act, "test: kv");
  void *d_r = dev_act(r, nr, act, "test: r"), *d_dvec = dev_act(dvec, nq, act, "test: dvec");
  float *d_u = dev_from(u, (size_t)HD * 4, "test: u"), *d_vb = dev_from(vb, (size_t)HD * 4, "test: vb");
  const size_t nsaved = txl_cuda_rel_attn_saved_floats(s.L, K, s.B, s.H);
  const size_t wbytes = txl_cuda_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1);
  float *d_work = dev_poison((int64_t)(wbytes / 4), "test: workspace");
  if (nsaved != (size_t)nrow) check_fail("saved floats != B * H * L");
  float *out[2][7]; /* vec, lse, dq, dkv, dr, du, dvb */
  const int64_t sizes[7] = {nq, nrow, nq, nkv, nr, HD, HD};
  const TxlDtype types[7] = {act, TXL_F32, act, act, act, TXL_F32, TXL_F32};
  for (int run = 0; run < 2; run++) {
    void *d_vec = dev_poison_act(nq, act, "test: vec"), *d_lse = dev_poison(nrow, "test: lse");
    void *d_dq = dev_poison_act(nq, act, "test: dq"), *d_dkv = dev_poison_act(nkv, act, "test: dkv");
    void *d_dr = dev_poison_act(nr, act, "test: dr");
    float *d_du = dev_from(du0, (size_t)HD * 4, "test: du"), *d_dvb = dev_from(dvb0, (size_t)HD * 4, "test: dvb");
    (bf16 ? txl_cuda_rel_attn_forward_bf16 : txl_cuda_rel_attn_forward)(
        d_vec, d_lse, d_q, d_kv, d_r, d_u, d_vb, s, drop, d_work);
    (bf16 ? txl_cuda_rel_attn_backward_bf16 : txl_cuda_rel_attn_backward)(
        d_dq, d_dkv, d_dr, d_du, d_dvb, d_dvec, d_vec, d_q, d_kv, d_r, d_u, d_vb, d_lse, s, drop,
        d_work);
    void *dev[7] = {d_vec, d_lse, d_dq, d_dkv, d_dr, d_du, d_dvb};
    for (int k = 0; k < 7; k++) {
      out[run][k] = host_from_act(dev[k], sizes[k], types[k]);
      txl_cuda_free(dev[k]);
    }
  }

  /* ---- reference and bounds ------------------------------------------------------------ */
  RefAttn a = {.s = s, .drop = drop, .K = K, .q = ot_alloc_d(nq), .kv = ot_alloc_d(nkv), .r = ot_alloc_d(nr),
               .u = ot_alloc_d(HD), .vb = ot_alloc_d(HD), .dvec = ot_alloc_d(nq), .prob = ot_alloc_d(nrow * K),
               .drop_factor = ot_alloc_d(nrow * K), .lse = ot_alloc_d(nrow), .serr = ot_alloc_d(nrow),
               .sabs = ot_alloc_d(nrow), .any = calloc((size_t)nrow, sizeof(int))};
  ot_to_double(a.q, q, nq), ot_to_double(a.kv, kv, nkv), ot_to_double(a.r, r, nr);
  ot_to_double(a.u, u, HD), ot_to_double(a.vb, vb, HD), ot_to_double(a.dvec, dvec, nq);
  ref_attn_forward(&a);

  double *p_rel = ot_alloc_d(nrow), p_rel_max = 0.0;
  for (int64_t w = 0; w < nrow; w++) {
    p_rel[w] = 2.0 * a.serr[w] + (2.0 * K + 16.0) * OT_U + 8.0 * OT_U * (a.sabs[w] + log((double)K) + 1.0);
    p_rel_max = fmax(p_rel_max, p_rel[w]);
  }

  /* vec; vmag = sum_j p~_j |v_j| per element of vec */
  double *bvec = ot_alloc_d(nq), *vmag = ot_alloc_d(nq);
  for (int c = 0; c < s.B; c++)
    for (int h = 0; h < s.H; h++)
      for (int i = 0; i < s.L; i++) {
        const int64_t row = row_at(&s, c, h, i);
        for (int e = 0; e < dh; e++) {
          const int64_t o = q_at(&s, i, c, h) + e;
          for (int j = 0; j < K; j++)
            vmag[o] += a.prob[row * K + j] * a.drop_factor[row * K + j] * fabs((double)kv[v_at(&s, j, c, h) + e]);
          bvec[o] = TOL_C * (p_rel[row] + (2.0 * K + 4.0) * OT_U) * vmag[o];
        }
      }
  bounds_act(bvec, vec_c, nq, act); /* the rounding of the store */
  snprintf(what, sizeof what, "%s: vec", tag);
  check_act(what, out[0][0], vec_c, bvec, nq, act);

  /* lse: rows that see a key against the double value; rows that see none must be -inf */
  {
    float *got = malloc((size_t)nrow * sizeof(float)), *want = malloc((size_t)nrow * sizeof(float));
    float *got_none = malloc((size_t)nrow * sizeof(float)), *want_none = malloc((size_t)nrow * sizeof(float));
    double *blse = ot_alloc_d(nrow);
    int64_t n = 0, n_none = 0;
    for (int64_t w = 0; w < nrow; w++) {
      if (a.any[w]) {
        got[n] = out[0][1][w];
        want[n] = (float)a.lse[w];
        /* + the rounding of the double value to float */
        blse[n] = TOL_C * (a.serr[w] + (2.0 * K + 8.0) * OT_U + 4.0 * OT_U * a.sabs[w] +
                           OT_U * fabs(a.lse[w]) + OT_U * log((double)K)) +
                  OT_U * fabs(a.lse[w]);
        n++;
      } else {
        got_none[n_none] = out[0][1][w];
        want_none[n_none] = -INFINITY;
        n_none++;
      }
    }
    snprintf(what, sizeof what, "%s: lse", tag);
    if (n) check_act(what, got, want, blse, n, act);
    snprintf(what, sizeof what, "%s: lse = -inf (no visible key)", tag);
    if (n_none) check_bits(what, got_none, want_none, n_none);
    free(got), free(want), free(got_none), free(want_none), free(blse);
  }

  /* backward */
  double *mq = ot_alloc_d(nq), *mkv = ot_alloc_d(nkv), *mr = ot_alloc_d(nr);
  double *mu = ot_alloc_d(HD), *mvb = ot_alloc_d(HD);
  ref_attn_backward(mq, mkv, mr, mu, mvb, &a, 1, NULL);
  const double rel = (4.0 * dh + 2.0 * K + 2.0 * s.B * s.L + 32.0) * OT_U + 2.0 * p_rel_max;
  for (int64_t k = 0; k < nq; k++) mq[k] *= TOL_C * rel;
  for (int64_t k = 0; k < nkv; k++) mkv[k] *= TOL_C * rel;
  for (int64_t k = 0; k < nr; k++) mr[k] *= TOL_C * rel;
  for (int e = 0; e < HD; e++) {
    mu[e] = TOL_C * (rel * mu[e] + OT_U * (fabs((double)du0[e]) + fabs((double)du_c[e])));
    mvb[e] = TOL_C * (rel * mvb[e] + OT_U * (fabs((double)dvb0[e]) + fabs((double)dvb_c[e])));
  }
  if (bf16) { /* D from the bf16 vec (2 eD), then the rounding of the stores of dq, dkv, dr */
    double *dD = ot_alloc_d(nrow), *eq = ot_alloc_d(nq), *ekv = ot_alloc_d(nkv), *er = ot_alloc_d(nr);
    double *eu = ot_alloc_d(HD), *evb = ot_alloc_d(HD);
    for (int c = 0; c < s.B; c++)
      for (int h = 0; h < s.H; h++)
        for (int i = 0; i < s.L; i++) {
          const int64_t row = row_at(&s, c, h, i), o = q_at(&s, i, c, h);
          for (int e = 0; e < dh; e++) dD[row] += U_BF16 * fabs((double)dvec[o + e]) * vmag[o + e];
        }
    ref_attn_backward(eq, ekv, er, eu, evb, &a, 1, dD);
    for (int64_t k = 0; k < nq; k++) mq[k] += 2.0 * eq[k];
    for (int64_t k = 0; k < nkv; k++) mkv[k] += 2.0 * ekv[k];
    for (int64_t k = 0; k < nr; k++) mr[k] += 2.0 * er[k];
    for (int e = 0; e < HD; e++) {
      mu[e] += 2.0 * eu[e];
      mvb[e] += 2.0 * evb[e];
    }
    bounds_act(mq, dq_c, nq, act), bounds_act(mkv, dkv_c, nkv, act), bounds_act(mr, dr_c, nr, act);
    free(dD), free(eq), free(ekv), free(er), free(eu), free(evb);
  }
  snprintf(what, sizeof what, "%s: dq", tag);
  check_act(what, out[0][2], dq_c, mq, nq, act);
  snprintf(what, sizeof what, "%s: dkv", tag);
  check_act(what, out[0][3], dkv_c, mkv, nkv, act);
  snprintf(what, sizeof what, "%s: dr", tag);
  check_act(what, out[0][4], dr_c, mr, nr, act);
  snprintf(what, sizeof what, "%s: du (+=)", tag);
  check_act(what, out[0][5], du_c, mu, HD, act);
  snprintf(what, sizeof what, "%s: dvb (+=)", tag);
  check_act(what, out[0][6], dvb_c, mvb, HD, act);

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
  free(a.q), free(a.kv), free(a.r), free(a.u), free(a.vb), free(a.dvec), free(a.prob), free(a.drop_factor);
  free(a.lse), free(a.serr), free(a.sabs), free(a.any);
  free(p_rel), free(bvec), free(vmag), free(mq), free(mkv), free(mr), free(mu), free(mvb);
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
  /* every case in fp32, then every case again in bf16 */
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], TXL_F32);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], TXL_BF16);
  printf("bf16 cases: largest err/bound %.3e\n", g_bf16_ratio);
  return parity_end();
}
