/* Relative multi-head attention of Transformer-XL (attn_type 0) as fused tiled kernels, the
 * CUDA counterpart of kernels/cpu/rel_attn.c (same math, masks and dropatt masks; see
 * kernels/ops.h). Per column c, head h, query i and key j (K = M + L keys):
 *   s_ij  = ((q_i + u) . k_j + (q_i + vb) . r_p) * scale,   p = L-1-i+j  (distance M+i-j)
 *   visible: lo(i) <= j <= hi(i),  hi(i) = M + i,  lo(i) = same_length ? max(0, i-same_shift+1) : 0
 *   P_ij  = exp(s_ij - lse_i) over the visible j,  lse_i = log sum_j exp(s_ij)
 *   P~_ij = P_ij * keep_ij * dscale  (dropatt: row i, column col0 + c, feature h*K + j)
 *   vec_i = sum_j P~_ij v_j
 * The score tensor never reaches global memory: the forward keeps only lse [B, H, L] (`saved`),
 * the backward recomputes the scores from q, k, r and lse.
 *
 * Tiles. A block has 256 threads as a 16 x 16 grid (ty = tid / 16, tx = tid % 16); the 16
 * threads of one ty are one half-warp. A (BQ query rows) x (BK keys) tile of scores is computed
 * by thread (ty, tx) for rows a = ty*RA + alpha (RA = BQ/16) and keys b = tx*CB + beta
 * (CB = BK/16), so every score row lives in one half-warp and its max / sum are half-warp
 * shuffles. The operands are staged in shared memory as rows of `ld` floats (ld = dh rounded
 * up to odd, which spreads consecutive rows over the banks): q+u, q+vb [BQ], k, v [BK] and the
 * band of BQ+BK-1 consecutive rows of r the tile needs (t = b - a + BQ - 1 is row p0 + t,
 * p0 = L - i0 - BQ + j0). Outputs that run over the head dimension (vec, dq, dk, dv) are held
 * in registers by thread (ty, tx) for e = tx + 16 m, m < DHP/16, where DHP is dh rounded up to
 * 16, 32, 64 or 128 (a template argument; any dh from 1 to 128 works, e >= dh is skipped).
 * Tile sizes: BQ = BK = 64 for dh <= 64, BQ = BK = 32 for dh in (64, 128]. Shared memory at
 * the largest dh of each (64 / 128): forward 114 / 100 KiB, dkv 147 / 121 KiB, dq 138 /
 * 133 KiB, within the 163 KiB a block may have on sm_80 (raised with cudaFuncSetAttribute
 * above the 48 KiB default); less for smaller dh.
 *
 * Forward (grid: (c,h) x query tiles): loops over the key tiles of the visible range of its
 * rows with an online softmax (running max and sum per row, the accumulator rescaled when the
 * max grows); dropatt multiplies the probability when it is accumulated into P v, while the
 * normalisation uses the undropped sum, exactly as the CPU. Writes vec and lse.
 *
 * Backward, with dP~_ij = dvec_i . v_j, dP = dP~ keep dscale, D_i = dvec_i . vec_i (= sum_j
 * P_ij dP_ij, since vec_i = sum_j P~_ij v_j), dS_ij = P_ij (dP_ij - D_i) scale:
 *   1. delta:   D [B, H, L], one warp per row.
 *   2. dkv:     grid (c,h) x key tiles; loops over the query tiles that see the key tile and
 *               accumulates dk_j = sum_i dS_ij (q_i + u), dv_j = sum_i P~_ij dvec_i in
 *               registers; writes every row of dkv (zeros where no query sees the key).
 *   3. dq:      grid (h, column group g) x query tiles; for each column c = g, g+G, ... loops
 *               over the key tiles and accumulates dq_i = sum_j dS_ij k_j + sum_j dS_ij r_p
 *               (the two halves kept apart: their sums over i are the du and dvb parts of
 *               this (c, h, query tile), reduced in a fixed order inside the block), and adds
 *               the dr band of every key tile, sum over the diagonal t of dS (q + vb), to a
 *               partial of its own in the workspace: [(K + BQ - 1) positions, dh] per
 *               (h, query tile, g), summed over the columns of the group.
 *   4. reductions: dr[p] = sum over query tiles, then groups, of the partials (OVERWRITES
 *               every element of dr: zero where nothing contributes); du += and dvb += the
 *               sums over columns, then query tiles, of the per-block parts.
 * No float atomics: every output element and every partial sum is accumulated in an order
 * fixed by the shapes alone (block-private partials, barriers between the key tiles that add
 * to the same dr partial), so the results are the same bits on every run.
 *
 * Rows without any visible key (only same_length with same_shift = 0 and M = 0): the CPU gives
 * them probabilities 0, so vec = 0 and zero gradients; so does this code (lse = -inf, no P is
 * ever evaluated for a masked pair).
 *
 * Workspace (backward only): D, the du/dvb parts and the dr partials; see
 * txl_cuda_rel_attn_workspace. The forward uses none.
 *
 * Storage types (kernels/ops.h). Every kernel is a template on T, the type of the activations
 * q, kv, r, vec and of their gradients dvec, dq, dkv, dr: float (txl_cuda_rel_attn_forward /
 * _backward) or txl_bf16 (the _bf16 pair). Loads widen to float (txl_ld) and the shared tiles,
 * the registers and every sum are float; each output element is rounded once, when it is
 * stored (txl_st). u, vb, du, dvb, the saved lse and the whole workspace (D, the du / dvb parts,
 * the dr partials) are float in both, so the partial sums of dr reach bf16 only in the final
 * reduction. The one bf16 value read back is vec itself: D_i = dvec_i . vec_i takes the vec
 * the forward stored, which moves D by at most 2^-8 sum_e |dvec_ie vec_ie| (the tolerance of
 * tests/cuda/test_rel_attn.c counts it). With T = float the code is the fp32 kernel as it
 * was (txl_ld / txl_st are plain loads and stores). */
