/* The relative-position attention of the CUDA backend (kernels/cuda/rel_attn.cu: batched GEMMs
 * and row kernels) against the CPU op (kernels/cpu/rel_attn.c, itself checked against a double
 * reference and finite differences in tests/ops/test_rel_attn.c) on the same random inputs: vec
 * from the forward, dq, dkv, dr (overwritten: poisoned with NaN before the call) and du, dvb
 * (accumulated: they start from random values) from the backward. The log-sum-exp the CUDA
 * forward saves is checked against log(sum exp(score)) computed in double from the inputs.
 * Shapes: one query (with and without memory), dh = 1, 8, 16, 41, 64, 100 and 130 (padded to
 * multiples of 8 but for 8, 16, 64), K and L that are not multiples of 8 (the padded score rows),
 * K = 1, H 1-4, B 1-10, col0 != 0, causal and same_length with mem_len giving every same_shift
 * case (0, inside (0, L), L; as src/model computes it) and the degenerate one where no query sees
 * any key (same_shift 0, M 0: both backends give zeros), dropatt 0 and > 0 (the Philox groups of
 * 4 features straddle the head boundary h K when K is not a multiple of 4), peaked and flat
 * softmaxes. Every case in the three combinations of optional parts the model uses (ops.def):
 * attn_type 0 (u, vb, r), 1 (u, r and the per-key bias rb, whose gradient drb is checked too) and
 * plain attention (attn_type 2, 3: no u, vb, r). The workspace is poisoned too (the kernels must not rely on its contents: the
 * padding of the head size must be written as zeros). Determinism: forward and backward run
 * twice on the same inputs must give the same bits. Rows ld > width apart (the shape's ldq, ldkv,
 * ldr), in every mode: the packed call's bits, the gaps neither read nor written (test_padded).
 *
 * Tolerances (see test_parity.c for the general argument: u = 2^-24, a float sum of k
 * terms in any order is within ~k u of the exact sum relative to the sum of |terms|, the two
 * backends are each within that of the exact value, TOL_C = 4 = 2 backends x 2 of slack).
 * Everything below is computed in double from the float inputs, per row i of (c, h):
 *   score:  s_ij is a sum of 2 dh products (two GEMMs on both backends), plus the two bias
 *           additions, the scale (applied to each GEMM's sum on the device, to their sum on the
 *           CPU) and the addition of the two: |ds_ij| <= (2 dh + 4) u A_ij (ref_rel_attn.c)
 *           + u A_ij for the device's one extra rounding (it scales each GEMM's sum, the CPU
 *           their sum once), A_ij = scale sum_e |q+u||k_j| +
 *           |q+vb||r_p| (+ scale |rb_p| with rb: the device multiplies it by the scale and adds
 *           it, one more rounding than the CPU's sum, so + 2 u A_ij then); serr_i = max_j of it,
 *           sabs_i = max_j |s_ij|.
 *   lse:    lse = m + log(l) with l = sum_j exp(s_j - m), summed over at most K terms with at
 *           most K rescalings (the online sum of each lane), exp within 2 ulp: the exact
 *           derivative of lse in s_j is p_j (sum 1), so |dlse| <= serr + (2K + 8) u + 4 u sabs
 *           (the roundings of s - m, |s - m| <= 2 sabs) + u |lse| + u log K.
 *   prob:   p = exp(s - lse) on the GPU, exp(s - m) / l on the CPU: relative error at most
 *           p_rel_i = 2 serr + (2K + 16) u + 8 u (sabs + log K + 1) on either side.
 *   vec:    a sum of K terms p~_j v_j (and the final division on the CPU):
 *           |dvec| <= (p_rel + (2K + 4) u) sum_j p~_j |v_j|.
 *   backward: as tests/ops/test_rel_attn.c, every gradient element is bounded by
 *           rel * mag, mag = the backward evaluated on absolute values (|dS| from p (|dP| +
 *           sum_k p_k |dP_k|), ...), rel = (4 dh + 2 K + 2 B L + 34) u + 2 max p_rel: the
 *           longest rounding chains are the score (2 dh), dP~ and D (dh and K), the sums over
 *           keys (K, dq and du) and over all B L query rows of every column (dr, dk, du, dvb),
 *           and a few single roundings (32 u, as the CPU op's test, + 2 u for the device's: the
 *           scale applied to each gradient GEMM's sum, and the sum of dq's two halves); the
 *           probabilities enter dS up to quadratically:
 *           2 p_rel. du, dvb add the rounding of the final +=: u (|du0| + |du|). drb is a sum
 *           over the B L rows (in the 2 B L above) of dBD, scaled once (in the 34 u).
 *
 * Tensor-core arithmetic. Each GEMM operand the device rounds has a relative error of at most
 * u_o: TF32 (the fp32 table under txl_cuda_set_gemm_math(TXL_GEMM_TF32): every operand is rounded
 * to a 10-bit mantissa, u_o = 2^-11) or bf16 (the bf16 table: q + u, q + vb, P~, dS and dBD are
 * stored in bf16 as GEMM operands, u_o = 2^-8; q, kv, r, dvec already are bf16, exact). A product
 * of two rounded operands is within (2 u_o + u_o^2) <= 2.01 u_o of its exact value, so:
 *   score:  serr grows by 2.01 u_o A_ij (both products of s_ij);
 *   vec:    + 2.01 u_o sum_j p~_j |v_j| (P~ and v rounded);
 *   backward: a gradient element goes through at most four roundings of u_o in a chain (dq:
 *           dP~ = dvec v^T (two operands), then dS as an operand, then k or r; dk, dr: dP~ (2),
 *           dS or dBD, q + u or q + vb; dv: P~ and dvec), so rel grows by 4.01 u_o, and by the
 *           probabilities' 2 p_rel (p_rel from the grown serr).
 * The bf16 outputs are stored once, rounded: bounds_act adds u8 (|ref| + b).
 * fp16 (the fp16 table) is the same with u_o = 2^-11, plus the absolute error eta = 2^-25 of a
 * rounding among fp16's subnormals (below 2^-14: small probabilities, dS, dBD), where the
 * relative bound does not hold: a product of operands a, b rounded to a + da, b + db with
 * |da| <= u_o |a| + eta errs by at most 2.01 u_o |a b| + 1.01 eta (|a| + |b|) (eta (|b|) when only
 * a is rounded). With |k|, |v|, |r|, |dvec| <= 1 (inputs, exact in fp16), |q + u|, |q + vb| <=
 * qmax + 0.5 = Qmax, P~ <= keep = 1 / (1 - p), |dS|, |dBD| <= 2 keep dh = Smax (|dP~| <= keep dh,
 * |D| the same), summed over each GEMM's inner dimension: score + 1.01 eta scale 2 dh (into
 * serr); vec + 1.01 eta K; dq + 1.01 eta scale 2 K; dk (B L terms of dS (q + u)) and dr
 * + 1.01 eta B L scale (Smax + Qmax), dv + 1.01 eta B L; du, dvb (B L K terms of dq's halves)
 * + 1.01 eta scale B L K. The fp16 outputs' own rounding: bounds_act (2^-11 and 2^-25). Every
 * value stays far below 65504 (|scores| <= scale 2 dh Qmax, the gradients O(dh)).
 * These are worst-case bounds: correct kernels sit well below them (the ratio err/bound is
 * printed for the tensor-core cases, where rounding an output to bf16 alone reaches nearly all
 * of the u8 |ref| term), while a wrong index, a missing term or a wrong mask is far above. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/dropout_sites.h"
#include "src/model/model.h"
#include "tests/cuda/parity.h"
#include "tests/lib/ref_rel_attn.h"

/* The largest err/bound of the tf32, bf16 and fp16 checks (printed by main). */
static double g_tc_ratio = 0.0;

