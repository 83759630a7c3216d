/* What the fused relative-attention kernels share (rel_attn_fused.cu, the forward;
 * rel_attn_fused_bwd.cu, the backward): the call's geometry by value, the masks, the dropatt
 * factor of one element (the CPU's and the GEMM route's Philox words), the tile loads into shared
 * memory, the operand type's mma and the device's limits. Private to kernels/cuda; CUDA / C++.
 * The math is rel_attn.cu's file comment: s_ij = scale ((q_i + u) k_j + (q_i + vb) r_p)
 * (+ scale rb[p, h]), p = L-1-i+j, visible for lo(i) <= j <= M + i. */
#ifndef TXL_KERNELS_CUDA_REL_ATTN_TILE_H
#define TXL_KERNELS_CUDA_REL_ATTN_TILE_H

#include <stdint.h>

#include "kernels/common/dropout.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/mma_tile.h"
#include "kernels/ops.h"

/* The call (by value into every kernel). */
struct TxlAttnArgs {
  int L, M, K, B, H, dh, ldq, ldkv, ldr, col0, same_length, same_shift;
  float scale;
  int dropout;        /* 1 when dropatt applies (p > 0) */
  uint32_t threshold; /* txl_dropout_threshold(p)       */
  float dscale;       /* txl_dropout_scale(p)           */
  TxlDropout drop;
};

static inline TxlAttnArgs txl_attn_args(const TxlAttnShape &s, const TxlDropout &drop) {
  TxlAttnArgs a;
  a.L = s.L, a.M = s.M, a.K = s.M + s.L, a.B = s.B, a.H = s.H, a.dh = s.dh;
  a.ldq = s.ldq, a.ldkv = s.ldkv, a.ldr = s.ldr, a.col0 = s.col0;
  a.same_length = s.same_length, a.same_shift = s.same_shift, a.scale = s.scale;
  a.dropout = drop.p > 0.0f;
  a.threshold = txl_dropout_threshold(drop.p);
  a.dscale = txl_dropout_scale(drop.p);
  a.drop = drop;
  return a;
}

/* The head size padded to the kernels' instantiations: 32, 64 or 128. */
static inline int txl_attn_padded_head(int dh) { return dh <= 32 ? 32 : dh <= 64 ? 64 : 128; }

static __device__ __forceinline__ int txl_attn_imin(int x, int y) { return x < y ? x : y; }
static __device__ __forceinline__ int txl_attn_imax(int x, int y) { return x > y ? x : y; }

/* lo(i): the first key query i sees. */
static __device__ __forceinline__ int txl_attn_first_key(const TxlAttnArgs &a, int i) {
  const int lo = a.same_length ? i - a.same_shift + 1 : 0;
  return lo < 0 ? 0 : lo;
}

/* Query i (of the L) sees key j: lo(i) <= j <= M + i (and j < K follows). */
static __device__ __forceinline__ bool txl_attn_visible(const TxlAttnArgs &a, int i, int j) {
  return i >= 0 && i < a.L && j >= txl_attn_first_key(a, i) && j <= a.M + i;
}

/* The dropatt factor (dscale or 0) of row i, column c of the call, head h, key j: feature h K + j
 * of the Philox words of (i, col0 + c), as the CPU and the GEMM route draw them. */
static __device__ __forceinline__ float txl_attn_drop_factor(const TxlAttnArgs &a, int i, int c, int h, int j) {
  const uint32_t f = (uint32_t)h * (uint32_t)a.K + (uint32_t)j;
  const TxlPhilox4 w = txl_dropout_words(a.drop, (uint32_t)i, (uint32_t)(a.col0 + c), f);
  const uint32_t k = f & 3u; /* selected, not indexed: an indexed word would live in local memory */
  const uint32_t word = k == 0 ? w.v[0] : k == 1 ? w.v[1] : k == 2 ? w.v[2] : w.v[3];
  return (word >> 8) >= a.threshold ? a.dscale : 0.0f;
}

/* The 16-bit storage type's mma (kernels/cuda/mma_tile.h). */
template <typename T> struct TxlMmaOf;
template <> struct TxlMmaOf<txl_bf16> { using M = TxlMmaBf16; };
template <> struct TxlMmaOf<txl_fp16> { using M = TxlMmaF16; };

/* Rows [0, n) of an [n][DT + 8] tile of 16-bit bits from rows row0 + x of src (the x-th row at
 * src + x * stride): the row's dh features plus bias, rounded to the operand type once; zeros where
 * the row is outside [0, limit) or the feature past dh. All threads of the block. */
template <typename T, typename MM, int DT>
static __device__ void txl_attn_load_tile(uint16_t *dst, int n, const T *src, int64_t stride, int row0, int limit,
                                          const float *bias, int dh) {
  constexpr int LD = DT + 8;
  for (int t = (int)threadIdx.x; t < n * DT; t += (int)blockDim.x) {
    const int x = t / DT, e = t % DT, row = row0 + x;
    float v = 0.0f;
    if (e < dh && row >= 0 && row < limit) {
      v = txl_ld(src + (int64_t)row * stride + e);
      if (bias) v += bias[e];
    }
    dst[x * LD + e] = (uint16_t)MM::bits(v);
  }
}

/* The device's major compute capability and opt-in shared memory per block, asked once (one device
 * per process). */
struct TxlAttnDevice {
  int major, optin;
};

static inline TxlAttnDevice txl_attn_device(void) {
  static TxlAttnDevice d = {-1, 0};
  if (d.major < 0) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    d.major = p.major;
    d.optin = (int)p.sharedMemPerBlockOptin;
  }
  return d;
}

#endif