#include <math.h>

#include "kernels/common/bf16.h"
#include "kernels/common/dropout.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/rel_attn_tiles.cuh"

/* ---- forward ----------------------------------------------------------------------------- */

/* grid (B*H, query tiles); block 256. vec [L, B, H, dh]; lse [B, H, L].
 * shared: sQU, sQV [BQ][ld]; sK, sV [BK][ld]; sR [BQ+BK-1][ld]; sP [BQ][BK+1] */
template <typename T, int BQ, int BK, int DHP>
static __global__ void rel_attn_forward_kernel(T *vec, float *lse, const T *q, const T *kv,
                                               const T *r, const float *u, const float *vb,
                                               AttnGeo g) {
  constexpr int RA = BQ / 16, CB = BK / 16, EM = DHP / 16, NR = BQ + BK - 1, LP = BK + 1;
  TXL_DYNAMIC_SHARED(float, sm);
  const int ld = g.ld, dh = g.dh, HD = g.H * g.dh;
  float *sQU = sm, *sQV = sQU + BQ * ld, *sK = sQV + BQ * ld, *sV = sK + BK * ld;
  float *sR = sV + BK * ld, *sP = sR + NR * ld;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int ch = blockIdx.x, c = ch / g.H, h = ch - c * g.H;
  const int i0 = blockIdx.y * BQ;
  const int i_last = (i0 + BQ < g.L ? i0 + BQ : g.L) - 1;
  const int64_t qstride = (int64_t)g.B * HD, kstride = (int64_t)g.B * 2 * HD;
  const T *qb = q + (int64_t)c * HD + h * dh;
  const T *kb = kv + (int64_t)c * 2 * HD + h * dh, *vbase = kb + HD;
  const T *rb = r + h * dh;

  load_rows(sQU, ld, qb, qstride, i0, g.L, BQ, dh, u + h * dh);
  load_rows(sQV, ld, qb, qstride, i0, g.L, BQ, dh, vb + h * dh);

  float m_run[RA], l_run[RA], O[RA][EM];
#pragma unroll
  for (int alpha = 0; alpha < RA; alpha++) {
    m_run[alpha] = -INFINITY;
    l_run[alpha] = 0.0f; /* this thread's part of the row sum (its CB columns per tile) */
#pragma unroll
    for (int m = 0; m < EM; m++) O[alpha][m] = 0.0f;
  }

  const int lo_t = visible_lo(g, i0), hi_t = g.M + i_last;
  for (int j0 = lo_t; j0 <= hi_t; j0 += BK) {
    __syncthreads(); /* the previous tile's readers are done */
    load_rows(sK, ld, kb, kstride, j0, g.K, BK, dh, nullptr);
    load_rows(sV, ld, vbase, kstride, j0, g.K, BK, dh, nullptr);
    load_rows(sR, ld, rb, HD, g.L - i0 - BQ + j0, g.K, NR, dh, nullptr);
    __syncthreads();

    float s[RA][CB];
    tile_scores<RA, CB, BQ, false>(s, nullptr, sQU, sQV, nullptr, sK, nullptr, sR, ld, dh,
                                   ty * RA, tx * CB);
#pragma unroll
    for (int alpha = 0; alpha < RA; alpha++) {
      const int a = ty * RA + alpha, i = i0 + a;
      const int lo = visible_lo(g, i), hi = g.M + i;
      float mt = -INFINITY;
#pragma unroll
      for (int beta = 0; beta < CB; beta++) {
        const int j = j0 + tx * CB + beta;
        const bool vis = i < g.L && j >= lo && j <= hi;
        s[alpha][beta] = vis ? s[alpha][beta] * g.scale : -INFINITY;
        mt = fmaxf(mt, s[alpha][beta]);
      }
      mt = half_warp_max(mt);
      const float m_new = fmaxf(m_run[alpha], mt);
      /* both -inf (nothing visible yet): keep the zero accumulators as they are */
      const float resc = m_run[alpha] == m_new ? 1.0f : expf(m_run[alpha] - m_new);
      float km[CB];
      if (g.dropout) dropatt_factors<CB>(km, g, i, c, h, j0 + tx * CB);
      float psum = 0.0f;
#pragma unroll
      for (int beta = 0; beta < CB; beta++) {
        const float p = s[alpha][beta] == -INFINITY ? 0.0f : expf(s[alpha][beta] - m_new);
        psum += p;
        sP[a * LP + tx * CB + beta] = g.dropout ? p * km[beta] : p;
      }
      l_run[alpha] = l_run[alpha] * resc + psum;
      m_run[alpha] = m_new;
#pragma unroll
      for (int m = 0; m < EM; m++) O[alpha][m] *= resc;
    }
    __syncwarp(); /* sP rows of this half-warp are read only by it */

    for (int b = 0; b < BK; b++) {
      float vv[EM];
#pragma unroll
      for (int m = 0; m < EM; m++) {
        const int e = tx + 16 * m;
        vv[m] = e < dh ? sV[b * ld + e] : 0.0f;
      }
#pragma unroll
      for (int alpha = 0; alpha < RA; alpha++) {
        const float pa = sP[(ty * RA + alpha) * LP + b];
#pragma unroll
        for (int m = 0; m < EM; m++) O[alpha][m] += pa * vv[m];
      }
    }
  }

#pragma unroll
  for (int alpha = 0; alpha < RA; alpha++) {
    const float l = half_warp_sum(l_run[alpha]);
    const int i = i0 + ty * RA + alpha;
    if (i < g.L) {
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      T *out = vec + ((int64_t)i * g.B + c) * HD + h * dh;
#pragma unroll
      for (int m = 0; m < EM; m++) {
        const int e = tx + 16 * m;
        if (e < dh) txl_st(out + e, O[alpha][m] * inv);
      }
      if (tx == 0) lse[(int64_t)ch * g.L + i] = l > 0.0f ? m_run[alpha] + logf(l) : -INFINITY;
    }
  }
}

