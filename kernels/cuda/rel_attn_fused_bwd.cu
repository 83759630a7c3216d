/* The fused backward of Transformer-XL's relative attention for the bf16 and fp16 tables (the
 * math of rel_attn.cu's file comment; the forward is rel_attn_fused.cu): no score matrix in memory,
 * every product on tensor cores (mma.sync m16n8k16), no atomics. From the forward's log-sum-exp
 * (saved [B, H, L]) and its output vec, with FlashAttention-2's D_i = dvec_i . vec_i (which equals
 * sum_j P~_ij dP~_ij: vec_i = sum_j P~_ij v_j), every kernel recomputes the scores of its tiles and
 *   P_ij = exp(s_ij - lse_i),  dP~_ij = dvec_i v_j,  dS_ij = P_ij (f_ij dP~_ij - D_i)
 * (f the dropatt factor: the GEMM route's and the CPU's formulas, element by element). Each
 * gradient is summed where one block owns it, so no two blocks add into one element:
 *   1. dot_kernel      D [B, H, L] (fp32), a warp per row.
 *   2. dq_kernel       block per (64-query tile, h, c), keys in tiles of 32 (the forward's
 *                      walk): dq_i = scale (sum_j dS_ij k_j + sum_p dBD_ip r_p), dBD the dS of the
 *                      (query tile, key tile) pair put on its band of 48 positions in per-warp
 *                      shared memory (the relative shift backwards); the column sums over the
 *                      block's rows of the two halves into part_u, part_v [B tiles_q][H dh].
 *   3. dkv_kernel      block per (64-key tile, h, c), 4 warps of 16 keys, query rows in tiles of
 *                      32: S^T, BD^T (from Rband Qv^T: the warp's 48 positions of the pair, read
 *                      back shifted), dP~^T = V dvec^T; dv_j = sum_i P~_ij dvec_i,
 *                      dk_j = scale sum_i dS_ij (q_i + u), accumulated in registers.
 *   4. dr_kernel       (with r) block per (64-position tile, h, group of columns c = grp,
 *                      grp + G, ...), rows in tiles of 64: the keys of (row i, position p) are
 *                      j = p - (L-1-i), a band of 80 keys per warp, so AC and dP~ go through the
 *                      band (per-warp shared memory, read back shifted) and BD is direct;
 *                      dS^T of the tile's 64 rows in shared memory (16-bit: the operand), then
 *                      dr_p += sum_i dBD_ip (q_i + vb) with each warp owning 16 positions, and
 *                      drb_p += sum_i dBD_ip (one thread per position, rows in order). Per group
 *                      the sums go to part_r [G][K][H dh], part_rb [G][K][H].
 *   5. the partial sums reduced in order: dr (rounded once to T), drb, du +=, dvb +=.
 * The groups G and the tiles depend on the shape alone, so a call gives the same bits on every run
 * and device of an architecture. Roundings (what tests/cuda/test_rel_attn.c bounds, as for the
 * GEMM route): q + u, q + vb, P~, dS, dBD rounded to T once as operands; the products and every
 * sum fp32; each output rounded once. D comes from the stored vec (rounded to T once more than the
 * GEMM route's fp32 P~ dP~ sum: within the bounds' chain of four operand roundings, as dvec and v
 * are inputs, exact). Head sizes up to 64 (padded to 32 or 64); larger heads take the GEMM route. */
#include <math.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/mma_tile.h"
#include "kernels/cuda/rel_attn_fused.h"
#include "kernels/cuda/rel_attn_tile.h"

