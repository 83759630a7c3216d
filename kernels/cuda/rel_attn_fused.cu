/* The fused forward of Transformer-XL's relative attention for the bf16 and fp16 tables: the
 * math of rel_attn.cu's file comment (s_ij = scale ((q_i + u) k_j + (q_i + vb) r_p), p = L-1-i+j,
 * the masks, dropatt, vec_i = sum_j P~_ij v_j, lse_i) in one kernel that never writes a score.
 *
 * Grid (query tiles of BQ = 64 rows, H, B); a block of 4 warps, warp w owning query rows
 * i0 + 16 w .. + 15. Shared memory (16-bit elements, rows LD = DT + 8 apart: 16-byte aligned and
 * off the bank of the row above):
 *   qu, qv [BQ][LD]      q + u, q + vb of the block's rows, rounded once to T (zeros past dh, L)
 *   k, v   [BK][LD]      the key tile (BK = 32 keys), zeros past dh, K
 *   r      [BQ+BK][LD]   the band of relative positions the (query tile, key tile) pair needs:
 *                        p from L-1-(i0+BQ-1)+j0 on; zeros outside [0, K)
 *   bd     [4][16][BW]   fp32, per warp: its 16 rows' (q + vb) r products over the warp's band
 *                        of BW = 16 + BK positions (16 + BK - 1 used)
 * Per key tile (tiles wholly masked for all the block's rows are skipped), each warp:
 *   S = Qu K^T (m16n8k16, A and B by ldmatrix), T = Qv Rband^T into its bd rows, then
 *   s = scale S + scale T[row][15 - row + col] (the relative shift, read back from shared memory)
 *   (+ scale rb[p, h]); masked: -inf. Online softmax per row (the row's max over the quad of
 *   lanes that hold it, shuffles in a fixed order), O rescaled, P = exp(s - m) times the dropatt
 *   factor of (i, column col0 + c, feature h K + j) (the CPU's and the GEMM route's Philox words),
 *   rounded to T as the A operand of O += P~ V (V's B fragments by ldmatrix .trans).
 * At the end each lane's row sums l are added over the quad (fixed order), vec = O / l and
 * lse = m + log l written (rows no key sees: vec 0, lse -inf, as the GEMM route).
 *
 * Precision (tests/cuda/test_rel_attn.c bounds it as the GEMM route): operands rounded to T once
 * (q + u, q + vb, P~), fp32 accumulation, every score the sum of its two products scaled as the
 * GEMM route scales them; the online rescaling adds at most one rounding per key tile to O and l,
 * fewer than the K the bounds allow a sum of K terms. Determinism: no atomics; every sum in a fixed
 * order. The key tiles are loaded by plain loads (no cp.async double buffering yet). */
#include <math.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/mma_tile.h"
#include "kernels/cuda/rel_attn_fused.h"
#include "kernels/cuda/rel_attn_tile.h"