/* ---- backward ---------------------------------------------------------------------------- */

/* D[c, h, i] = dvec[i, c, h, :] . vec[i, c, h, :]: one warp per row.   D [B, H, L] */
template <typename T>
static __global__ void rel_attn_delta_kernel(float *D, const T *dvec, const T *vec, AttnGeo g) {
  const int lane = threadIdx.x & 31;
  const int64_t rows = (int64_t)g.B * g.H * g.L;
  const int64_t nwarps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < rows; w += nwarps) {
    const int64_t ch = w / g.L, i = w - ch * g.L; /* ch = c * H + h */
    const int64_t off = (i * g.B * g.H + ch) * g.dh;
    float acc = 0.0f;
    for (int e = lane; e < g.dh; e += 32) acc += txl_ld(dvec + off + e) * txl_ld(vec + off + e);
    acc = txl_warp_sum(acc);
    if (lane == 0) D[w] = acc;
  }
}

/* Recomputes one score tile and turns it into P~ (when sP) and dS, written to shared:
 *   sP[a][b] = P~_ab, sS[a][b] = dS_ab = P_ab (dP_ab - D_a) scale (0 where masked). */
template <int BQ, int BK>
static __device__ __forceinline__ void tile_dscores(float *sP, float *sS, const float *sQU,
                                                    const float *sQV, const float *sDO,
                                                    const float *sK, const float *sV,
                                                    const float *sR, const float *sL,
                                                    const float *sD, const AttnGeo &g, int c,
                                                    int h, int i0, int j0) {
  constexpr int RA = BQ / 16, CB = BK / 16, LP = BK + 1;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float s[RA][CB], dp[RA][CB];
  tile_scores<RA, CB, BQ, true>(s, dp, sQU, sQV, sDO, sK, sV, sR, g.ld, g.dh, ty * RA, tx * CB);
#pragma unroll
  for (int alpha = 0; alpha < RA; alpha++) {
    const int a = ty * RA + alpha, i = i0 + a;
    const int lo = visible_lo(g, i), hi = g.M + i;
    const float lse_i = sL[a], D_i = sD[a];
    float km[CB];
    if (g.dropout) dropatt_factors<CB>(km, g, i, c, h, j0 + tx * CB);
#pragma unroll
    for (int beta = 0; beta < CB; beta++) {
      const int b = tx * CB + beta, j = j0 + b;
      const bool vis = i < g.L && j >= lo && j <= hi;
      const float P = vis ? expf(s[alpha][beta] * g.scale - lse_i) : 0.0f;
      const float f = g.dropout ? km[beta] : 1.0f;
      const float dS = vis ? P * (dp[alpha][beta] * f - D_i) * g.scale : 0.0f;
      if (sP) sP[a * LP + b] = P * f;
      sS[a * LP + b] = dS;
    }
  }
}

/* Loads the query side of a tile: q+u, q+vb, dvec rows i0.. and their lse and D. */
template <typename T, int BQ>
static __device__ __forceinline__ void load_query_side(float *sQU, float *sQV, float *sDO,
                                                       float *sL, float *sD, const T *q,
                                                       const T *dvec, const float *u,
                                                       const float *vb, const float *lse,
                                                       const float *Dv, const AttnGeo &g, int c,
                                                       int h, int i0) {
  const int HD = g.H * g.dh;
  const int64_t qstride = (int64_t)g.B * HD, off = (int64_t)c * HD + h * g.dh;
  load_rows(sQU, g.ld, q + off, qstride, i0, g.L, BQ, g.dh, u + h * g.dh);
  load_rows(sQV, g.ld, q + off, qstride, i0, g.L, BQ, g.dh, vb + h * g.dh);
  load_rows(sDO, g.ld, dvec + off, qstride, i0, g.L, BQ, g.dh, nullptr);
  const int64_t row0 = ((int64_t)c * g.H + h) * g.L;
  for (int a = threadIdx.x; a < BQ; a += blockDim.x) {
    const int i = i0 + a;
    sL[a] = i < g.L ? lse[row0 + i] : 0.0f;
    sD[a] = i < g.L ? Dv[row0 + i] : 0.0f;
  }
}