namespace {

/* The blocks: 4 warps (a #define: tests/cuda/test_resources.sh reads the launch's block size). */
#define TXL_ATTN_BWD_THREADS 128
constexpr int NW = TXL_ATTN_BWD_THREADS / 32, DT_MAX = 64;
/* dq_kernel: 64 query rows (16 a warp), key tiles of 32, the band of 16 + 32 positions */
constexpr int QB = 64, QK = 32, QW = 16 + QK, QWL = QW + 8;
/* dkv_kernel: 64 keys (16 a warp), query tiles of 32, the warp's band of 32 + 16 positions */
constexpr int KB = 64, KQ = 32, KW = KQ + 16, KWL = KQ + 1;
/* dr_kernel: 64 positions (16 a warp), query tiles of 64 (16 rows a warp), 16 + 64 keys a warp */
constexpr int RP = 64, RQ = 64, RW = 16 + RP, RPL = RP + 8;
static_assert(QB == 16 * NW && KB == 16 * NW && RP == 16 * NW && RQ == 16 * NW, "16 rows a warp");
/* dr_kernel's blocks: column groups until about this many blocks (from the shape only) */
constexpr int DR_BLOCKS = 256;

int tiles(int n, int t) { return (n + t - 1) / t; }
size_t round256(size_t n) { return (n + 255) / 256 * 256; }

size_t dq_shared(int dt) {
  const size_t ld = (size_t)dt + 8;
  return (size_t)(3 * QB + 2 * QK + QB + QK) * ld * 2 + (size_t)NW * 16 * QW * 4 + (size_t)NW * 16 * QWL * 2 +
         2 * QB * 4;
}
size_t dkv_shared(int dt) {
  const size_t ld = (size_t)dt + 8;
  return (size_t)(2 * KB + 3 * KQ + KQ + KB) * ld * 2 + (size_t)NW * KW * KWL * 4 + 2 * KQ * 4;
}
/* dr_kernel's operands of AC and dP (q + u, dvec, the k and v bands) and those two products' bands
 * (fp32) share one region: the products are stored there once every warp has read the operands */
TXL_HD inline size_t dr_overlay(int dt) {
  const size_t operands = (size_t)(2 * RQ + 2 * (RQ + RP)) * ((size_t)dt + 8) * 2, bands = (size_t)NW * 2 * 16 * RW * 4;
  return operands > bands ? operands : bands;
}
size_t dr_shared(int dt) {
  return (size_t)(RP + RQ) * ((size_t)dt + 8) * 2 + dr_overlay(dt) + (size_t)RQ * RPL * 2 + 2 * RQ * 4;
}

/* The column groups of dr_kernel. */
int dr_groups(const TxlAttnShape &s) {
  const int per = tiles(s.M + s.L, RP) * s.H, g = tiles(DR_BLOCKS, per);
  return g < 1 ? 1 : g > s.B ? s.B : g;
}

/* The workspace: byte offsets of D and the partial sums. */
struct BwdPlan {
  size_t d, pu, pv, pr, prb, bytes;
};

/* The partials of dr hold G K rows; the workspace is sized (model.c) for the largest K of a run and
 * used with smaller ones, so the plan takes a bound on G K that grows with K and B:
 * G <= DR_BLOCKS / (tiles H) + 1 and K <= tiles RP give G K <= DR_BLOCKS RP / H + tiles RP. */
size_t dr_rows_bound(const TxlAttnShape &s) {
  const size_t K = (size_t)(s.M + s.L), by_groups = (size_t)DR_BLOCKS * RP / (size_t)s.H + (size_t)tiles((int)K, RP) * RP;
  const size_t all = (size_t)s.B * K;
  return all < by_groups ? all : by_groups;
}

BwdPlan bwd_plan(const TxlAttnShape &s) {
  const size_t HD = (size_t)s.H * s.dh, GK = dr_rows_bound(s);
  const size_t parts = (size_t)s.B * tiles(s.L, QB);
  BwdPlan p;
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t here = at;
    at += round256(bytes);
    return here;
  };
  p.d = take((size_t)s.B * s.H * s.L * 4);
  p.pu = take(parts * HD * 4);
  p.pv = take(parts * HD * 4);
  p.pr = take(GK * HD * 4);
  p.prb = take(GK * s.H * 4);
  p.bytes = at;
  return p;
}

/* The row (c, h, i) of the [B, H, L] vectors lse and D. */
__device__ __forceinline__ int64_t row_of(const TxlAttnArgs &a, int c, int h, int i) {
  return ((int64_t)c * a.H + h) * a.L + i;
}

/* ---- 1. D = rowsum(dvec * vec) ------------------------------------------------------------------ */
template <typename T>
__global__ void dot_kernel(float *D, const T *dvec, const T *vec, TxlAttnArgs a) {
  const int64_t rows = (int64_t)a.B * a.H * a.L;
  const int lane = (int)threadIdx.x % 32;
  for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < rows;
       w += (int64_t)gridDim.x * blockDim.x / 32) {
    const int i = (int)(w % a.L), h = (int)(w / a.L % a.H), c = (int)(w / a.L / a.H);
    const int64_t at = (int64_t)i * a.B * a.ldq + (int64_t)c * a.ldq + (int64_t)h * a.dh;
    float sum = 0.0f;
    for (int e = lane; e < a.dh; e += 32) sum += txl_ld(dvec + at + e) * txl_ld(vec + at + e);
    sum = txl_warp_sum(sum);
    if (lane == 0) D[w] = sum;
  }
}

/* lse and D of rows row0 .. row0 + n - 1 of (c, h) into shared memory (rows past L: -inf, 0). */
__device__ void load_rows(float *slse, float *sD, const float *lse, const float *D, const TxlAttnArgs &a, int c,
                          int h, int row0, int n) {
  for (int t = (int)threadIdx.x; t < n; t += (int)blockDim.x) {
    const int i = row0 + t;
    slse[t] = i < a.L ? lse[row_of(a, c, h, i)] : -INFINITY;
    sD[t] = i < a.L ? D[row_of(a, c, h, i)] : 0.0f;
  }
}

/* The score of a visible (i, j): the products' accumulators ac (of (q + u) k) and bd (of
 * (q + vb) r_p), each scaled as the GEMM route scales them, + scale rb[p, h]. */
__device__ __forceinline__ float score(const TxlAttnArgs &a, float ac, const float *bd, const float *rb, int i, int j,
                                       int h) {
  float s = a.scale * ac;
  if (bd) s += a.scale * *bd;
  if (rb) s += a.scale * rb[(int64_t)(a.L - 1 - i + j) * a.H + h];
  return s;
}

/* Accumulator tiles acc[N / 8] of a warp's 16 x N product, stored as fp32 rows of dst (ld apart). */
template <int N>
__device__ __forceinline__ void store_acc(float *dst, int ld, const float (*acc)[4]) {
  const int lane = (int)threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  #pragma unroll
  for (int n = 0; n < N / 8; n++)
    #pragma unroll
    for (int x = 0; x < 4; x++) dst[(g + 8 * (x / 2)) * ld + 8 * n + 2 * t4 + x % 2] = acc[n][x];
}