#define U_TF32 (1.0 / 2048.0) /* 2^-11: the relative rounding of an operand to TF32 */

/* The arithmetic of one run: the table's activation type and, for fp32, TF32 GEMMs or not. */
typedef struct {
  TxlDtype act;
  int tf32;
  int fused; /* the fused route (txl_cuda_set_attn_impl; bf16 and fp16 only): forward, and backward
                for dh <= 64 (its D_i = dvec_i . vec_i reads the stored vec: one more rounding of
                u_o, inside the four of the backward chain, as dvec and v are exact inputs) */
} Mode;

static double mode_u(Mode m) { return m.act != TXL_F32 ? act_unit(m.act) : m.tf32 ? U_TF32 : 0.0; }
/* The absolute error of the device's rounding of a GEMM operand among the subnormals (fp16 only:
 * the file comment). */
static double mode_eta(Mode m) { return act_eta(m.act); }

typedef struct {
  int L, M, B, H, dh, col0, same_length, mem_len;
  float p;
  double qmax; /* q uniform in [-qmax, qmax]: 3 makes the softmax peaked, 1 flat */
} Case;

/* check_close, and for the tensor-core runs the largest err/bound kept for the summary (a NaN
 * fails in check_close and makes the summary NaN). */
static void check_act(const char *what, const float *got, const float *want, const double *bound,
                      int64_t n, Mode m) {
  check_close(what, got, want, bound, n);
  if (mode_u(m) == 0.0) return;
  for (int64_t i = 0; i < n; i++) {
    const double q = fabs((double)got[i] - (double)want[i]) / fmax(bound[i], 1e-300);
    if (q > g_tc_ratio || isnan(q)) g_tc_ratio = q;
  }
}

/* Which optional parts a case passes (the others NULL to the ops, zeros to the reference). */
enum { V_TYPE0, V_SHAW, V_PLAIN };
static const char *const VARIANT_TAGS[] = {"", "shaw ", "plain "};

/* The shape of a case, its rows packed (each ld its rows' width). */
static TxlAttnShape case_shape(const Case *cs) {
  TxlAttnShape s;
  s.L = cs->L;
  s.M = cs->M;
  s.B = cs->B;
  s.H = cs->H;
  s.dh = cs->dh;
  s.col0 = cs->col0;
  s.same_length = cs->same_length;
  s.same_shift = txl_attn_same_shift(s.L, s.M + s.L, cs->mem_len); /* as the model computes it */
  s.scale = (float)(1.0 / sqrt((double)s.dh));
  s.ldq = s.H * s.dh;
  s.ldkv = 2 * s.H * s.dh;
  s.ldr = s.H * s.dh;
  return s;
}

