/* Warp-level tiles on the 16-bit tensor-core shape m16n8k16 (bf16 or f16 operands, fp32
 * accumulators), built from kernels/cuda/ptx.h: the operand loads from shared memory by
 * ldmatrix, and the reuse of an accumulator tile as the next product's A operand (how a fused
 * attention multiplies its probabilities by V without leaving registers). Private to
 * kernels/cuda; CUDA / C++ only. Shared-memory tiles are row-major with `ld` elements between
 * rows, rows 16-byte aligned (ld a multiple of 8; tile corners at multiples of 8 columns).
 *
 * Which ldmatrix gives which fragment (lane L; ptx.h has the fragment layouts):
 *   A 16x16 of a row-major [m][k] tile: .x4, lane L addresses row L % 16 at column 8 (L / 16):
 *     the four 8x8 matrices are then rows 0-7 / 8-15 of columns 0-7, then of columns 8-15, which
 *     are A's registers 0, 1, 2, 3.
 *   B k16 x n8 (two of them: n16) of a [n][k] tile (B = X^T, X's rows are B's columns: K of
 *     Q K^T): .x4, lane L addresses row n0 + (L % 8) + 8 (L / 16) at column k0 + 8 ((L / 8) % 2):
 *     registers 0, 1 are the first n8's b[0], b[1], registers 2, 3 the second's.
 *   B k16 x n8 (two of them: n16) of a [k][n] tile (V of P V): .x4.trans, lane L addresses row
 *     k0 + (L % 8) + 8 ((L / 8) % 2) at column n0 + 8 (L / 16): the same registers. */
#ifndef TXL_KERNELS_CUDA_MMA_TILE_H
#define TXL_KERNELS_CUDA_MMA_TILE_H

#include <stdint.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/ptx.h"

/* The 16-bit operand types: their bits (and a value from them) and their mma. */
struct TxlMmaBf16 {
  static __device__ __forceinline__ uint32_t bits(float x) { return (uint32_t)txl_bf16_from_float(x); }
  static __device__ __forceinline__ float value(uint16_t b) { return txl_bf16_to_float(b); }
  static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    txl_mma_bf16_m16n8k16(d, a, b, c);
  }
};
struct TxlMmaF16 {
  static __device__ __forceinline__ uint32_t bits(float x) { return (uint32_t)txl_fp16_from_float(x).bits; }
  static __device__ __forceinline__ float value(uint16_t b) {
    txl_fp16 h;
    h.bits = b;
    return txl_fp16_to_float(h);
  }
  static __device__ __forceinline__ void mma(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
    txl_mma_f16_m16n8k16(d, a, b, c);
  }
};

/* a[4]: the A fragment of tile[0..16) x [0..16) of a row-major tile (16-bit elements). */
static __device__ __forceinline__ void txl_tile_load_a(uint32_t a[4], const uint16_t *tile, int ld) {
  const int lane = (int)(threadIdx.x % 32);
  txl_ldmatrix_x4(a, tile + (lane % 16) * ld + 8 * (lane / 16));
}

/* a[4]: the A fragment of A[m][k] = x[k][m], m and k in [0, 16), of a row-major [k][m] tile x
 * (A the transpose of what is stored: a backward's dS^T). .x4.trans, lane L addresses row
 * (L % 8) + 8 (L / 16) at column 8 ((L / 8) % 2): matrix r is x's block (rows 8 (r / 2), columns
 * 8 (r % 2)), transposed: A's block (rows 8 (r % 2), columns 8 (r / 2)), register r. */
static __device__ __forceinline__ void txl_tile_load_a_t(uint32_t a[4], const uint16_t *x, int ld) {
  const int lane = (int)(threadIdx.x % 32);
  txl_ldmatrix_x4_trans(a, x + (lane % 8 + 8 * (lane / 16)) * ld + 8 * ((lane / 8) % 2));
}

/* b[2][2]: the B fragments of two n8 tiles, B[k][n] = x[n][k] for n in [0, 16), k in [0, 16), of
 * a row-major [n][k] tile x. */