/* ---- 2. dq and the column sums of its halves ------------------------------------------------ */
template <typename T, int DT>
__global__ void __launch_bounds__(TXL_ATTN_BWD_THREADS)
    dq_kernel(T *dq, float *part_u, float *part_v, const T *dvec, const T *q, const T *kv, const T *r, const float *u,
              const float *vb, const float *rb, const float *lse, const float *D, TxlAttnArgs a) {
  using MM = typename TxlMmaOf<T>::M;
  constexpr int LD = DT + 8, NT = DT / 8;
  TXL_DYNAMIC_SHARED(uint16_t, sm);
  uint16_t *squ = sm, *sqv = squ + QB * LD, *sdo = sqv + QB * LD, *sk = sdo + QB * LD, *sv = sk + QK * LD;
  uint16_t *sr = sv + QK * LD;
  float *sbd = reinterpret_cast<float *>(sr + (QB + QK) * LD);
  uint16_t *sdb = reinterpret_cast<uint16_t *>(sbd + NW * 16 * QW);
  float *slse = reinterpret_cast<float *>(sdb + NW * 16 * QWL), *sD = slse + QB;
  const int qt = (int)blockIdx.x, i0 = qt * QB, h = (int)blockIdx.y, c = (int)blockIdx.z;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int HD = a.H * a.dh;
  const int64_t qrow = (int64_t)a.B * a.ldq, kvrow = (int64_t)a.B * a.ldkv;
  const int64_t qoff = (int64_t)c * a.ldq + (int64_t)h * a.dh;
  txl_attn_load_tile<T, MM, DT>(squ, QB, q + qoff, qrow, i0, a.L, u ? u + h * a.dh : nullptr, a.dh);
  if (r) txl_attn_load_tile<T, MM, DT>(sqv, QB, q + qoff, qrow, i0, a.L, vb ? vb + h * a.dh : nullptr, a.dh);
  txl_attn_load_tile<T, MM, DT>(sdo, QB, dvec + qoff, qrow, i0, a.L, nullptr, a.dh);
  load_rows(slse, sD, lse, D, a, c, h, i0, QB);

  const int ilast = txl_attn_imin(i0 + QB, a.L) - 1;
  const int jlo = txl_attn_first_key(a, i0), jhi = a.M + ilast;
  const int wi0 = i0 + 16 * warp;
  const bool warp_rows = wi0 < a.L;
  const int wlast = txl_attn_imin(wi0 + 15, a.L - 1);
  const int wjlo = warp_rows ? txl_attn_first_key(a, wi0) : 0, wjhi = warp_rows ? a.M + wlast : -1;
  float dqu[NT][4], dqv[NT][4];
  #pragma unroll
  for (int n = 0; n < NT; n++)
    #pragma unroll
    for (int x = 0; x < 4; x++) dqu[n][x] = dqv[n][x] = 0.0f;
  const T *kh = kv + (int64_t)c * a.ldkv + (int64_t)h * a.dh, *vh = kh + HD;
  const T *rh = r ? r + (int64_t)h * a.dh : nullptr;
  float *bd = sbd + warp * 16 * QW;
  uint16_t *db = sdb + warp * 16 * QWL;
  for (int j0 = jlo / QK * QK; j0 <= jhi; j0 += QK) {
    __syncthreads(); /* the previous tile's reads are done */
    txl_attn_load_tile<T, MM, DT>(sk, QK, kh, kvrow, j0, a.K, nullptr, a.dh);
    txl_attn_load_tile<T, MM, DT>(sv, QK, vh, kvrow, j0, a.K, nullptr, a.dh);
    if (r) txl_attn_load_tile<T, MM, DT>(sr, QB + QK, rh, a.ldr, a.L - 1 - (i0 + QB - 1) + j0, a.K, nullptr, a.dh);
    __syncthreads();
    if (!warp_rows || j0 > wjhi || j0 + QK - 1 < wjlo) continue; /* warp-uniform */
    const uint16_t *band = sr + 16 * (NW - 1 - warp) * LD; /* p = L-1-(wi0+15)+j0 on */
    float s[QK / 8][4], dp[QK / 8][4];
    txl_tile_mma_abt<MM, QK, DT>(s, squ + 16 * warp * LD, LD, sk, LD);
    txl_tile_mma_abt<MM, QK, DT>(dp, sdo + 16 * warp * LD, LD, sv, LD);
    if (r) {
      float tb[QW / 8][4];
      txl_tile_mma_abt<MM, QW, DT>(tb, sqv + 16 * warp * LD, LD, band, LD);
      store_acc<QW>(bd, QW, tb);
      for (int t = lane; t < 16 * QWL; t += 32) db[t] = 0; /* the band's off-diagonal zeros */
      __syncwarp();
    }
    /* dS (accumulator (row g or g + 8, column 8 n + 2 t4 + x % 2)), in place of s */
    #pragma unroll
    for (int n = 0; n < QK / 8; n++)
      #pragma unroll
      for (int x = 0; x < 4; x++) {
        const int rr = g + 8 * (x / 2), cc = 8 * n + 2 * t4 + x % 2, i = wi0 + rr, j = j0 + cc;
        float ds = 0.0f;
        if (txl_attn_visible(a, i, j)) {
          const float p = expf(score(a, s[n][x], r ? &bd[rr * QW + 15 - rr + cc] : nullptr, rb, i, j, h) -
                               slse[16 * warp + rr]);
          const float f = a.dropout ? txl_attn_drop_factor(a, i, c, h, j) : 1.0f;
          ds = p * (f * dp[n][x] - sD[16 * warp + rr]);
        }
        s[n][x] = ds;
        if (r) db[rr * QWL + 15 - rr + cc] = (uint16_t)MM::bits(ds);
      }
    /* dqu += dS K (the accumulators as A, K's B by ldmatrix .trans) */
    #pragma unroll
    for (int kk = 0; kk < QK / 16; kk++) {
      uint32_t af[4];
      txl_tile_c_to_a<MM>(af, s[2 * kk], s[2 * kk + 1]);
      txl_tile_mma_kn<MM, DT>(dqu, af, sk + 16 * kk * LD, LD);
    }
    if (r) { /* dqv += dBD Rband */
      __syncwarp();
      #pragma unroll
      for (int kk = 0; kk < QW / 16; kk++) {
        uint32_t af[4];
        txl_tile_load_a(af, db + 16 * kk, QWL);
        txl_tile_mma_kn<MM, DT>(dqv, af, band + 16 * kk * LD, LD);
      }
    }
  }
  /* dq = scale (dqu + dqv), rounded once; the halves' sums over the warp's 16 rows (rows g and
   * g + 8 of a lane, then over g by shuffles in a fixed order), then over the warps in order */
  float *red = reinterpret_cast<float *>(sm); /* [2][NW][DT], over the q tiles (all reads done) */
  __syncthreads();
  #pragma unroll
  for (int n = 0; n < NT; n++)
    #pragma unroll
    for (int x = 0; x < 4; x++) {
      dqu[n][x] *= a.scale;
      dqv[n][x] *= a.scale;
    }
  if (warp_rows) {
    #pragma unroll
    for (int y = 0; y < 2; y++) {
      const int i = wi0 + g + 8 * y;
      if (i >= a.L) continue;
      T *out = dq + (int64_t)i * qrow + qoff;
      #pragma unroll
      for (int n = 0; n < NT; n++)
        #pragma unroll
        for (int x = 0; x < 2; x++) {
          const int e = 8 * n + 2 * t4 + x;
          if (e < a.dh) txl_st(out + e, dqu[n][2 * y + x] + dqv[n][2 * y + x]);
        }
    }
  }
  #pragma unroll
  for (int n = 0; n < NT; n++)
    #pragma unroll
    for (int x = 0; x < 2; x++) {
      float su = dqu[n][x] + dqu[n][x + 2], sv2 = dqv[n][x] + dqv[n][x + 2];
      #pragma unroll
      for (int o = 4; o < 32; o <<= 1) {
        su += __shfl_xor_sync(0xffffffffu, su, o);
        sv2 += __shfl_xor_sync(0xffffffffu, sv2, o);
      }
      if (g == 0) {
        red[warp * DT + 8 * n + 2 * t4 + x] = su;
        red[(NW + warp) * DT + 8 * n + 2 * t4 + x] = sv2;
      }
    }
  __syncthreads();
  for (int e = (int)threadIdx.x; e < a.dh; e += (int)blockDim.x) {
    float su = 0.0f, sv2 = 0.0f;
    for (int w = 0; w < NW; w++) {
      su += red[w * DT + e];
      sv2 += red[(NW + w) * DT + e];
    }
    const int64_t at = ((int64_t)c * gridDim.x + qt) * HD + (int64_t)h * a.dh + e;
    part_u[at] = su;
    part_v[at] = sv2;
  }
}