/* dk, dv of one key tile: grid (B*H, key tiles); block 256.   dkv [K, B, 2, H, dh]
 * shared: sK, sV [BK][ld]; sQU, sQV, sDO [BQ][ld]; sR [BQ+BK-1][ld]; sP, sS [BQ][BK+1];
 *         sL, sD [BQ] */
template <typename T, int BQ, int BK, int DHP>
static __global__ void rel_attn_dkv_kernel(T *dkv, const T *dvec, const T *q, const T *kv,
                                           const T *r, const float *u, const float *vb,
                                           const float *lse, const float *Dv, AttnGeo g) {
  constexpr int RB = BK / 16, EM = DHP / 16, NR = BQ + BK - 1, LP = BK + 1;
  TXL_DYNAMIC_SHARED(float, sm);
  const int ld = g.ld, dh = g.dh, HD = g.H * g.dh;
  float *sK = sm, *sV = sK + BK * ld, *sQU = sV + BK * ld, *sQV = sQU + BQ * ld;
  float *sDO = sQV + BQ * ld, *sR = sDO + BQ * ld, *sP = sR + NR * ld, *sS = sP + BQ * LP;
  float *sL = sS + BQ * LP, *sD = sL + BQ;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int ch = blockIdx.x, c = ch / g.H, h = ch - c * g.H;
  const int j0 = blockIdx.y * BK;
  const int j_last = (j0 + BK < g.K ? j0 + BK : g.K) - 1;
  const int64_t kstride = (int64_t)g.B * 2 * HD;
  const T *kb = kv + (int64_t)c * 2 * HD + h * dh;
  load_rows(sK, ld, kb, kstride, j0, g.K, BK, dh, nullptr);
  load_rows(sV, ld, kb + HD, kstride, j0, g.K, BK, dh, nullptr);

  float dK[RB][EM], dV[RB][EM];
#pragma unroll
  for (int beta = 0; beta < RB; beta++)
#pragma unroll
    for (int m = 0; m < EM; m++) dK[beta][m] = dV[beta][m] = 0.0f;

  /* queries that see a key of [j0, j_last]: M + i >= j0 and (same_length) i - shift + 1 <= j_last */
  const int i_begin = j0 - g.M > 0 ? j0 - g.M : 0;
  int i_end = g.L - 1;
  if (g.same_length && j_last + g.same_shift - 1 < i_end) i_end = j_last + g.same_shift - 1;
  for (int i0 = i_begin; i0 <= i_end; i0 += BQ) {
    __syncthreads(); /* the previous query tile's readers are done */
    load_query_side<T, BQ>(sQU, sQV, sDO, sL, sD, q, dvec, u, vb, lse, Dv, g, c, h, i0);
    load_rows(sR, ld, r + h * dh, HD, g.L - i0 - BQ + j0, g.K, NR, dh, nullptr);
    __syncthreads();
    tile_dscores<BQ, BK>(sP, sS, sQU, sQV, sDO, sK, sV, sR, sL, sD, g, c, h, i0, j0);
    __syncthreads();
    /* dv_b += sum_a P~_ab dvec_a;  dk_b += sum_a dS_ab (q_a + u), for b = ty*RB + beta */
    const int a_end = g.L - i0 < BQ ? g.L - i0 : BQ; /* rows past L are all zero */
    for (int a = 0; a < a_end; a++) {
      float dov[EM], quv[EM];
#pragma unroll
      for (int m = 0; m < EM; m++) {
        const int e = tx + 16 * m;
        dov[m] = e < dh ? sDO[a * ld + e] : 0.0f;
        quv[m] = e < dh ? sQU[a * ld + e] : 0.0f;
      }
#pragma unroll
      for (int beta = 0; beta < RB; beta++) {
        const float pd = sP[a * LP + ty * RB + beta], ds = sS[a * LP + ty * RB + beta];
#pragma unroll
        for (int m = 0; m < EM; m++) {
          dV[beta][m] += pd * dov[m];
          dK[beta][m] += ds * quv[m];
        }
      }
    }
  }

#pragma unroll
  for (int beta = 0; beta < RB; beta++) {
    const int j = j0 + ty * RB + beta;
    if (j < g.K) {
      T *dk = dkv + ((int64_t)j * g.B + c) * 2 * HD + h * dh, *dv = dk + HD;
#pragma unroll
      for (int m = 0; m < EM; m++) {
        const int e = tx + 16 * m;
        if (e < dh) {
          txl_st(dk + e, dK[beta][m]);
          txl_st(dv + e, dV[beta][m]);
        }
      }
    }
  }
}