static __device__ __forceinline__ void txl_tile_load_b_nk(uint32_t b[2][2], const uint16_t *x, int ld) {
  const int lane = (int)(threadIdx.x % 32);
  uint32_t r[4];
  txl_ldmatrix_x4(r, x + (lane % 8 + 8 * (lane / 16)) * ld + 8 * ((lane / 8) % 2));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

/* b[2][2]: the B fragments of two n8 tiles, B[k][n] = x[k][n] for k in [0, 16), n in [0, 16), of
 * a row-major [k][n] tile x. */
static __device__ __forceinline__ void txl_tile_load_b_kn(uint32_t b[2][2], const uint16_t *x, int ld) {
  const int lane = (int)(threadIdx.x % 32);
  uint32_t r[4];
  txl_ldmatrix_x4_trans(r, x + (lane % 8 + 8 * ((lane / 8) % 2)) * ld + 8 * (lane / 16));
  b[0][0] = r[0], b[0][1] = r[1], b[1][0] = r[2], b[1][1] = r[3];
}

/* c[16][N] = A B^T for a row-major [16][K] tile a and a row-major [N][K] tile b (N a multiple
 * of 16, K of 16): the warp's one product of the Q K^T kind, c as N / 8 accumulator tiles. */
template <class MM, int N, int K>
static __device__ __forceinline__ void txl_tile_mma_abt(float c[N / 8][4], const uint16_t *a, int lda,
                                                        const uint16_t *b, int ldb) {
  static_assert(N % 16 == 0 && K % 16 == 0, "whole m16n8k16 pairs");
  #pragma unroll
  for (int n = 0; n < N / 8; n++) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
  #pragma unroll
  for (int kk = 0; kk < K / 16; kk++) {
    uint32_t af[4];
    txl_tile_load_a(af, a + 16 * kk, lda);
    #pragma unroll
    for (int np = 0; np < N / 16; np++) {
      uint32_t bf[2][2];
      txl_tile_load_b_nk(bf, b + 16 * np * ldb + 16 * kk, ldb);
      MM::mma(c[2 * np], af, bf[0], c[2 * np]);
      MM::mma(c[2 * np + 1], af, bf[1], c[2 * np + 1]);
    }
  }
}

/* c[16][N] += A B for one k16 step: A's fragment a (16 x 16), B rows [0, 16) of a row-major [k][n]
 * tile b with N columns (N a multiple of 16; V of P V, K of dS K), by ldmatrix .trans. */
template <class MM, int N>
static __device__ __forceinline__ void txl_tile_mma_kn(float c[N / 8][4], const uint32_t a[4], const uint16_t *b,
                                                       int ldb) {
  static_assert(N % 16 == 0, "whole m16n8k16 pairs");
  #pragma unroll
  for (int np = 0; np < N / 16; np++) {
    uint32_t bf[2][2];
    txl_tile_load_b_kn(bf, b + 16 * np, ldb);
    MM::mma(c[2 * np], a, bf[0], c[2 * np]);
    MM::mma(c[2 * np + 1], a, bf[1], c[2 * np + 1]);
  }
}

/* The A fragment (k16) of two n8 accumulator tiles side by side, c0 (columns 0-7) and c1
 * (columns 8-15), rounded to the operand type T: the C/D layout of m16n8 puts (row g, columns
 * 2t, 2t + 1) in c[0], c[1] and (row g + 8, ...) in c[2], c[3], which is A's layout of
 * registers 0 and 1 for c0 and of 2 and 3 for c1. */
template <class T>
static __device__ __forceinline__ void txl_tile_c_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
  a[0] = T::bits(c0[0]) | T::bits(c0[1]) << 16;
  a[1] = T::bits(c0[2]) | T::bits(c0[3]) << 16;
  a[2] = T::bits(c1[0]) | T::bits(c1[1]) << 16;
  a[3] = T::bits(c1[2]) | T::bits(c1[3]) << 16;
}

#endif