/* ---- 3. dk, dv ---------------------------------------------------------------------------------- */
template <typename T, int DT>
__global__ void __launch_bounds__(TXL_ATTN_BWD_THREADS)
    dkv_kernel(T *dkv, const T *dvec, const T *q, const T *kv, const T *r, const float *u, const float *vb,
               const float *rb, const float *lse, const float *D, TxlAttnArgs a) {
  using MM = typename TxlMmaOf<T>::M;
  constexpr int LD = DT + 8, NT = DT / 8;
  TXL_DYNAMIC_SHARED(uint16_t, sm);
  uint16_t *sk = sm, *sv = sk + KB * LD, *squ = sv + KB * LD, *sqv = squ + KQ * LD, *sdo = sqv + KQ * LD;
  uint16_t *sr = sdo + KQ * LD;
  float *sbt = reinterpret_cast<float *>(sr + (KQ + KB) * LD), *slse = sbt + NW * KW * KWL, *sD = slse + KQ;
  const int j0 = (int)blockIdx.x * KB, h = (int)blockIdx.y, c = (int)blockIdx.z;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int HD = a.H * a.dh;
  const int64_t qrow = (int64_t)a.B * a.ldq, kvrow = (int64_t)a.B * a.ldkv;
  const int64_t qoff = (int64_t)c * a.ldq + (int64_t)h * a.dh, kvoff = (int64_t)c * a.ldkv + (int64_t)h * a.dh;
  txl_attn_load_tile<T, MM, DT>(sk, KB, kv + kvoff, kvrow, j0, a.K, nullptr, a.dh);
  txl_attn_load_tile<T, MM, DT>(sv, KB, kv + kvoff + HD, kvrow, j0, a.K, nullptr, a.dh);
  const int wj0 = j0 + 16 * warp;
  float dk[NT][4], dv[NT][4];
  #pragma unroll
  for (int n = 0; n < NT; n++)
    #pragma unroll
    for (int x = 0; x < 4; x++) dk[n][x] = dv[n][x] = 0.0f;
  /* the rows that see a key of the block: M + i >= j0, lo(i) <= j0 + KB - 1 */
  const int ifirst = txl_attn_imax(0, j0 - a.M);
  const int ilast = a.same_length ? txl_attn_imin(a.L - 1, j0 + KB - 2 + a.same_shift) : a.L - 1;
  const T *rh = r ? r + (int64_t)h * a.dh : nullptr;
  float *bt = sbt + warp * KW * KWL;
  for (int i0 = ifirst / KQ * KQ; i0 <= ilast; i0 += KQ) {
    __syncthreads();
    txl_attn_load_tile<T, MM, DT>(squ, KQ, q + qoff, qrow, i0, a.L, u ? u + h * a.dh : nullptr, a.dh);
    if (r) txl_attn_load_tile<T, MM, DT>(sqv, KQ, q + qoff, qrow, i0, a.L, vb ? vb + h * a.dh : nullptr, a.dh);
    txl_attn_load_tile<T, MM, DT>(sdo, KQ, dvec + qoff, qrow, i0, a.L, nullptr, a.dh);
    if (r) txl_attn_load_tile<T, MM, DT>(sr, KQ + KB, rh, a.ldr, a.L - 1 - (i0 + KQ - 1) + j0, a.K, nullptr, a.dh);
    load_rows(slse, sD, lse, D, a, c, h, i0, KQ);
    __syncthreads();
    const int tlast = txl_attn_imin(i0 + KQ - 1, a.L - 1);
    if (wj0 >= a.K || a.M + tlast < wj0 || txl_attn_first_key(a, i0) > wj0 + 15) continue; /* warp-uniform */
    float st[KQ / 8][4], dpt[KQ / 8][4]; /* (key g or g + 8, row 8 n + 2 t4 + x % 2) */
    txl_tile_mma_abt<MM, KQ, DT>(st, sk + 16 * warp * LD, LD, squ, LD);
    txl_tile_mma_abt<MM, KQ, DT>(dpt, sv + 16 * warp * LD, LD, sdo, LD);
    if (r) { /* Rband Qv^T: (position pb + x, row), pb = L-1-(i0+KQ-1)+wj0, x < KW */
      __syncwarp();
      #pragma unroll
      for (int mt = 0; mt < KW / 16; mt++) {
        float tb[KQ / 8][4];
        txl_tile_mma_abt<MM, KQ, DT>(tb, sr + (16 * warp + 16 * mt) * LD, LD, sqv, LD);
        store_acc<KQ>(bt + 16 * mt * KWL, KWL, tb);
      }
      __syncwarp();
    }
    #pragma unroll
    for (int n = 0; n < KQ / 8; n++)
      #pragma unroll
      for (int x = 0; x < 4; x++) {
        const int jj = g + 8 * (x / 2), ii = 8 * n + 2 * t4 + x % 2, i = i0 + ii, j = wj0 + jj;
        float pt = 0.0f, ds = 0.0f;
        if (txl_attn_visible(a, i, j)) {
          const float p = expf(score(a, st[n][x], r ? &bt[(KQ - 1 - ii + jj) * KWL + ii] : nullptr, rb, i, j, h) -
                               slse[ii]);
          const float f = a.dropout ? txl_attn_drop_factor(a, i, c, h, j) : 1.0f;
          pt = p * f;
          ds = p * (f * dpt[n][x] - sD[ii]);
        }
        st[n][x] = pt;
        dpt[n][x] = ds;
      }
    /* dv += P~^T dvec, dk += dS^T (q + u): the accumulators as A (k = 16 rows) */
    #pragma unroll
    for (int kk = 0; kk < KQ / 16; kk++) {
      uint32_t ap[4], as[4];
      txl_tile_c_to_a<MM>(ap, st[2 * kk], st[2 * kk + 1]);
      txl_tile_c_to_a<MM>(as, dpt[2 * kk], dpt[2 * kk + 1]);
      txl_tile_mma_kn<MM, DT>(dv, ap, sdo + 16 * kk * LD, LD);
      txl_tile_mma_kn<MM, DT>(dk, as, squ + 16 * kk * LD, LD);
    }
  }
  #pragma unroll
  for (int y = 0; y < 2; y++) {
    const int j = wj0 + g + 8 * y;
    if (j >= a.K) continue;
    T *out = dkv + (int64_t)j * kvrow + kvoff;
    #pragma unroll
    for (int n = 0; n < NT; n++)
      #pragma unroll
      for (int x = 0; x < 2; x++) {
        const int e = 8 * n + 2 * t4 + x;
        if (e >= a.dh) continue;
        txl_st(out + e, a.scale * dk[n][2 * y + x]);
        txl_st(out + HD + e, dv[n][2 * y + x]);
      }
  }
}