namespace {

/* The block: 4 warps of 16 query rows each (a #define: tests/cuda/test_resources.sh reads the
 * launch's block size). */
#define TXL_ATTN_FUSED_THREADS 128
constexpr int BQ = 64, BK = 32, NW = TXL_ATTN_FUSED_THREADS / 32, BW = 16 + BK, DT_MAX = 128;
static_assert(BQ == 16 * NW, "a warp owns 16 query rows");

size_t shared_bytes(int dt) {
  const size_t ld = (size_t)dt + 8;
  return (size_t)(2 * BQ + 2 * BK + BQ + BK) * ld * 2 + (size_t)NW * 16 * BW * sizeof(float);
}

template <typename T, int DT>
__global__ void __launch_bounds__(TXL_ATTN_FUSED_THREADS) fused_forward_kernel(T *vec, float *lse, const T *q, const T *kv, const T *r,
                                                                const float *u, const float *vb, const float *rb,
                                                                TxlAttnArgs a) {
  using MM = typename TxlMmaOf<T>::M;
  constexpr int LD = DT + 8, NT = DT / 8; /* n8 tiles of a head row */
  TXL_DYNAMIC_SHARED(uint16_t, sm);
  uint16_t *squ = sm, *sqv = squ + BQ * LD, *sk = sqv + BQ * LD, *sv = sk + BK * LD, *sr = sv + BK * LD;
  float *sbd = reinterpret_cast<float *>(sr + (BQ + BK) * LD);
  const int i0 = (int)blockIdx.x * BQ, h = (int)blockIdx.y, c = (int)blockIdx.z;
  const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
  const int HD = a.H * a.dh;
  const int64_t qrow = (int64_t)a.B * a.ldq, kvrow = (int64_t)a.B * a.ldkv;
  const T *qh = q + (int64_t)c * a.ldq + (int64_t)h * a.dh;
  txl_attn_load_tile<T, MM, DT>(squ, BQ, qh, qrow, i0, a.L, u ? u + h * a.dh : nullptr, a.dh);
  if (r) txl_attn_load_tile<T, MM, DT>(sqv, BQ, qh, qrow, i0, a.L, vb ? vb + h * a.dh : nullptr, a.dh);

  /* the keys any row of the block sees: [jlo, jhi] */
  const int ilast = txl_attn_imin(i0 + BQ, a.L) - 1;
  const int jlo = txl_attn_first_key(a, i0), jhi = a.M + ilast;
  const int wi0 = i0 + 16 * warp; /* this warp's first row */
  const bool warp_rows = wi0 < a.L;
  const int wlast = txl_attn_imin(wi0 + 15, a.L - 1);
  const int wjlo = warp_rows ? txl_attn_first_key(a, wi0) : 0, wjhi = warp_rows ? a.M + wlast : -1;
  float o[NT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  #pragma unroll
  for (int n = 0; n < NT; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  const T *kh = kv + (int64_t)c * a.ldkv + (int64_t)h * a.dh, *vh = kh + HD;
  const T *rh = r ? r + (int64_t)h * a.dh : nullptr;
  for (int j0 = jlo / BK * BK; j0 <= jhi; j0 += BK) {
    __syncthreads(); /* the previous tile's reads are done */
    txl_attn_load_tile<T, MM, DT>(sk, BK, kh, kvrow, j0, a.K, nullptr, a.dh);
    txl_attn_load_tile<T, MM, DT>(sv, BK, vh, kvrow, j0, a.K, nullptr, a.dh);
    const int pb = a.L - 1 - (i0 + BQ - 1) + j0; /* the band's first position */
    if (r) txl_attn_load_tile<T, MM, DT>(sr, BQ + BK, rh, a.ldr, pb, a.K, nullptr, a.dh);
    __syncthreads();
    if (!warp_rows || j0 > wjhi || j0 + BK - 1 < wjlo) continue; /* warp-uniform: nothing this warp sees */
    float s[BK / 8][4];
    txl_tile_mma_abt<MM, BK, DT>(s, squ + 16 * warp * LD, LD, sk, LD);
    float *bd = sbd + warp * 16 * BW;
    if (r) {
      /* the warp's band starts at row 16 (NW - 1 - warp) of sr: p = L-1-(wi0+15)+j0 on */
      const uint16_t *band = sr + 16 * (NW - 1 - warp) * LD;
      float tb[BW / 8][4];
      txl_tile_mma_abt<MM, BW, DT>(tb, sqv + 16 * warp * LD, LD, band, LD);
      __syncwarp();
      #pragma unroll
      for (int n = 0; n < BW / 8; n++) {
        bd[g * BW + 8 * n + 2 * t4] = tb[n][0];
        bd[g * BW + 8 * n + 2 * t4 + 1] = tb[n][1];
        bd[(g + 8) * BW + 8 * n + 2 * t4] = tb[n][2];
        bd[(g + 8) * BW + 8 * n + 2 * t4 + 1] = tb[n][3];
      }
      __syncwarp();
    }
    /* scores, masks, the tile's row maxima (accumulator (row g or g + 8, column 8 n + 2 t4 + x)) */
    float tmax[2] = {-INFINITY, -INFINITY};
    #pragma unroll
    for (int n = 0; n < BK / 8; n++)
      #pragma unroll
      for (int x = 0; x < 4; x++) {
        const int rr = g + 8 * (x / 2), cc = 8 * n + 2 * t4 + x % 2, i = wi0 + rr, j = j0 + cc;
        float sc = -INFINITY;
        if (i < a.L && j >= txl_attn_first_key(a, i) && j <= a.M + i) {
          sc = a.scale * s[n][x];
          if (r) sc += a.scale * bd[rr * BW + 15 - rr + cc];
          if (rb) sc += a.scale * rb[(int64_t)(a.L - 1 - i + j) * a.H + h];
        }
        s[n][x] = sc;
        tmax[x / 2] = fmaxf(tmax[x / 2], sc);
      }
    #pragma unroll
    for (int y = 0; y < 2; y++) {
      tmax[y] = fmaxf(tmax[y], __shfl_xor_sync(0xffffffffu, tmax[y], 1));
      tmax[y] = fmaxf(tmax[y], __shfl_xor_sync(0xffffffffu, tmax[y], 2));
    }
    float base[2], alpha[2];
    #pragma unroll
    for (int y = 0; y < 2; y++) {
      const float mn = fmaxf(m[y], tmax[y]);
      base[y] = mn == -INFINITY ? 0.0f : mn; /* a row that has seen nothing yet: exp(-inf) = 0 */
      alpha[y] = m[y] == -INFINITY ? 0.0f : expf(m[y] - mn);
      m[y] = mn;
      l[y] *= alpha[y];
    }
    #pragma unroll
    for (int n = 0; n < NT; n++) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0];
      o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
    #pragma unroll
    for (int n = 0; n < BK / 8; n++)
      #pragma unroll
      for (int x = 0; x < 4; x++) {
        const int y = x / 2;
        const float p = s[n][x] == -INFINITY ? 0.0f : expf(s[n][x] - base[y]);
        l[y] += p;
        float f = 1.0f;
        if (a.dropout && p != 0.0f) f = txl_attn_drop_factor(a, wi0 + g + 8 * y, c, h, j0 + 8 * n + 2 * t4 + x % 2);
        s[n][x] = p * f;
      }
    /* O += P~ V: the probabilities' accumulators as A (k = 16 keys), V's B by ldmatrix .trans */
    #pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      uint32_t af[4];
      txl_tile_c_to_a<MM>(af, s[2 * kk], s[2 * kk + 1]);
      txl_tile_mma_kn<MM, DT>(o, af, sv + 16 * kk * LD, LD);
    }
  }
  if (!warp_rows) return;
  #pragma unroll
  for (int y = 0; y < 2; y++) {
    l[y] += __shfl_xor_sync(0xffffffffu, l[y], 1);
    l[y] += __shfl_xor_sync(0xffffffffu, l[y], 2);
  }
  #pragma unroll
  for (int y = 0; y < 2; y++) {
    const int i = wi0 + g + 8 * y;
    if (i >= a.L) continue;
    const float inv = l[y] > 0.0f ? 1.0f / l[y] : 0.0f;
    T *out = vec + (int64_t)i * qrow + (int64_t)c * a.ldq + (int64_t)h * a.dh;
    #pragma unroll
    for (int n = 0; n < NT; n++)
      #pragma unroll
      for (int x = 0; x < 2; x++) {
        const int e = 8 * n + 2 * t4 + x;
        if (e < a.dh) txl_st(out + e, o[n][2 * y + x] * inv);
      }
    if (t4 == 0) lse[((int64_t)c * a.H + h) * a.L + i] = m[y] == -INFINITY ? -INFINITY : m[y] + logf(l[y]);
  }
}

template <typename T, int DT>
void launch(T *vec, float *lse, const T *q, const T *kv, const T *r, const float *u, const float *vb, const float *rb,
            const TxlAttnArgs &a) {
  auto kern = fused_forward_kernel<T, DT>;
  const size_t bytes = shared_bytes(DT);
  static bool raised = false; /* the kernel's dynamic shared-memory limit, raised once */
  if (!raised) {
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    raised = true;
  }
  const dim3 grid((unsigned int)((a.L + BQ - 1) / BQ), (unsigned int)a.H, (unsigned int)a.B);
  TXL_LAUNCH(kern, grid, TXL_ATTN_FUSED_THREADS, bytes)(vec, lse, q, kv, r, u, vb, rb, a);
  CUDA_LAUNCH_CHECK();
}

} // namespace

