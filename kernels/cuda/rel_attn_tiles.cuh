/* The relative attention kernels' shared pieces (kernels/cuda/rel_attn.cu, whose header says
 * how the kernels work): the call's geometry as the kernels see it, the block size, and the
 * device helpers of the forward and backward kernels (the visible keys of a row, the dropatt
 * factors, loading rows into shared memory, one tile of scores, half-warp reductions).
 * Included by rel_attn.cu only. */
#ifndef TXL_KERNELS_CUDA_REL_ATTN_TILES_CUH
#define TXL_KERNELS_CUDA_REL_ATTN_TILES_CUH

#include <stdint.h>

#include "kernels/common/bf16.h"
#include "kernels/common/dropout.h"
#include "kernels/cuda/cuda_util.h"

#define ATTN_THREADS 256     /* 16 x 16 */
#define ATTN_BLOCK_GOAL 256  /* dq kernel: column groups until about this many blocks */
#define ATTN_MAX_GROUPS 8    /* dq kernel: at most this many column groups           */

/* Everything a kernel needs to know about the call (by value). */
struct AttnGeo {
  int L, M, K, B, H, dh;
  int ld;                     /* shared-memory row stride: dh rounded up to odd */
  int col0, same_length, same_shift;
  float scale;
  int dropout;                /* 1 when dropatt applies (p > 0)   */
  uint32_t threshold;         /* txl_dropout_threshold(p)         */
  float dscale;               /* txl_dropout_scale(p)             */
  TxlDropout drop;
};

/* ---- device helpers ---------------------------------------------------------------------- */

static __device__ __forceinline__ int visible_lo(const AttnGeo &g, int i) {
  const int lo = g.same_length ? i - g.same_shift + 1 : 0;
  return lo < 0 ? 0 : lo;
}

static __device__ __forceinline__ uint32_t philox_word(const TxlPhilox4 &w, uint32_t k) {
  return k == 0u ? w.v[0] : k == 1u ? w.v[1] : k == 2u ? w.v[2] : w.v[3];
}

/* km[beta] = dropatt factor (dscale or 0) of (row i, column col0 + c, feature h*K + j + beta),
 * beta < CB: one Philox call per group of 4 features, as dropatt_row of the CPU. */
template <int CB>
static __device__ __forceinline__ void dropatt_factors(float km[CB], const AttnGeo &g, int i,
                                                       int c, int h, int j) {
  const uint32_t row = (uint32_t)i, col = (uint32_t)(g.col0 + c);
  uint32_t f = (uint32_t)h * (uint32_t)g.K + (uint32_t)j;
  TxlPhilox4 w = txl_dropout_words(g.drop, row, col, f);
#pragma unroll
  for (int beta = 0; beta < CB; beta++, f++) {
    if (beta > 0 && (f & 3u) == 0u) w = txl_dropout_words(g.drop, row, col, f);
    km[beta] = (philox_word(w, f & 3u) >> 8) >= g.threshold ? g.dscale : 0.0f;
  }
}

/* dst[r * ld + e] = src[(first + r) * stride + e] (+ bias[e]) for r < nrows, e < dh, widened
 * to float; rows with first + r outside [0, valid_end) are zero. */
template <typename T>
static __device__ void load_rows(float *dst, int ld, const T *src, int64_t stride, int first,
                                 int valid_end, int nrows, int dh, const float *bias) {
  for (int idx = threadIdx.x; idx < nrows * dh; idx += blockDim.x) {
    const int rr = idx / dh, e = idx - rr * dh, x = first + rr;
    float val = 0.0f;
    if (x >= 0 && x < valid_end) {
      val = txl_ld(src + (int64_t)x * stride + e);
      if (bias) val += bias[e];
    }
    dst[rr * ld + e] = val;
  }
}

/* The raw scores of thread (a0 = ty*RA, b0 = tx*CB):
 *   s[alpha][beta] = sum_e qu[a][e] k[b][e] + qv[a][e] r[t][e],  t = b - a + BQ - 1,
 * and with DP also dp[alpha][beta] = sum_e dO[a][e] v[b][e].
 *   sQU, sQV, sDO [BQ][ld]; sK, sV [BK][ld]; sR [BQ+BK-1][ld] */
template <int RA, int CB, int BQ, bool DP>
static __device__ __forceinline__ void tile_scores(float s[RA][CB], float dp[RA][CB],
                                                   const float *sQU, const float *sQV,
                                                   const float *sDO, const float *sK,
                                                   const float *sV, const float *sR, int ld,
                                                   int dh, int a0, int b0) {
#pragma unroll
  for (int alpha = 0; alpha < RA; alpha++)
#pragma unroll
    for (int beta = 0; beta < CB; beta++) {
      s[alpha][beta] = 0.0f;
      if constexpr (DP) dp[alpha][beta] = 0.0f;
    }
  /* row d of rb is t for beta - alpha = d - (RA - 1) */
  const float *rb = sR + (b0 - a0 - (RA - 1) + BQ - 1) * ld;
  for (int e = 0; e < dh; e++) {
    float qu[RA], qv[RA], kk[CB], rr[RA + CB - 1], dO[RA], vv[CB];
#pragma unroll
    for (int alpha = 0; alpha < RA; alpha++) {
      qu[alpha] = sQU[(a0 + alpha) * ld + e];
      qv[alpha] = sQV[(a0 + alpha) * ld + e];
      if constexpr (DP) dO[alpha] = sDO[(a0 + alpha) * ld + e];
    }
#pragma unroll
    for (int beta = 0; beta < CB; beta++) {
      kk[beta] = sK[(b0 + beta) * ld + e];
      if constexpr (DP) vv[beta] = sV[(b0 + beta) * ld + e];
    }
#pragma unroll
    for (int d = 0; d < RA + CB - 1; d++) rr[d] = rb[d * ld + e];
#pragma unroll
    for (int alpha = 0; alpha < RA; alpha++)
#pragma unroll
      for (int beta = 0; beta < CB; beta++) {
        s[alpha][beta] += qu[alpha] * kk[beta] + qv[alpha] * rr[beta - alpha + RA - 1];
        if constexpr (DP) dp[alpha][beta] += dO[alpha] * vv[beta];
      }
  }
}

/* Max / sum over the 16 lanes of a half-warp (xor offsets < 16 stay inside it); all 32 lanes
 * call these. Fixed butterfly order: deterministic. */
static __device__ __forceinline__ float half_warp_max(float x) {
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
static __device__ __forceinline__ float half_warp_sum(float x) {
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}


#endif