/* The CUDA functions of the table with activations act: txl_cuda_rel_attn_workspace, _forward
 * and _backward (TXL_F32), their _bf16 (TXL_BF16) or _fp16 (TXL_F16) variants. */
typedef struct {
  size_t (*workspace)(int, int, int, int, int, int);
  void (*forward)(void *, float *, const void *, const void *, const void *, const float *, const float *,
                  const float *, TxlAttnShape, TxlDropout, void *);
  void (*backward)(void *, void *, void *, float *, float *, float *, const void *, const void *, const void *,
                   const void *, const void *, const float *, const float *, const float *, const float *,
                   TxlAttnShape, TxlDropout, void *);
} AttnFns;

static AttnFns attn_fns(TxlDtype act) {
  if (act == TXL_BF16)
    return (AttnFns){txl_cuda_rel_attn_workspace_bf16, txl_cuda_rel_attn_forward_bf16,
                     txl_cuda_rel_attn_backward_bf16};
  if (act == TXL_F16)
    return (AttnFns){txl_cuda_rel_attn_workspace_fp16, txl_cuda_rel_attn_forward_fp16,
                     txl_cuda_rel_attn_backward_fp16};
  return (AttnFns){txl_cuda_rel_attn_workspace, txl_cuda_rel_attn_forward, txl_cuda_rel_attn_backward};
}

/* One case in mode m: activations TXL_F32 (txl_cuda_rel_attn_forward / _backward, exact fp32 or
 * TF32 GEMMs), TXL_BF16 (the _bf16 pair) or TXL_F16 (the _fp16 pair), bounds as in the file
 * comment. */