int rel_attn_fused_shape_fits(const TxlAttnShape &s, size_t act_bytes) {
  return act_bytes == 2 && s.dh <= DT_MAX && s.L > 0 && s.B > 0 && s.H > 0 && s.dh > 0;
}

int rel_attn_fused_fits(const TxlAttnShape &s, size_t act_bytes) {
  if (!rel_attn_fused_shape_fits(s, act_bytes)) return 0;
  const TxlAttnDevice d = txl_attn_device();
  return d.major >= 8 && shared_bytes(txl_attn_padded_head(s.dh)) <= (size_t)d.optin;
}

template <typename T>
void rel_attn_fused_forward(T *vec, float *lse, const T *q, const T *kv, const T *r, const float *u, const float *vb,
                            const float *rb, const TxlAttnShape &s, const TxlDropout &drop) {
  const TxlAttnArgs a = txl_attn_args(s, drop);
  switch (txl_attn_padded_head(s.dh)) {
    case 32: launch<T, 32>(vec, lse, q, kv, r, u, vb, rb, a); break;
    case 64: launch<T, 64>(vec, lse, q, kv, r, u, vb, rb, a); break;
    default: launch<T, 128>(vec, lse, q, kv, r, u, vb, rb, a); break;
  }
}

template void rel_attn_fused_forward<txl_bf16>(txl_bf16 *, float *, const txl_bf16 *, const txl_bf16 *,
                                               const txl_bf16 *, const float *, const float *, const float *,
                                               const TxlAttnShape &, const TxlDropout &);