/* ---- 4. dr and drb, per group of columns --------------------------------------------------- */
/* __launch_bounds__ with a minimum of 1 block per multiprocessor: without it ptxas spilled this
 * kernel on sm_86 and sm_89 (tests/cuda/test_resources.sh). */
template <typename T, int DT>
__global__ void __launch_bounds__(TXL_ATTN_BWD_THREADS, 1)
    dr_kernel(float *part_r, float *part_rb, const T *dvec, const T *q, const T *kv, const T *r, const float *u,
              const float *vb, const float *rb, const float *lse, const float *D, TxlAttnArgs a) {
  using MM = typename TxlMmaOf<T>::M;
  constexpr int LD = DT + 8, NT = DT / 8;
  TXL_DYNAMIC_SHARED(uint16_t, sm);
  /* sr, sqv; then squ, sdo, sk, sv, which sac, sdp overlay (dr_shared); then sds, slse, sD */
  uint16_t *sr = sm, *sqv = sr + RP * LD, *squ = sqv + RQ * LD, *sdo = squ + RQ * LD, *sk = sdo + RQ * LD;
  uint16_t *sv = sk + (RQ + RP) * LD;
  float *sac = reinterpret_cast<float *>(squ), *sdp = sac + NW * 16 * RW;
  uint16_t *sds = reinterpret_cast<uint16_t *>(reinterpret_cast<unsigned char *>(squ) + dr_overlay(DT));
  float *slse = reinterpret_cast<float *>(sds + RQ * RPL), *sD = slse + RQ;
  const int p0 = (int)blockIdx.x * RP, h = (int)blockIdx.y, grp = (int)blockIdx.z, G = (int)gridDim.z;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int HD = a.H * a.dh;
  const int64_t qrow = (int64_t)a.B * a.ldq, kvrow = (int64_t)a.B * a.ldkv;
  txl_attn_load_tile<T, MM, DT>(sr, RP, r + (int64_t)h * a.dh, a.ldr, p0, a.K, nullptr, a.dh);
  float dr[NT][4], drb = 0.0f; /* drb: thread t < RP's position p0 + t */
  #pragma unroll
  for (int n = 0; n < NT; n++)
    #pragma unroll
    for (int x = 0; x < 4; x++) dr[n][x] = 0.0f;
  /* (i, p) is visible for j = p-(L-1-i) >= lo(i): i >= L-1-p, and with same_length
   * p >= L - same_shift; j <= M + i is p < K */
  const int plast = txl_attn_imin(p0 + RP - 1, a.K - 1);
  const bool any_p = p0 < a.K && (!a.same_length || plast >= a.L - a.same_shift);
  const int ifirst = txl_attn_imax(0, a.L - 1 - plast);
  float *ac = sac + warp * 16 * RW, *dpb = sdp + warp * 16 * RW;
  for (int c = grp; c < a.B; c += G) {
    const int64_t qoff = (int64_t)c * a.ldq + (int64_t)h * a.dh, kvoff = (int64_t)c * a.ldkv + (int64_t)h * a.dh;
    for (int i0 = any_p ? ifirst / RQ * RQ : a.L; i0 < a.L; i0 += RQ) {
      __syncthreads();
      txl_attn_load_tile<T, MM, DT>(squ, RQ, q + qoff, qrow, i0, a.L, u ? u + h * a.dh : nullptr, a.dh);
      txl_attn_load_tile<T, MM, DT>(sqv, RQ, q + qoff, qrow, i0, a.L, vb ? vb + h * a.dh : nullptr, a.dh);
      txl_attn_load_tile<T, MM, DT>(sdo, RQ, dvec + qoff, qrow, i0, a.L, nullptr, a.dh);
      const int kb0 = p0 - (a.L - 1 - i0); /* the keys of row i0 + 16 w start at kb0 + 16 w */
      txl_attn_load_tile<T, MM, DT>(sk, RQ + RP, kv + kvoff, kvrow, kb0, a.K, nullptr, a.dh);
      txl_attn_load_tile<T, MM, DT>(sv, RQ + RP, kv + kvoff + HD, kvrow, kb0, a.K, nullptr, a.dh);
      load_rows(slse, sD, lse, D, a, c, h, i0, RQ);
      __syncthreads();
      const int wi0 = i0 + 16 * warp;
      uint16_t *ds_rows = sds + 16 * warp * RPL;
      const bool rows_seen = wi0 < a.L && wi0 + 15 >= a.L - 1 - plast; /* warp-uniform */
      {
        float tac[RW / 8][4], tdp[RW / 8][4];
        if (rows_seen) {
          txl_tile_mma_abt<MM, RW, DT>(tac, squ + 16 * warp * LD, LD, sk + 16 * warp * LD, LD);
          txl_tile_mma_abt<MM, RW, DT>(tdp, sdo + 16 * warp * LD, LD, sv + 16 * warp * LD, LD);
        }
        __syncthreads(); /* every warp has read squ, sdo, sk, sv, which sac and sdp overlay */
        if (rows_seen) {
          store_acc<RW>(ac, RW, tac);
          store_acc<RW>(dpb, RW, tdp);
        }
      }
      if (rows_seen) {
        __syncwarp();
        float bd[RP / 8][4];
        txl_tile_mma_abt<MM, RP, DT>(bd, sqv + 16 * warp * LD, LD, sr, LD);
        /* (row rr, position pc): key band index rr + pc */
        #pragma unroll
        for (int n = 0; n < RP / 8; n++)
          #pragma unroll
          for (int x = 0; x < 4; x++) {
            const int rr = g + 8 * (x / 2), pc = 8 * n + 2 * t4 + x % 2, i = wi0 + rr, p = p0 + pc;
            const int j = p - (a.L - 1 - i);
            float ds = 0.0f;
            if (p < a.K && txl_attn_visible(a, i, j)) {
              const float pr = expf(score(a, ac[rr * RW + rr + pc], &bd[n][x], rb, i, j, h) - slse[16 * warp + rr]);
              const float f = a.dropout ? txl_attn_drop_factor(a, i, c, h, j) : 1.0f;
              ds = pr * (f * dpb[rr * RW + rr + pc] - sD[16 * warp + rr]);
            }
            ds_rows[rr * RPL + pc] = (uint16_t)MM::bits(ds);
          }
      } else {
        for (int t = lane; t < 16 * RPL; t += 32) ds_rows[t] = 0;
      }
      __syncthreads();
      /* dr[16 warp .. + 15] += dBD^T (q + vb): A from dBD's rows by ldmatrix .trans */
      #pragma unroll
      for (int kk = 0; kk < RQ / 16; kk++) {
        uint32_t af[4];
        txl_tile_load_a_t(af, sds + 16 * kk * RPL + 16 * warp, RPL);
        txl_tile_mma_kn<MM, DT>(dr, af, sqv + 16 * kk * LD, LD);
      }
      if (rb && threadIdx.x < RP)
        for (int row = 0; row < RQ; row++) drb += MM::value(sds[row * RPL + threadIdx.x]);
    }
  }
  #pragma unroll
  for (int y = 0; y < 2; y++) {
    const int p = p0 + 16 * warp + g + 8 * y;
    if (p >= a.K) continue;
    float *out = part_r + ((int64_t)grp * a.K + p) * HD + (int64_t)h * a.dh;
    #pragma unroll
    for (int n = 0; n < NT; n++)
      #pragma unroll
      for (int x = 0; x < 2; x++) {
        const int e = 8 * n + 2 * t4 + x;
        if (e < a.dh) out[e] = a.scale * dr[n][2 * y + x];
      }
  }
  if (rb && threadIdx.x < RP && p0 + (int)threadIdx.x < a.K)
    part_rb[((int64_t)grp * a.K + p0 + threadIdx.x) * a.H + h] = a.scale * drb;
}