static void run_case(const Case *cs, Mode m, int variant) {
  const int has_u = variant != V_PLAIN, has_vb = variant == V_TYPE0, has_r = variant != V_PLAIN;
  const int has_rb = variant == V_SHAW;
  const TxlDtype act = m.act;
  const double uo = mode_u(m), eta = mode_eta(m);
  txl_cuda_set_gemm_math(m.tf32 ? TXL_GEMM_TF32 : TXL_GEMM_FP32);
  txl_cuda_set_attn_impl(m.fused ? TXL_ATTN_FUSED : TXL_ATTN_GEMM);
  const TxlAttnShape s = case_shape(cs);
  const int K = s.M + s.L;
  const TxlDropout drop = {cs->p, 77u, txl_layer_site(3, TXL_LSITE_ATTN_PROB), 11u, NULL};
  const int dh = s.dh, HD = s.H * dh;
  const int64_t nq = (int64_t)s.L * s.B * HD, nkv = (int64_t)K * s.B * 2 * HD,
                nr = (int64_t)K * HD, nrow = (int64_t)s.B * s.H * s.L;
  char tag[128], what[192];
  snprintf(tag, sizeof tag, "%s%s%s%sL=%d M=%d B=%d H=%d dh=%d col0=%d sl=%d shift=%d p=%.1f", VARIANT_TAGS[variant],
           act == TXL_BF16 ? "bf16 " : act == TXL_F16 ? "fp16 " : "", m.tf32 ? "tf32 " : "", m.fused ? "fused " : "", s.L, s.M, s.B, s.H, dh,
           s.col0, s.same_length, s.same_shift,
           (double)cs->p);

  float *q = host_rand(nq, -cs->qmax, cs->qmax), *kv = host_rand(nkv, -1.0, 1.0), *r = host_rand(nr, -1.0, 1.0);
  float *u = host_rand(HD, -0.5, 0.5), *vb = host_rand(HD, -0.5, 0.5), *dvec = host_rand(nq, -1.0, 1.0);
  float *du0 = host_rand(HD, -1.0, 1.0), *dvb0 = host_rand(HD, -1.0, 1.0);
  round_act(q, nq, act), round_act(kv, nkv, act), round_act(r, nr, act), round_act(dvec, nq, act);
  const int64_t nrb = (int64_t)K * s.H;
  float *rb = host_rand(nrb, -0.5, 0.5);
  if (!has_u) memset(u, 0, (size_t)HD * sizeof(float));
  if (!has_vb) memset(vb, 0, (size_t)HD * sizeof(float));
  if (!has_r) memset(r, 0, (size_t)nr * sizeof(float));
  const float *op_u = has_u ? u : NULL, *op_vb = has_vb ? vb : NULL, *op_r = has_r ? r : NULL;
  const float *op_rb = has_rb ? rb : NULL;

  /* ---- CPU ---------------------------------------------------------------------------- */
  float *vec_c = host_rand(nq, 0, 1), *prob = host_rand((int64_t)txl_cpu_rel_attn_saved_floats(s.L, K, s.B, s.H), 0, 1);
  float *dq_c = host_rand(nq, 0, 1), *dkv_c = host_rand(nkv, 0, 1), *dr_c = host_rand(nr, 0, 1);
  float *du_c = host_copy(du0, HD), *dvb_c = host_copy(dvb0, HD), *drb_c = host_rand(nrb, 0, 1);
  void *work_c = malloc(txl_cpu_rel_attn_workspace(s.L, K, s.B, s.H, dh, 1) + 64);
  txl_cpu_rel_attn_forward(vec_c, prob, q, kv, op_r, op_u, op_vb, op_rb, s, drop, work_c);
  txl_cpu_rel_attn_backward(dq_c, dkv_c, has_r ? dr_c : NULL, has_u ? du_c : NULL, has_vb ? dvb_c : NULL,
                            has_rb ? drb_c : NULL, dvec, vec_c, q, kv, op_r, op_u, op_vb, op_rb, prob, s, drop, work_c);

  /* ---- CUDA, twice --------------------------------------------------------------------- */
  void *d_q = dev_act(q, nq, act, "test: q"), *d_kv = dev_act(kv, nkv, act, "test: kv");
  void *d_r = dev_act(r, nr, act, "test: r"), *d_dvec = dev_act(dvec, nq, act, "test: dvec");
  float *d_u = dev_from(u, (size_t)HD * 4, "test: u"), *d_vb = dev_from(vb, (size_t)HD * 4, "test: vb");
  float *d_rb = dev_from(rb, (size_t)nrb * 4, "test: rb");
  const size_t nsaved = txl_cuda_rel_attn_saved_floats(s.L, K, s.B, s.H);
  const AttnFns fn = attn_fns(act);
  const size_t wbytes = fn.workspace(s.L, K, s.B, s.H, dh, 1);
  float *d_work = dev_poison((int64_t)(wbytes / 4), "test: workspace");
  if (nsaved != (size_t)nrow) check_fail("saved floats != B * H * L");
  float *out[2][8]; /* vec, lse, dq, dkv, dr, du, dvb, drb */
  const int64_t sizes[8] = {nq, nrow, nq, nkv, nr, HD, HD, nrb};
  const TxlDtype types[8] = {act, TXL_F32, act, act, act, TXL_F32, TXL_F32, TXL_F32};
  const int present[8] = {1, 1, 1, 1, has_r, has_u, has_vb, has_rb};
  for (int run = 0; run < 2; run++) {
    void *d_vec = dev_poison_act(nq, act, "test: vec"), *d_lse = dev_poison(nrow, "test: lse");
    void *d_dq = dev_poison_act(nq, act, "test: dq"), *d_dkv = dev_poison_act(nkv, act, "test: dkv");
    void *d_dr = dev_poison_act(nr, act, "test: dr");
    float *d_du = dev_from(du0, (size_t)HD * 4, "test: du"), *d_dvb = dev_from(dvb0, (size_t)HD * 4, "test: dvb");
    float *d_drb = dev_poison(nrb, "test: drb");
    fn.forward(d_vec, d_lse, d_q, d_kv, has_r ? d_r : NULL, has_u ? d_u : NULL, has_vb ? d_vb : NULL,
               has_rb ? d_rb : NULL, s, drop, d_work);
    fn.backward(d_dq, d_dkv, has_r ? d_dr : NULL, has_u ? d_du : NULL, has_vb ? d_dvb : NULL,
                has_rb ? d_drb : NULL, d_dvec, d_vec, d_q, d_kv, has_r ? d_r : NULL, has_u ? d_u : NULL,
                has_vb ? d_vb : NULL, has_rb ? d_rb : NULL, d_lse, s, drop, d_work);
    void *dev[8] = {d_vec, d_lse, d_dq, d_dkv, d_dr, d_du, d_dvb, d_drb};
    for (int k = 0; k < 8; k++) {
      out[run][k] = host_from_act(dev[k], sizes[k], types[k]);
      txl_cuda_free(dev[k]);
    }
  }

  /* ---- reference and bounds ------------------------------------------------------------ */
  RefAttn a = {.s = s, .drop = drop, .K = K, .q = ot_alloc_d(nq), .kv = ot_alloc_d(nkv), .r = ot_alloc_d(nr),
               .u = ot_alloc_d(HD), .vb = ot_alloc_d(HD), .dvec = ot_alloc_d(nq), .prob = ot_alloc_d(nrow * K),
               .drop_factor = ot_alloc_d(nrow * K), .lse = ot_alloc_d(nrow), .serr = ot_alloc_d(nrow),
               .sabs = ot_alloc_d(nrow), .any = calloc((size_t)nrow, sizeof(int)),
               .rb = has_rb ? ot_alloc_d(nrb) : NULL};
  if (has_rb) ot_to_double(a.rb, rb, nrb);
  ot_to_double(a.q, q, nq), ot_to_double(a.kv, kv, nkv), ot_to_double(a.r, r, nr);
  ot_to_double(a.u, u, HD), ot_to_double(a.vb, vb, HD), ot_to_double(a.dvec, dvec, nq);
  ref_attn_forward(&a);

  /* the device's extra rounding of the score: u, and 2.01 u_o per product (file comment);
   * a.serr is (2 dh + 4) u A of the row's largest A */
  const double extra = has_rb ? 2.0 : 1.0; /* rb: scaled and added on the device */
  for (int64_t w = 0; w < nrow; w++)
    a.serr[w] *= ((2.0 * dh + 4.0 + extra) * OT_U + 2.01 * uo) / ((2.0 * dh + 4.0) * OT_U);
  /* fp16: the absolute errors of operands among the subnormals (file comment); eta = 0 else.
   * keep = 1 / (1 - p) bounds P~; |q + u|, |q + vb| <= qmax + 0.5 (Qmax); |dS|, |dBD| <= 2 keep
   * dh (Smax); k, v, r, dvec are inputs within [-1, 1], exact in fp16. */
  const double keep = 1.0 / (1.0 - (double)cs->p), Qmax = cs->qmax + 0.5, Smax = 2.0 * keep * dh;
  const double BL = (double)s.B * s.L, sc = (double)s.scale;
  for (int64_t w = 0; w < nrow; w++) a.serr[w] += 1.01 * eta * sc * 2.0 * dh;
  const double eta_vec = 1.01 * eta * K, eta_dq = 1.01 * eta * sc * 2.0 * K,
               eta_dkv = 1.01 * eta * BL * fmax(sc * (Smax + Qmax), 1.0), eta_dr = 1.01 * eta * BL * sc * (Smax + Qmax),
               eta_duvb = 1.01 * eta * sc * BL * K;
  /* drb: sums over the B L query rows of the scaled dBD, each stored in the act type first */
  const double eta_drb = 1.01 * eta * sc * BL;
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
          bvec[o] = TOL_C * (p_rel[row] + (2.0 * K + 4.0) * OT_U + 2.01 * uo) * vmag[o] + eta_vec;
        }
      }
  bounds_act(bvec, vec_c, nq, act); /* the rounding of the store */
  snprintf(what, sizeof what, "%s: vec", tag);
  check_act(what, out[0][0], vec_c, bvec, nq, m);

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
    if (n) check_act(what, got, want, blse, n, m);
    snprintf(what, sizeof what, "%s: lse = -inf (no visible key)", tag);
    if (n_none) check_bits(what, got_none, want_none, n_none);
    free(got), free(want), free(got_none), free(want_none), free(blse);
  }

  /* backward */
  double *mq = ot_alloc_d(nq), *mkv = ot_alloc_d(nkv), *mr = ot_alloc_d(nr);
  double *mu = ot_alloc_d(HD), *mvb = ot_alloc_d(HD), *mrb = ot_alloc_d(nrb);
  ref_attn_backward(mq, mkv, mr, mu, mvb, has_rb ? mrb : NULL, &a, 1, NULL);
  const double rel = (4.0 * dh + 2.0 * K + 2.0 * s.B * s.L + 34.0) * OT_U + 2.0 * p_rel_max + 4.01 * uo;
  for (int64_t k = 0; k < nq; k++) mq[k] = TOL_C * rel * mq[k] + eta_dq;
  for (int64_t k = 0; k < nkv; k++) mkv[k] = TOL_C * rel * mkv[k] + eta_dkv;
  for (int64_t k = 0; k < nr; k++) mr[k] = TOL_C * rel * mr[k] + eta_dr;
  for (int64_t k = 0; k < nrb; k++) mrb[k] = TOL_C * rel * mrb[k] + eta_drb; /* fp32, no store rounding */
  for (int e = 0; e < HD; e++) {
    mu[e] = TOL_C * (rel * mu[e] + OT_U * (fabs((double)du0[e]) + fabs((double)du_c[e]))) + eta_duvb;
    mvb[e] = TOL_C * (rel * mvb[e] + OT_U * (fabs((double)dvb0[e]) + fabs((double)dvb_c[e]))) + eta_duvb;
  }
  /* the rounding of the stores of dq, dkv, dr (du, dvb are fp32) */
  bounds_act(mq, dq_c, nq, act), bounds_act(mkv, dkv_c, nkv, act), bounds_act(mr, dr_c, nr, act);
  snprintf(what, sizeof what, "%s: dq", tag);
  check_act(what, out[0][2], dq_c, mq, nq, m);
  snprintf(what, sizeof what, "%s: dkv", tag);
  check_act(what, out[0][3], dkv_c, mkv, nkv, m);
  snprintf(what, sizeof what, "%s: dr", tag);
  if (has_r) check_act(what, out[0][4], dr_c, mr, nr, m);
  snprintf(what, sizeof what, "%s: du (+=)", tag);
  if (has_u) check_act(what, out[0][5], du_c, mu, HD, m);
  snprintf(what, sizeof what, "%s: dvb (+=)", tag);
  if (has_vb) check_act(what, out[0][6], dvb_c, mvb, HD, m);
  snprintf(what, sizeof what, "%s: drb", tag);
  if (has_rb) check_act(what, out[0][7], drb_c, mrb, nrb, m);

  /* determinism: the second run gives the same bits */
  const char *names[8] = {"vec", "lse", "dq", "dkv", "dr", "du", "dvb", "drb"};
  for (int k = 0; k < 8; k++) {
    if (!present[k]) continue;
    snprintf(what, sizeof what, "%s: %s run 1 vs run 2", tag, names[k]);
    check_bits(what, out[1][k], out[0][k], sizes[k]);
  }

  for (int run = 0; run < 2; run++)
    for (int k = 0; k < 8; k++) free(out[run][k]);
  txl_cuda_free(d_rb), free(rb), free(drb_c), free(a.rb), free(mrb);
  txl_cuda_free(d_q), txl_cuda_free(d_kv), txl_cuda_free(d_r), txl_cuda_free(d_u);
  txl_cuda_free(d_vb), txl_cuda_free(d_dvec), txl_cuda_free(d_work);
  free(q), free(kv), free(r), free(u), free(vb), free(dvec), free(du0), free(dvb0);
  free(vec_c), free(prob), free(dq_c), free(dkv_c), free(dr_c), free(du_c), free(dvb_c), free(work_c);
  free(a.q), free(a.kv), free(a.r), free(a.u), free(a.vb), free(a.dvec), free(a.prob), free(a.drop_factor);
  free(a.lse), free(a.serr), free(a.sabs), free(a.any);
  free(p_rel), free(bvec), free(vmag), free(mq), free(mkv), free(mr), free(mu), free(mvb);
}