/* dq of one query tile for the columns of group gi, and the partials of dr, du, dvb:
 * grid (H * G, query tiles); block 256.
 *   dq [L, B, H, dh]
 *   part_dr  [H, nqt, G, K + BQ - 1, dh]: local position pl = p - (L - i0 - BQ)
 *   part_du, part_dvb [B, H, nqt, dh]
 * shared: sQU, sQV, sDO [BQ][ld]; sK, sV [BK][ld]; sR [BQ+BK-1][ld]; sS [BQ][BK+1];
 *         sL, sD [BQ]; sRed [2][16][DHP] */
template <typename T, int BQ, int BK, int DHP>
static __global__ void rel_attn_dq_kernel(T *dq, float *part_dr, float *part_du, float *part_dvb,
                                          const T *dvec, const T *q, const T *kv, const T *r,
                                          const float *u, const float *vb, const float *lse,
                                          const float *Dv, AttnGeo g, int G, int nqt) {
  constexpr int RA = BQ / 16, EM = DHP / 16, NR = BQ + BK - 1, LP = BK + 1;
  TXL_DYNAMIC_SHARED(float, sm);
  const int ld = g.ld, dh = g.dh, HD = g.H * g.dh;
  float *sQU = sm, *sQV = sQU + BQ * ld, *sDO = sQV + BQ * ld, *sK = sDO + BQ * ld;
  float *sV = sK + BK * ld, *sR = sV + BK * ld, *sS = sR + NR * ld, *sL = sS + BQ * LP;
  float *sD = sL + BQ, *sRed = sD + BQ;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int h = blockIdx.x / G, gi = blockIdx.x - h * G;
  const int qt = blockIdx.y, i0 = qt * BQ;
  const int i_last = (i0 + BQ < g.L ? i0 + BQ : g.L) - 1;
  const int lo_t = visible_lo(g, i0), hi_t = g.M + i_last;
  const int64_t band = (int64_t)g.K + BQ - 1, kstride = (int64_t)g.B * 2 * HD;

  float *pr = part_dr + (((int64_t)h * nqt + qt) * G + gi) * band * dh;
  for (int64_t idx = threadIdx.x; idx < band * dh; idx += blockDim.x) pr[idx] = 0.0f;

  for (int c = gi; c < g.B; c += G) {
    __syncthreads(); /* the previous column's readers (and the zeroing above) are done */
    load_query_side<T, BQ>(sQU, sQV, sDO, sL, sD, q, dvec, u, vb, lse, Dv, g, c, h, i0);
    const T *kb = kv + (int64_t)c * 2 * HD + h * dh;
    float dqk[RA][EM], dqr[RA][EM];
#pragma unroll
    for (int alpha = 0; alpha < RA; alpha++)
#pragma unroll
      for (int m = 0; m < EM; m++) dqk[alpha][m] = dqr[alpha][m] = 0.0f;

    for (int j0 = lo_t; j0 <= hi_t; j0 += BK) {
      __syncthreads(); /* the previous key tile's readers are done */
      load_rows(sK, ld, kb, kstride, j0, g.K, BK, dh, nullptr);
      load_rows(sV, ld, kb + HD, kstride, j0, g.K, BK, dh, nullptr);
      load_rows(sR, ld, r + h * dh, HD, g.L - i0 - BQ + j0, g.K, NR, dh, nullptr);
      __syncthreads();
      tile_dscores<BQ, BK>(nullptr, sS, sQU, sQV, sDO, sK, sV, sR, sL, sD, g, c, h, i0, j0);
      __syncthreads();
      /* dq_a += sum_b dS_ab k_b (dqk) + sum_b dS_ab r_t (dqr), a = ty*RA + alpha */
      for (int b = 0; b < BK; b++) {
        float kk[EM];
#pragma unroll
        for (int m = 0; m < EM; m++) {
          const int e = tx + 16 * m;
          kk[m] = e < dh ? sK[b * ld + e] : 0.0f;
        }
#pragma unroll
        for (int alpha = 0; alpha < RA; alpha++) {
          const int a = ty * RA + alpha;
          const float ds = sS[a * LP + b];
          const float *rt = sR + (b - a + BQ - 1) * ld;
#pragma unroll
          for (int m = 0; m < EM; m++) {
            const int e = tx + 16 * m;
            dqk[alpha][m] += ds * kk[m];
            dqr[alpha][m] += ds * (e < dh ? rt[e] : 0.0f);
          }
        }
      }
      /* dr band: position p = p0 + t gets sum_a dS[a][t - (BQ-1) + a] (q_a + vb) */
      const int p0 = g.L - i0 - BQ + j0;
      for (int idx = threadIdx.x; idx < NR * dh; idx += blockDim.x) {
        const int t = idx / dh, e = idx - t * dh, p = p0 + t;
        if (p < 0 || p >= g.K) continue;
        const int a_lo = BQ - 1 - t > 0 ? BQ - 1 - t : 0;
        const int a_hi = NR - 1 - t < BQ - 1 ? NR - 1 - t : BQ - 1;
        float acc = 0.0f;
        for (int a = a_lo; a <= a_hi; a++) acc += sS[a * LP + t - (BQ - 1) + a] * sQV[a * ld + e];
        pr[(int64_t)(j0 + t) * dh + e] += acc; /* pl = p - (L - i0 - BQ) = j0 + t */
      }
    }

    /* dq, and this block's du / dvb parts: sums over its rows, first per thread (alpha in
     * order), then over ty in order */
#pragma unroll
    for (int alpha = 0; alpha < RA; alpha++) {
      const int i = i0 + ty * RA + alpha;
      if (i < g.L) {
        T *out = dq + ((int64_t)i * g.B + c) * HD + h * dh;
#pragma unroll
        for (int m = 0; m < EM; m++) {
          const int e = tx + 16 * m;
          if (e < dh) txl_st(out + e, dqk[alpha][m] + dqr[alpha][m]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < EM; m++) {
      float su = 0.0f, sv = 0.0f;
#pragma unroll
      for (int alpha = 0; alpha < RA; alpha++) { /* rows past L hold zeros */
        su += dqk[alpha][m];
        sv += dqr[alpha][m];
      }
      sRed[ty * DHP + tx + 16 * m] = su;
      sRed[16 * DHP + ty * DHP + tx + 16 * m] = sv;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < dh; e += blockDim.x) {
      float su = 0.0f, sv = 0.0f;
      for (int y = 0; y < 16; y++) {
        su += sRed[y * DHP + e];
        sv += sRed[16 * DHP + y * DHP + e];
      }
      const int64_t o = (((int64_t)c * g.H + h) * nqt + qt) * dh + e;
      part_du[o] = su;
      part_dvb[o] = sv;
    }
  }
}

/* dr[p, h, e] = sum over query tiles qt, then groups gi, of the partials (0 where none).
 * dr [K, H, dh] */
template <typename T>
static __global__ void rel_attn_dr_reduce_kernel(T *dr, const float *part_dr, AttnGeo g, int G,
                                                 int nqt, int BQ) {
  const int HD = g.H * g.dh;
  const int64_t total = (int64_t)g.K * HD, band = (int64_t)g.K + BQ - 1;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int p = (int)(idx / HD), rem = (int)(idx - (int64_t)p * HD);
    const int h = rem / g.dh, e = rem - h * g.dh;
    float sum = 0.0f;
    for (int qt = 0; qt < nqt; qt++) {
      const int64_t pl = (int64_t)p - (g.L - qt * BQ - BQ);
      if (pl < 0 || pl >= band) continue;
      for (int gi = 0; gi < G; gi++)
        sum += part_dr[((((int64_t)h * nqt + qt) * G + gi) * band + pl) * g.dh + e];
    }
    txl_st(dr + idx, sum);
  }
}

/* du[h, e] += sum over c, then query tiles, of part_du; the same for dvb.   du, dvb [H, dh] */
static __global__ void rel_attn_dudvb_reduce_kernel(float *du, float *dvb, const float *part_du,
                                                    const float *part_dvb, AttnGeo g, int nqt) {
  const int HD = g.H * g.dh;
  for (int idx = blockIdx.x * blockDim.x + threadIdx.x; idx < HD; idx += gridDim.x * blockDim.x) {
    const int h = idx / g.dh, e = idx - h * g.dh;
    float su = 0.0f, sv = 0.0f;
    for (int c = 0; c < g.B; c++)
      for (int qt = 0; qt < nqt; qt++) {
        const int64_t o = (((int64_t)c * g.H + h) * nqt + qt) * g.dh + e;
        su += part_du[o];
        sv += part_dvb[o];
      }
    du[idx] += su;
    dvb[idx] += sv;
  }
}

/* ---- host -------------------------------------------------------------------------------- */

/* dh rounded up to the register width of a template instance: 16, 32, 64 or 128. */
static int head_pad(int dh) {
  if (dh < 1 || dh > 128) txl_fatal("rel_attn (CUDA): head size %d is not in [1, 128]", dh);
  return dh <= 16 ? 16 : dh <= 32 ? 32 : dh <= 64 ? 64 : 128;
}

static AttnGeo make_geo(const TxlAttnShape &s, const TxlDropout &drop) {
  AttnGeo g;
  g.L = s.L;
  g.M = s.M;
  g.K = s.M + s.L;
  g.B = s.B;
  g.H = s.H;
  g.dh = s.dh;
  g.ld = s.dh % 2 ? s.dh : s.dh + 1;
  g.col0 = s.col0;
  g.same_length = s.same_length;
  g.same_shift = s.same_shift;
  g.scale = s.scale;
  g.dropout = drop.p > 0.0f;
  g.threshold = txl_dropout_threshold(drop.p);
  g.dscale = txl_dropout_scale(drop.p);
  g.drop = drop;
  return g;
}

/* Raises the kernel's dynamic shared-memory limit when it needs more than the default 48 KiB. */
template <typename Kernel>
static void shared_limit(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

static int cdiv(int a, int b) { return (a + b - 1) / b; }
static size_t round64(size_t n) { return (n + 63) / 64 * 64; }

/* Column groups of the dq kernel: enough blocks to fill the GPU, at most ATTN_MAX_GROUPS. */
static int column_groups(int nqt, int B, int H) {
  int G = cdiv(ATTN_BLOCK_GOAL, nqt * H);
  if (G > ATTN_MAX_GROUPS) G = ATTN_MAX_GROUPS;
  if (G > B) G = B;
  return G < 1 ? 1 : G;
}

template <typename T, int BQ, int BK, int DHP>
static void forward_launch(T *vec, float *lse, const T *q, const T *kv, const T *r, const float *u,
                           const float *vb, const AttnGeo &g) {
  const size_t bytes =
      ((size_t)(2 * BQ + 2 * BK + BQ + BK - 1) * g.ld + (size_t)BQ * (BK + 1)) * sizeof(float);
  auto forward_kernel = rel_attn_forward_kernel<T, BQ, BK, DHP>;
  shared_limit(forward_kernel, bytes);
  const dim3 grid((unsigned int)(g.B * g.H), (unsigned int)cdiv(g.L, BQ));
  TXL_LAUNCH(forward_kernel, grid, ATTN_THREADS, bytes)(vec, lse, q, kv, r, u, vb, g);
  CUDA_LAUNCH_CHECK();
}

template <typename T, int BQ, int BK, int DHP>
static void backward_launch(T *dq, T *dkv, T *dr, float *du, float *dvb, const T *dvec,
                            const T *vec, const T *q, const T *kv, const T *r, const float *u,
                            const float *vb, const float *lse, const AttnGeo &g, float *ws) {
  const int nqt = cdiv(g.L, BQ), nkt = cdiv(g.K, BK);
  const int G = column_groups(nqt, g.B, g.H);
  float *Dv = ws;
  float *part_du = Dv + round64((size_t)g.B * g.H * g.L);
  float *part_dvb = part_du + round64((size_t)g.B * g.H * nqt * g.dh);
  float *part_dr = part_dvb + round64((size_t)g.B * g.H * nqt * g.dh);

  const int64_t rows = (int64_t)g.B * g.H * g.L;
  auto delta_kernel = rel_attn_delta_kernel<T>;
  TXL_LAUNCH(delta_kernel, txl_cuda_blocks(rows * 32, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      Dv, dvec, vec, g);
  CUDA_LAUNCH_CHECK();

  const size_t kv_bytes = ((size_t)(2 * BK + 3 * BQ + BQ + BK - 1) * g.ld +
                           (size_t)2 * BQ * (BK + 1) + 2 * BQ) * sizeof(float);
  auto dkv_kernel = rel_attn_dkv_kernel<T, BQ, BK, DHP>;
  shared_limit(dkv_kernel, kv_bytes);
  TXL_LAUNCH(dkv_kernel, dim3((unsigned int)(g.B * g.H), (unsigned int)nkt), ATTN_THREADS, kv_bytes)(
      dkv, dvec, q, kv, r, u, vb, lse, Dv, g);
  CUDA_LAUNCH_CHECK();

  const size_t q_bytes = ((size_t)(3 * BQ + 2 * BK + BQ + BK - 1) * g.ld +
                          (size_t)BQ * (BK + 1) + 2 * BQ + 2 * 16 * DHP) * sizeof(float);
  auto dq_kernel = rel_attn_dq_kernel<T, BQ, BK, DHP>;
  shared_limit(dq_kernel, q_bytes);
  TXL_LAUNCH(dq_kernel, dim3((unsigned int)(g.H * G), (unsigned int)nqt), ATTN_THREADS, q_bytes)(
      dq, part_dr, part_du, part_dvb, dvec, q, kv, r, u, vb, lse, Dv, g, G, nqt);
  CUDA_LAUNCH_CHECK();

  auto dr_reduce_kernel = rel_attn_dr_reduce_kernel<T>;
  TXL_LAUNCH(dr_reduce_kernel, txl_cuda_blocks((int64_t)g.K * g.H * g.dh, TXL_CUDA_THREADS),
             TXL_CUDA_THREADS, 0)(dr, part_dr, g, G, nqt, BQ);
  CUDA_LAUNCH_CHECK();
  TXL_LAUNCH(rel_attn_dudvb_reduce_kernel, txl_cuda_blocks((int64_t)g.H * g.dh, TXL_CUDA_THREADS),
             TXL_CUDA_THREADS, 0)(du, dvb, part_du, part_dvb, g, nqt);
  CUDA_LAUNCH_CHECK();
}

extern "C" size_t txl_cuda_rel_attn_saved_floats(int L, int K, int B, int H) {
  (void)K;
  return (size_t)B * H * L;
}

/* D [B, H, L]; the du and dvb parts [B, H, nqt, dh] each; the dr partials
 * [H, nqt, G, K + BQ - 1, dh], bounded with K + 63 positions and H nqt G <= min(B H nqt,
 * ATTN_BLOCK_GOAL + H nqt, ATTN_MAX_GROUPS H nqt). nqt is counted with the tile of dh (64 rows
 * up to dh = 64, then 32: more tiles), so the size only grows with each argument and covers
 * every smaller shape. The forward needs none of it. */
extern "C" size_t txl_cuda_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward) {
  if (!backward || L <= 0 || K <= 0 || B <= 0 || H <= 0 || dh <= 0) return 0;
  const size_t nq = (size_t)cdiv(L, head_pad(dh) <= 64 ? 64 : 32);
  size_t blocks = (size_t)B * H * nq;
  if (blocks > ATTN_BLOCK_GOAL + (size_t)H * nq) blocks = ATTN_BLOCK_GOAL + (size_t)H * nq;
  if (blocks > (size_t)ATTN_MAX_GROUPS * H * nq) blocks = (size_t)ATTN_MAX_GROUPS * H * nq;
  const size_t floats = round64((size_t)B * H * L) + 2 * round64((size_t)B * H * nq * dh) +
                        round64(blocks * ((size_t)K + 63) * dh);
  return floats * sizeof(float);
}

/* The forward and backward on activations of type T (the entry points below name T). */
template <typename T>
static void rel_attn_forward(T *vec, float *saved, const T *q, const T *kv, const T *r,
                             const float *u, const float *vb, const TxlAttnShape &s,
                             const TxlDropout &drop) {
  if (s.L <= 0 || s.B <= 0 || s.H <= 0) return;
  const AttnGeo g = make_geo(s, drop);
  switch (head_pad(s.dh)) {
    case 16: forward_launch<T, 64, 64, 16>(vec, saved, q, kv, r, u, vb, g); break;
    case 32: forward_launch<T, 64, 64, 32>(vec, saved, q, kv, r, u, vb, g); break;
    case 64: forward_launch<T, 64, 64, 64>(vec, saved, q, kv, r, u, vb, g); break;
    default: forward_launch<T, 32, 32, 128>(vec, saved, q, kv, r, u, vb, g); break;
  }
}

template <typename T>
static void rel_attn_backward(T *dq, T *dkv, T *dr, float *du, float *dvb, const T *dvec,
                              const T *vec, const T *q, const T *kv, const T *r, const float *u,
                              const float *vb, const float *saved, const TxlAttnShape &s,
                              const TxlDropout &drop, void *work) {
  const int K = s.M + s.L, HD = s.H * s.dh;
  if (s.L <= 0 || s.B <= 0 || s.H <= 0) { /* no query: zero gradients of the inputs */
    if (K > 0 && s.H > 0) txl_cuda_zero(dr, (size_t)K * HD * sizeof(T));
    if (K > 0 && s.B > 0 && s.H > 0) txl_cuda_zero(dkv, (size_t)K * s.B * 2 * HD * sizeof(T));
    return;
  }
  const AttnGeo g = make_geo(s, drop);
  float *ws = (float *)work;
  switch (head_pad(s.dh)) {
    case 16: backward_launch<T, 64, 64, 16>(dq, dkv, dr, du, dvb, dvec, vec, q, kv, r, u, vb, saved, g, ws); break;
    case 32: backward_launch<T, 64, 64, 32>(dq, dkv, dr, du, dvb, dvec, vec, q, kv, r, u, vb, saved, g, ws); break;
    case 64: backward_launch<T, 64, 64, 64>(dq, dkv, dr, du, dvb, dvec, vec, q, kv, r, u, vb, saved, g, ws); break;
    default: backward_launch<T, 32, 32, 128>(dq, dkv, dr, du, dvb, dvec, vec, q, kv, r, u, vb, saved, g, ws); break;
  }
}

extern "C" void txl_cuda_rel_attn_forward(void *vec, float *saved, const void *q, const void *kv,
                                          const void *r, const float *u, const float *vb,
                                          TxlAttnShape s, TxlDropout drop, void *work) {
  (void)work;
  rel_attn_forward((float *)vec, saved, (const float *)q, (const float *)kv, (const float *)r, u,
                   vb, s, drop);
}

extern "C" void txl_cuda_rel_attn_forward_bf16(void *vec, float *saved, const void *q,
                                               const void *kv, const void *r, const float *u,
                                               const float *vb, TxlAttnShape s, TxlDropout drop,
                                               void *work) {
  (void)work;
  rel_attn_forward((txl_bf16 *)vec, saved, (const txl_bf16 *)q, (const txl_bf16 *)kv,
                   (const txl_bf16 *)r, u, vb, s, drop);
}

extern "C" void txl_cuda_rel_attn_backward(void *dq, void *dkv, void *dr, float *du, float *dvb,
                                           const void *dvec, const void *vec, const void *q,
                                           const void *kv, const void *r, const float *u,
                                           const float *vb, const float *saved, TxlAttnShape s,
                                           TxlDropout drop, void *work) {
  rel_attn_backward((float *)dq, (float *)dkv, (float *)dr, du, dvb, (const float *)dvec,
                    (const float *)vec, (const float *)q, (const float *)kv, (const float *)r, u,
                    vb, saved, s, drop, work);
}

extern "C" void txl_cuda_rel_attn_backward_bf16(void *dq, void *dkv, void *dr, float *du,
                                                float *dvb, const void *dvec, const void *vec,
                                                const void *q, const void *kv, const void *r,
                                                const float *u, const float *vb,
                                                const float *saved, TxlAttnShape s,
                                                TxlDropout drop, void *work) {
  rel_attn_backward((txl_bf16 *)dq, (txl_bf16 *)dkv, (txl_bf16 *)dr, du, dvb,
                    (const txl_bf16 *)dvec, (const txl_bf16 *)vec, (const txl_bf16 *)q,
                    (const txl_bf16 *)kv, (const txl_bf16 *)r, u, vb, saved, s, drop, work);
}