/* ---- 5. the partial sums, in order ------------------------------------------------------------ */
/* dst[x * ld + e] = sum over g < G of part[(g rows + x) width + e], rounded once to D. */
template <typename D>
__global__ void sum_store_kernel(D *dst, int64_t ld, const float *part, int G, int rows, int width) {
  const int64_t n = (int64_t)rows * width;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int gi = 0; gi < G; gi++) s += part[gi * n + t];
    txl_st(dst + t / width * ld + t % width, s);
  }
}

/* dst[t] += sum over g < G of part[g n + t]. */
__global__ void sum_add_kernel(float *dst, const float *part, int G, int n) {
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n; t += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int gi = 0; gi < G; gi++) s += part[(int64_t)gi * n + t];
    dst[t] += s;
  }
}

template <typename K>
void raise_shared(K kern, size_t bytes, bool &raised) {
  if (raised) return;
  CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  raised = true;
}

float *at_bytes(void *work, size_t off) {
  return reinterpret_cast<float *>(static_cast<char *>(work) + off);
}

template <typename T, int DT>
void launch(T *dq, T *dkv, T *dr, float *du, float *dvb, float *drb, const T *dvec, const T *vec, const T *q,
            const T *kv, const T *r, const float *u, const float *vb, const float *rb, const float *lse,
            const TxlAttnShape &s, const TxlAttnArgs &a, void *work) {
  const BwdPlan p = bwd_plan(s);
  float *D = at_bytes(work, p.d), *pu = at_bytes(work, p.pu), *pv = at_bytes(work, p.pv);
  float *pr = at_bytes(work, p.pr), *prb = at_bytes(work, p.prb);
  const int64_t rows = (int64_t)s.B * s.H * s.L;
  {
    auto k = dot_kernel<T>;
    TXL_LAUNCH(k, txl_cuda_blocks(rows * 32, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(D, dvec, vec, a);
    CUDA_LAUNCH_CHECK();
  }
  {
    auto k = dq_kernel<T, DT>;
    static bool raised = false;
    raise_shared(k, dq_shared(DT), raised);
    const dim3 grid((unsigned int)tiles(s.L, QB), (unsigned int)s.H, (unsigned int)s.B);
    TXL_LAUNCH(k, grid, TXL_ATTN_BWD_THREADS, dq_shared(DT))(dq, pu, pv, dvec, q, kv, r, u, vb, rb, lse, D, a);
    CUDA_LAUNCH_CHECK();
  }
  {
    auto k = dkv_kernel<T, DT>;
    static bool raised = false;
    raise_shared(k, dkv_shared(DT), raised);
    const dim3 grid((unsigned int)tiles(a.K, KB), (unsigned int)s.H, (unsigned int)s.B);
    TXL_LAUNCH(k, grid, TXL_ATTN_BWD_THREADS, dkv_shared(DT))(dkv, dvec, q, kv, r, u, vb, rb, lse, D, a);
    CUDA_LAUNCH_CHECK();
  }
  const int HD = s.H * s.dh;
  if (r) {
    auto k = dr_kernel<T, DT>;
    static bool raised = false;
    raise_shared(k, dr_shared(DT), raised);
    const int G = dr_groups(s);
    const dim3 grid((unsigned int)tiles(a.K, RP), (unsigned int)s.H, (unsigned int)G);
    TXL_LAUNCH(k, grid, TXL_ATTN_BWD_THREADS, dr_shared(DT))(pr, prb, dvec, q, kv, r, u, vb, rb, lse, D, a);
    CUDA_LAUNCH_CHECK();
    const int64_t n = (int64_t)a.K * HD;
    auto st = sum_store_kernel<T>;
    TXL_LAUNCH(st, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(dr, s.ldr, pr, G, a.K, HD);
    CUDA_LAUNCH_CHECK();
    if (rb) {
      auto sf = sum_store_kernel<float>;
      TXL_LAUNCH(sf, txl_cuda_blocks((int64_t)a.K * s.H, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(drb, s.H, prb, G,
                                                                                               a.K, s.H);
      CUDA_LAUNCH_CHECK();
    }
  }
  const int parts = s.B * tiles(s.L, QB);
  if (du) {
    TXL_LAUNCH(sum_add_kernel, txl_cuda_blocks(HD, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(du, pu, parts, HD);
    CUDA_LAUNCH_CHECK();
  }
  if (dvb) {
    TXL_LAUNCH(sum_add_kernel, txl_cuda_blocks(HD, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(dvb, pv, parts, HD);
    CUDA_LAUNCH_CHECK();
  }
}

} // namespace

int rel_attn_fused_backward_shape_fits(const TxlAttnShape &s, size_t act_bytes) {
  return act_bytes == 2 && s.dh <= DT_MAX && s.L > 0 && s.B > 0 && s.H > 0 && s.dh > 0;
}

int rel_attn_fused_backward_fits(const TxlAttnShape &s, size_t act_bytes) {
  if (!rel_attn_fused_backward_shape_fits(s, act_bytes)) return 0;
  const TxlAttnDevice d = txl_attn_device();
  const int dt = txl_attn_padded_head(s.dh);
  const size_t most = dq_shared(dt) > dkv_shared(dt) ? dq_shared(dt) : dkv_shared(dt);
  return d.major >= 8 && most <= (size_t)d.optin && dr_shared(dt) <= (size_t)d.optin;
}

size_t rel_attn_fused_backward_workspace(const TxlAttnShape &s) {
  return s.L > 0 && s.B > 0 && s.H > 0 && s.dh > 0 ? bwd_plan(s).bytes : 0;
}

template <typename T>
void rel_attn_fused_backward(T *dq, T *dkv, T *dr, float *du, float *dvb, float *drb, const T *dvec, const T *vec,
                             const T *q, const T *kv, const T *r, const float *u, const float *vb, const float *rb,
                             const float *lse, const TxlAttnShape &s, const TxlDropout &drop, void *work) {
  const TxlAttnArgs a = txl_attn_args(s, drop);
  if (txl_attn_padded_head(s.dh) == 32)
    launch<T, 32>(dq, dkv, dr, du, dvb, drb, dvec, vec, q, kv, r, u, vb, rb, lse, s, a, work);
  else
    launch<T, 64>(dq, dkv, dr, du, dvb, drb, dvec, vec, q, kv, r, u, vb, rb, lse, s, a, work);
}

#define TXL_FUSED_BWD(T)                                                                                       \
  template void rel_attn_fused_backward<T>(T *, T *, T *, float *, float *, float *, const T *, const T *,    \
                                           const T *, const T *, const T *, const float *, const float *,     \
                                           const float *, const float *, const TxlAttnShape &,                \
                                           const TxlDropout &, void *);
TXL_FUSED_BWD(txl_bf16)
TXL_FUSED_BWD(txl_fp16)

void rel_attn_fused_backward_cost(const TxlAttnShape &s, size_t act_bytes, int has_bd, int has_rb, double *bytes,
                                  double *tensor_flops, double *core_flops, double *launches) {
  const double dt = txl_attn_padded_head(s.dh), e = (double)act_bytes, dh = s.dh, K = s.M + s.L;
  const double B = s.B, H = s.H, L = s.L, HD = H * dh, rows = B * H * L;
  const double bd = has_bd ? 1.0 : 0.0, G = dr_groups(s), parts = B * tiles(s.L, QB);
  /* 1. D */
  double by = rows * (2.0 * dh * e + 4.0), tf = 0.0, cf = rows * 2.0 * dh, ln = 1.0;
  /* 2. dq: per block q + u, q + vb, dvec, lse, D; per key tile k, v, the band; dq and the halves' sums
   * (the masks skip some key tiles: counted as all) */
  const double qblocks = tiles(s.L, QB) * H * B, ktiles = tiles(s.M + s.L, QK);
  by += qblocks * ((2.0 + bd) * QB * dh * e + QB * 8.0 + ktiles * (2.0 * QK + bd * (QB + QK)) * dh * e) +
        L * B * HD * e + 2.0 * parts * HD * 4.0;
  tf += qblocks * ktiles * (3.0 * 2.0 * QB * QK * dt + bd * 2.0 * 2.0 * QB * QW * dt);
  cf += qblocks * ktiles * QB * QK * 10.0;
  ln += 1.0;
  /* 3. dkv: per block k, v; per query tile q + u, q + vb, dvec, the band, lse, D; dkv */
  const double kblocks = tiles(s.M + s.L, KB) * H * B, qtiles = tiles(s.L, KQ);
  by += kblocks * (2.0 * KB * dh * e + qtiles * ((2.0 + bd) * KQ * dh * e + bd * (KQ + KB) * dh * e + KQ * 8.0)) +
        K * B * 2.0 * HD * e;
  tf += kblocks * qtiles * (4.0 * 2.0 * KB * KQ * dt + bd * 2.0 * NW * KW * KQ * dt);
  cf += kblocks * qtiles * KB * KQ * 10.0;
  ln += 1.0;
  if (has_bd) { /* 4. dr: per block r; per (column, row tile) q twice, dvec, k and v bands; the partials */
    const double pblocks = tiles(s.M + s.L, RP) * H, rtiles = tiles(s.L, RQ);
    by += pblocks * (RP * dh * e + B * rtiles * (3.0 * RQ * dh * e + 2.0 * (RQ + RP) * dh * e + RQ * 8.0)) +
          G * K * (HD + (has_rb ? H : 0.0)) * 4.0;
    tf += pblocks * B * rtiles * (2.0 * 2.0 * RQ * RW * dt + 2.0 * 2.0 * RQ * RP * dt);
    cf += pblocks * B * rtiles * RQ * RP * 10.0;
    /* 5. the partials reduced: dr (and drb) */
    by += G * K * HD * 4.0 + K * HD * e + (has_rb ? G * K * H * 4.0 + K * H * 4.0 : 0.0);
    ln += has_rb ? 3.0 : 2.0;
  }
  by += 2.0 * (parts * HD * 4.0 + HD * 8.0); /* du, dvb */
  ln += 2.0;
  *bytes = by, *tensor_flops = tf, *core_flops = cf, *launches = ln;
}