/* ---- padded rows ------------------------------------------------------------------------
 * Rows ld > width apart (the shape's ldq, ldkv, ldr): the gathers read and the scatters write the
 * first width elements of each row only, and everything between them (the per-head layouts of the
 * workspace, the GEMMs, the row kernels) is the packed call's, so every output is the packed
 * call's bits and every gap keeps its value. The inputs' gaps hold NaN (a gap read would poison an
 * output). The packed call's outputs start as NaN, the padded call's as PAD_FILL, rows and gaps:
 * an element that neither call writes differs, a gap written differs from PAD_FILL. */

/* The device tensors of one call in the layout of its shape (NULL: an absent part). */
typedef struct {
  void *q, *kv, *r, *dvec, *vec, *dq, *dkv, *dr;
  float *u, *vb, *rb, *lse, *du, *dvb, *drb, *work;
} DevCall;

/* Device rows [n, ld] of the act type: host rows x [n, width], NaN in the gaps (an input). */
static void *dev_nan_padded(const float *x, int64_t n, int width, int ld, TxlDtype act, const char *what) {
  float *p = ot_alloc(n * ld);
  ot_pad_rows(p, x, n, width, ld, NAN);
  void *d = dev_act(p, n * ld, act, what);
  free(p);
  return d;
}

/* n elements of the act type, every one PAD_FILL (an output of the padded call). */
static void *dev_pad_fill(int64_t n, TxlDtype act, const char *what) {
  float *p = ot_alloc_filled(n, PAD_FILL);
  void *d = dev_act(p, n, act, what);
  free(p);
  return d;
}