template void rel_attn_fused_forward<txl_fp16>(txl_fp16 *, float *, const txl_fp16 *, const txl_fp16 *,
                                               const txl_fp16 *, const float *, const float *, const float *,
                                               const TxlAttnShape &, const TxlDropout &);

void rel_attn_fused_cost(const TxlAttnShape &s, size_t act_bytes, int has_bd, double *bytes, double *tensor_flops,
                         double *core_flops) {
  const int dt = txl_attn_padded_head(s.dh), K = s.M + s.L;
  const double tiles_q = (double)((s.L + BQ - 1) / BQ), blocks = tiles_q * s.H * s.B;
  /* key tiles per query tile: at most all of them (the masks skip some; counted as all) */
  const double tiles_k = (double)((K + BK - 1) / BK), e = (double)act_bytes;
  const double per_tile = (2.0 * BK + (has_bd ? BQ + BK : 0)) * s.dh * e; /* k, v, the r band */
  *bytes = blocks * ((has_bd ? 2.0 : 1.0) * BQ * s.dh * e + tiles_k * per_tile) +
           (double)s.L * s.B * s.H * s.dh * e + (double)s.L * s.B * s.H * 4.0;
  const double products = (has_bd ? 2.0 : 1.0) * 2.0 * BQ * BK * dt + 2.0 * BQ * BK * dt;
  const double band = has_bd ? 2.0 * BQ * (BW - BK) * dt : 0.0; /* the band's extra positions */
  *tensor_flops = blocks * tiles_k * (products + band);
  *core_flops = blocks * tiles_k * (double)BQ * BK * 8.0;
}