/* forward, then backward on the forward's vec and lse */
static void call_dev(const AttnFns *fn, const DevCall *c, TxlAttnShape s, TxlDropout drop) {
  fn->forward(c->vec, c->lse, c->q, c->kv, c->r, c->u, c->vb, c->rb, s, drop, c->work);
  fn->backward(c->dq, c->dkv, c->dr, c->du, c->dvb, c->drb, c->dvec, c->vec, c->q, c->kv, c->r, c->u, c->vb, c->rb,
               c->lse, s, drop, c->work);
}

/* The case in mode m with packed rows and with rows ldq, ldkv, ldr apart (each >= its width). */
static void test_padded(const Case *cs, Mode m, int variant, int ldq, int ldkv, int ldr) {
  const int has_u = variant != V_PLAIN, has_vb = variant == V_TYPE0, has_r = variant != V_PLAIN;
  const int has_rb = variant == V_SHAW;
  const TxlDtype act = m.act;
  txl_cuda_set_gemm_math(m.tf32 ? TXL_GEMM_TF32 : TXL_GEMM_FP32);
  txl_cuda_set_attn_impl(m.fused ? TXL_ATTN_FUSED : TXL_ATTN_GEMM);
  const TxlAttnShape s = case_shape(cs);
  TxlAttnShape sp = s;
  sp.ldq = ldq, sp.ldkv = ldkv, sp.ldr = ldr;
  const int K = s.M + s.L, HD = s.H * s.dh;
  const TxlDropout drop = {cs->p, 78u, txl_layer_site(2, TXL_LSITE_ATTN_PROB), 5u, NULL};
  /* rows and widths: q, vec, dq, dvec [LB, HD]; kv, dkv [KB, 2 HD]; r, dr [K, HD] */
  const int64_t LB = (int64_t)s.L * s.B, KB = (int64_t)K * s.B, nrow = LB * s.H, nrb = (int64_t)K * s.H;
  char op[160];
  snprintf(op, sizeof op, "rel_attn %s%sL=%d M=%d B=%d H=%d dh=%d sl=%d p=%.1f ldkv %d ldr %d", VARIANT_TAGS[variant],
           m.tf32 ? "tf32 " : "", s.L, s.M, s.B, s.H, s.dh, s.same_length, (double)cs->p, ldkv, ldr);

  float *q = host_rand(LB * HD, -cs->qmax, cs->qmax), *kv = host_rand(KB * 2 * HD, -1.0, 1.0);
  float *r = host_rand((int64_t)K * HD, -1.0, 1.0), *dvec = host_rand(LB * HD, -1.0, 1.0);
  round_act(q, LB * HD, act), round_act(kv, KB * 2 * HD, act), round_act(r, (int64_t)K * HD, act);
  round_act(dvec, LB * HD, act);
  float *u = host_rand(HD, -0.5, 0.5), *vb = host_rand(HD, -0.5, 0.5), *rb = host_rand(nrb, -0.5, 0.5);
  float *du0 = host_rand(HD, -1.0, 1.0), *dvb0 = host_rand(HD, -1.0, 1.0);
  const AttnFns fn = attn_fns(act);
  const size_t wbytes = fn.workspace(s.L, K, s.B, s.H, s.dh, 1);

  DevCall c[2]; /* packed (outputs NaN), padded (outputs PAD_FILL) */
  const TxlAttnShape *shape[2] = {&s, &sp};
  for (int t = 0; t < 2; t++) {
    const TxlAttnShape *h = shape[t];
    DevCall *d = &c[t];
    d->q = dev_nan_padded(q, LB, HD, h->ldq, act, "test: q");
    d->kv = dev_nan_padded(kv, KB, 2 * HD, h->ldkv, act, "test: kv");
    d->r = has_r ? dev_nan_padded(r, K, HD, h->ldr, act, "test: r") : NULL;
    d->dvec = dev_nan_padded(dvec, LB, HD, h->ldq, act, "test: dvec");
    if (t == 0) {
      d->vec = dev_poison_act(LB * HD, act, "test: vec"), d->dq = dev_poison_act(LB * HD, act, "test: dq");
      d->dkv = dev_poison_act(KB * 2 * HD, act, "test: dkv");
      d->dr = has_r ? dev_poison_act((int64_t)K * HD, act, "test: dr") : NULL;
      d->lse = dev_poison(nrow, "test: lse"), d->drb = has_rb ? dev_poison(nrb, "test: drb") : NULL;
    } else {
      d->vec = dev_pad_fill(LB * ldq, act, "test: vec"), d->dq = dev_pad_fill(LB * ldq, act, "test: dq");
      d->dkv = dev_pad_fill(KB * ldkv, act, "test: dkv");
      d->dr = has_r ? dev_pad_fill((int64_t)K * ldr, act, "test: dr") : NULL;
      d->lse = dev_pad_fill(nrow, TXL_F32, "test: lse");
      d->drb = has_rb ? dev_pad_fill(nrb, TXL_F32, "test: drb") : NULL;
    }
    d->u = has_u ? dev_from(u, (size_t)HD * 4, "test: u") : NULL;
    d->vb = has_vb ? dev_from(vb, (size_t)HD * 4, "test: vb") : NULL;
    d->rb = has_rb ? dev_from(rb, (size_t)nrb * 4, "test: rb") : NULL;
    d->du = has_u ? dev_from(du0, (size_t)HD * 4, "test: du") : NULL;
    d->dvb = has_vb ? dev_from(dvb0, (size_t)HD * 4, "test: dvb") : NULL;
    d->work = dev_poison((int64_t)(wbytes / 4), "test: workspace");
    call_dev(&fn, d, *h, drop);
  }
  check_padded(op, "vec", act, c[1].vec, c[0].vec, LB, HD, ldq);
  check_same_dev(op, "lse", act, HD, ldq, c[1].lse, c[0].lse, nrow);
  check_padded(op, "dq", act, c[1].dq, c[0].dq, LB, HD, ldq);
  check_padded(op, "dkv", act, c[1].dkv, c[0].dkv, KB, 2 * HD, ldkv);
  if (has_r) check_padded(op, "dr", act, c[1].dr, c[0].dr, K, HD, ldr);
  if (has_u) check_same_dev(op, "du (+=)", act, HD, ldq, c[1].du, c[0].du, HD);
  if (has_vb) check_same_dev(op, "dvb (+=)", act, HD, ldq, c[1].dvb, c[0].dvb, HD);
  if (has_rb) check_same_dev(op, "drb", act, HD, ldq, c[1].drb, c[0].drb, nrb);

  for (int t = 0; t < 2; t++) {
    void *bufs[] = {c[t].q, c[t].kv, c[t].r, c[t].dvec, c[t].vec, c[t].dq, c[t].dkv, c[t].dr, c[t].u, c[t].vb,
                    c[t].rb, c[t].lse, c[t].du, c[t].dvb, c[t].drb, c[t].work};
    for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) txl_cuda_free(bufs[k]);
  }
  free(q), free(kv), free(r), free(dvec), free(u), free(vb), free(rb), free(du0), free(dvb0);
}

int main(void) {
  parity_begin("test_cuda_rel_attn");
  static const Case cases[] = {
      /* L   M   B  H  dh  col0 sl mem_len p  qmax */
      {1, 0, 1, 1, 8, 0, 0, 0, 0.0f, 3},      /* one query, one key (K = 1, padded to 8)        */
      {1, 6, 2, 2, 16, 1, 1, 6, 0.1f, 3},     /* one query with memory (a generation step),
                                                 same_shift 0: it sees keys 1..6                */
      {7, 0, 2, 2, 16, 3, 1, 4, 0.1f, 3},     /* same_shift 4, in (0, L)                        */
      {13, 9, 3, 3, 41, 1, 1, 9, 0.1f, 3},    /* same_shift 0 (mem_len = M): keys (i, M+i];
                                                 K = 22: Philox groups straddle h K             */
      {13, 9, 2, 4, 41, 5, 0, 9, 0.0f, 3},    /* causal only (same_shift 0 is ignored), odd dh */
      {33, 70, 2, 2, 64, 2, 1, 80, 0.1f, 3},  /* K = 103, same_shift 10                         */
      {33, 70, 1, 1, 64, 0, 1, 200, 0.0f, 3}, /* same_shift L (mem_len >= K): the causal mask   */
      {70, 1, 2, 1, 8, 1, 0, 1, 0.1f, 1},     /* L = 70, M < mem_len is not the case here:
                                                 M = mem_len = 1; a flat softmax, so that every
                                                 key weighs                                      */
      {40, 30, 2, 2, 100, 4, 1, 32, 0.1f, 3}, /* dh = 100, M < mem_len (30 of 32), same_shift 2 */
      {5, 3, 3, 2, 1, 0, 0, 3, 0.2f, 3},      /* dh = 1 (padded to 8)                           */
      {7, 5, 10, 1, 8, 2, 1, 9, 0.1f, 3},     /* B = 10 columns, M < mem_len                    */
      {3, 2, 1, 2, 130, 0, 0, 2, 0.1f, 3},    /* dh = 130 > 128                                 */
      {6, 300, 2, 2, 8, 3, 1, 302, 0.1f, 1},  /* K = 306 > 128 keys: each lane of a row walks
                                                 three groups of 4 (the online sum across them),
                                                 M < mem_len, a flat softmax                     */
      {4, 0, 2, 2, 8, 0, 1, 0, 0.0f, 3},      /* same_shift 0, M = 0: no query sees any key     */
      {130, 0, 1, 1, 64, 1, 0, 0, 0.1f, 3},   /* L = 130: three query tiles of the fused kernel
                                                 (64 rows), the last of 2; M = 0              */
      {16, 3800, 1, 1, 64, 0, 1, 3800, 0.0f, 1}, /* evaluation memory 3,800 (enwik8 large's):
                                                 K = 3,816 keys, 120 key tiles, a flat softmax */
  };
  /* every case in exact fp32, then in TF32, then in bf16, then in fp16 (file comment); fp16 on
   * sm_75 too (its tensor cores came with sm_70) */
  static const Mode modes[] = {{TXL_F32, 0, 0}, {TXL_F32, 1, 0}, {TXL_BF16, 0, 0}, {TXL_F16, 0, 0},
                               {TXL_BF16, 0, 1}, {TXL_F16, 0, 1}};
  const int tc = parity_has_tf32_bf16("the TF32 and bf16 cases");
  for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
    if ((modes[mi].tf32 || modes[mi].act == TXL_BF16) && !tc) continue;
    for (int v = V_TYPE0; v <= V_PLAIN; v++)
      for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) run_case(&cases[k], modes[mi], v);
  }
  /* padded rows in every mode: each width rounded up to 8 (the model's rows on CUDA, txl_row_ld),
   * and width + 3 / + 1 (three different strides: one used for the wrong tensor shows) */
  static const Case padded[] = {
      /* L   M   B  H  dh  col0 sl mem_len p  qmax */
      {13, 9, 3, 3, 41, 1, 1, 9, 0.1f, 3},    /* odd dh, same_length, dropatt */
      {5, 3, 3, 2, 1, 0, 0, 3, 0.2f, 3},      /* dh = 1 */
      {7, 0, 2, 3, 5, 3, 1, 4, 0.1f, 3},      /* M = 0, same_shift 4 */
      {4, 0, 2, 3, 5, 0, 1, 0, 0.0f, 3},      /* same_shift 0, M = 0: no query sees any key */
      {0, 5, 2, 3, 5, 0, 0, 5, 0.0f, 3},      /* no query: dkv, dr zeroed row by row */
  };
  for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
    if ((modes[mi].tf32 || modes[mi].act == TXL_BF16) && !tc) continue;
    for (int v = V_TYPE0; v <= V_PLAIN; v++)
      for (size_t k = 0; k < sizeof padded / sizeof padded[0]; k++) {
        const int HD = padded[k].H * padded[k].dh;
        test_padded(&padded[k], modes[mi], v, (int)txl_row_ld(8, HD), (int)txl_row_ld(8, 2 * HD),
                    (int)txl_row_ld(8, HD));
        test_padded(&padded[k], modes[mi], v, HD + 3, 2 * HD + 3, HD + 1);
      }
  }
  txl_cuda_set_gemm_math(TXL_GEMM_FP32);
  txl_cuda_set_attn_impl(TXL_ATTN_GEMM);
  printf("tf32, bf16 and fp16 cases: largest err/bound %.3e\n", g_tc_ratio);
  return parity_end();
}
