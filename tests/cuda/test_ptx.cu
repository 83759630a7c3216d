/* The instructions of kernels/cuda/ptx.h against plain loops, one warp at a time: the same source
 * on a GPU (test_cuda_ptx, label cuda: the device's own fragment layouts, which the emulator's
 * model must equal) and on the CPU emulator (test_cuda_ptx_emu, label cuda-emu, under each
 * architecture and both thread orders).
 *   - mma.sync, each shape and type: fragments built from matrices by ptx.h's layouts, D
 *     gathered by the C/D layout, against a double loop: bit for bit on small integers / 8 (every
 *     product and partial sum exact in fp32, so any summation order gives the same bits), and
 *     within the bound of fp32 accumulation on random operands; and a deliberately wrong A layout
 *     (the rows of two registers swapped) that must not match (the check can fail);
 *   - ldmatrix x1, x2, x4, plain and .trans, rows 32 bytes apart, every lane's registers against
 *     the layout (and .trans's against the plain layout: must differ);
 *   - kernels/cuda/mma_tile.h's tiles, composed as a fused attention composes them: S = Q K^T
 *     (A by ldmatrix, B from K's rows), then O = S V with S's accumulators reused as the A
 *     operand and V's B fragments by ldmatrix .trans, bf16 and f16, bit for bit on exact values;
 *   - cp.async of 16, 8 and 4 bytes, partial sources zero-filled, three groups: wait_group 2
 *     completes the first only, wait_group 0 all; on the emulator the others' destinations are
 *     still NaN bytes in between;
 *   - on the emulator, each misuse ends a child process naming it: a tf32 operand not rounded,
 *     copies never waited for, a misaligned or global-memory ldmatrix row, a cp.async into global
 *     memory, lanes at different warp instructions, and (sm_75) an sm_80 instruction.
 * Prints one line per check; exits 1 if any failed, 77 (skipped) without a device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/mma_tile.h"
#include "kernels/cuda/ptx.h"
#include "tests/cuda/emu/selftest.h"

/* ---- mma.sync ---------------------------------------------------------------------------------- */
enum Shape { BF16_16816, F16_16816, TF32_1688, F16_1688 };
static const char *const kShapeName[] = {"m16n8k16 bf16", "m16n8k16 f16", "m16n8k8 tf32", "m16n8k8 f16"};
static __host__ __device__ int shape_k(int s) { return s == BF16_16816 || s == F16_16816 ? 16 : 8; }
static int shape_sm(int s) { return s == F16_1688 ? 75 : 80; }

/* The (row, column) of A's element i held by lane (g, t) (ptx.h's table); wrong: the rows of two
 * registers swapped, a plausible mistake that the check must catch. */
static __device__ void a_pos(int s, int g, int t, int i, bool wrong, int *row, int *col) {
  if (s == BF16_16816 || s == F16_16816) {
    *row = g + 8 * (wrong ? i % 2 : (i / 2) % 2);
    *col = 2 * t + i % 2 + 8 * (i / 4);
  } else if (s == TF32_1688) {
    *row = g + 8 * (wrong ? i / 2 : i % 2);
    *col = t + 4 * (i / 2);
  } else {
    *row = g + 8 * (wrong ? i % 2 : i / 2);
    *col = 2 * t + i % 2;
  }
}
static __device__ void b_pos(int s, int g, int t, int j, int *row, int *col) {
  *col = g;
  if (s == BF16_16816 || s == F16_16816) *row = 2 * t + j % 2 + 8 * (j / 2);
  else if (s == TF32_1688) *row = t + 4 * j;
  else *row = 2 * t + j;
}

/* element x as the operand's 16 bits (bf16 or f16) */
static __device__ uint32_t half_bits(int s, float x) {
  return s == BF16_16816 ? (uint32_t)txl_bf16_from_float(x) : (uint32_t)txl_fp16_from_float(x).bits;
}

/* One warp: D [16][8] = A [16][k] B [k][8] + C, all row-major fp32 (the operands already hold
 * values of the operand type), through the fragments. */
static __global__ void mma_kernel(int s, bool wrong, const float *A, const float *B, const float *C, float *D) {
  const int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4, k = shape_k(s);
  uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  const int na = s == F16_1688 ? 4 : s == TF32_1688 ? 4 : 8, nb = s == F16_1688 ? 2 : s == TF32_1688 ? 2 : 4;
  for (int i = 0; i < na; i++) {
    int r, c;
    a_pos(s, g, t, i, wrong, &r, &c);
    const float x = A[r * k + c];
    if (s == TF32_1688) a[i] = txl_tf32_from_float(x);
    else a[i / 2] |= half_bits(s, x) << (16 * (i % 2));
  }
  for (int j = 0; j < nb; j++) {
    int r, c;
    b_pos(s, g, t, j, &r, &c);
    const float x = B[r * 8 + c];
    if (s == TF32_1688) b[j] = txl_tf32_from_float(x);
    else b[j / 2] |= half_bits(s, x) << (16 * (j % 2));
  }
  float cf[4], d[4];
  for (int i = 0; i < 4; i++) cf[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  if (s == BF16_16816) txl_mma_bf16_m16n8k16(d, a, b, cf);
  else if (s == F16_16816) txl_mma_f16_m16n8k16(d, a, b, cf);
  else if (s == TF32_1688) txl_mma_tf32_m16n8k8(d, a, b, cf);
  else txl_mma_f16_m16n8k8(d, a, b, cf);
  for (int i = 0; i < 4; i++) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* [0, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}

static float *dev_alloc(size_t n) {
  float *p;
  CUDA_CHECK(cudaMalloc(&p, n * sizeof *p));
  return p;
}

/* x in (-1, 1) made a value of the operand type: what the fragment will hold (for tf32 a
 * multiple of 2^-10: at most 10 significant bits of its 11) */
static float operand_value(int s, float x) {
  if (s == BF16_16816) return txl_bf16_round(x);
  if (s == TF32_1688) return roundf(x * 1024.0f) / 1024.0f;
  return txl_fp16_round(x);
}

/* Runs the shape on A, B, C; returns how many elements of D are off the double loop by more
 * than tol_ulps * 2^-24 * (|c| + sum |a b|) (0: bit for bit). */
static int mma_mismatches(int s, bool wrong, const float *A, const float *B, const float *C, double rel_tol,
                          double *worst) {
  const int k = shape_k(s);
  float *dA = dev_alloc(16 * 16), *dB = dev_alloc(16 * 8), *dC = dev_alloc(16 * 8), *dD = dev_alloc(16 * 8);
  CUDA_CHECK(cudaMemcpy(dA, A, (size_t)(16 * k) * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dB, B, (size_t)(k * 8) * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dC, C, 16 * 8 * sizeof(float), cudaMemcpyHostToDevice));
  TXL_LAUNCH(mma_kernel, 1, 32, 0)(s, wrong, dA, dB, dC, dD);
  CUDA_LAUNCH_CHECK();
  float D[16 * 8];
  CUDA_CHECK(cudaMemcpy(D, dD, sizeof D, cudaMemcpyDeviceToHost));
  int bad = 0;
  *worst = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      double sum = C[r * 8 + c], mag = fabs((double)C[r * 8 + c]);
      for (int j = 0; j < k; j++) {
        sum += (double)A[r * k + j] * (double)B[j * 8 + c];
        mag += fabs((double)A[r * k + j] * (double)B[j * 8 + c]);
      }
      const double err = fabs((double)D[r * 8 + c] - sum), bound = rel_tol * mag;
      if (!(err <= bound)) bad++; /* a NaN is a mismatch */
      if (mag > 0 && err / mag > *worst) *worst = err / mag;
    }
  CUDA_CHECK(cudaFree(dA));
  CUDA_CHECK(cudaFree(dB));
  CUDA_CHECK(cudaFree(dC));
  CUDA_CHECK(cudaFree(dD));
  return bad;
}

static void test_mma(int s) {
  const int k = shape_k(s);
  float A[16 * 16], B[16 * 8], C[16 * 8];
  /* small integers / 8 (in every operand type exactly): products are multiples of 1/64 of at most
   * 1 in size, a sum of up to 17 terms needs 11 bits: every partial sum is exact in fp32 */
  for (int i = 0; i < 16 * k; i++) A[i] = (float)((int)(uniform() * 17) - 8) / 8.0f;
  for (int i = 0; i < k * 8; i++) B[i] = (float)((int)(uniform() * 17) - 8) / 8.0f;
  for (int i = 0; i < 16 * 8; i++) C[i] = (float)((int)(uniform() * 17) - 8) / 8.0f;
  double worst;
  int bad = mma_mismatches(s, false, A, B, C, 0.0, &worst);
  check(bad == 0, "mma.sync %s: D = A B + C on small integers / 8, bit for bit: %d of 128 differ", kShapeName[s],
        bad);
  bad = mma_mismatches(s, true, A, B, C, 0.0, &worst);
  check(bad > 0, "mma.sync %s with a wrong A layout (two registers' rows swapped): %d of 128 differ (must be some)",
        kShapeName[s], bad);
  /* random operands of the operand type, random C: the device accumulates in fp32 in an order
   * it does not document, each of the k additions rounding (or truncating: 2^-23) the partial
   * sum, whose size is at most |c| + sum |a b|: |error| <= (k + 1) 2^-23 (|c| + sum |a b|) */
  for (int i = 0; i < 16 * k; i++) A[i] = operand_value(s, (float)(2 * uniform() - 1));
  for (int i = 0; i < k * 8; i++) B[i] = operand_value(s, (float)(2 * uniform() - 1));
  for (int i = 0; i < 16 * 8; i++) C[i] = (float)(2 * uniform() - 1);
  const double tol = (k + 1) * ldexp(1.0, -23);
  bad = mma_mismatches(s, false, A, B, C, tol, &worst);
  check(bad == 0, "mma.sync %s on random operands: %d of 128 beyond (k + 1) 2^-23 (|c| + sum |ab|), worst %.2e",
        kShapeName[s], bad, worst);
}

/* ---- ldmatrix ---------------------------------------------------------------------------------- */
enum { LD_ROW_BYTES = 32 }; /* rows 32 bytes apart: not contiguous, as the instruction allows */

/* value of matrix m, row r, column c */
static __host__ __device__ uint16_t ld_value(int m, int r, int c) { return (uint16_t)(1 + 64 * m + 8 * r + c); }

/* lane L's registers out [L][4] after ldmatrix .x<n> (trans: .trans) of the matrices ld_value */
static __global__ void ldmatrix_kernel(int n, int trans, uint32_t *out) {
  TXL_DYNAMIC_SHARED(unsigned char, sm);
  const int lane = (int)threadIdx.x;
  for (int row = lane; row < 32; row += 32) /* matrix row / 8, row row % 8: 8 values, then padding */
    for (int c = 0; c < 8; c++) {
      const uint16_t v = ld_value(row / 8, row % 8, c);
      memcpy(sm + row * LD_ROW_BYTES + 2 * c, &v, sizeof v);
    }
  __syncthreads();
  /* every lane holds a valid address (sm_75 reads them all): lanes past 8 n repeat the first ones */
  const int m = (lane / 8) % n, j = lane % 8;
  const void *row = sm + (8 * m + j) * LD_ROW_BYTES;
  uint32_t r[4] = {0, 0, 0, 0};
  if (n == 1) trans ? txl_ldmatrix_x1_trans(r, row) : txl_ldmatrix_x1(r, row);
  else if (n == 2) trans ? txl_ldmatrix_x2_trans(r, row) : txl_ldmatrix_x2(r, row);
  else trans ? txl_ldmatrix_x4_trans(r, row) : txl_ldmatrix_x4(r, row);
  for (int i = 0; i < 4; i++) out[lane * 4 + i] = r[i];
}

/* what lane L's register m holds: plain (trans 0) or transposed */
static uint32_t ld_expected(int trans, int lane, int m) {
  const int a = lane / 4, b = 2 * (lane % 4);
  const uint16_t lo = trans ? ld_value(m, b, a) : ld_value(m, a, b);
  const uint16_t hi = trans ? ld_value(m, b + 1, a) : ld_value(m, a, b + 1);
  return (uint32_t)lo | (uint32_t)hi << 16;
}

static void test_ldmatrix(void) {
  uint32_t *d;
  CUDA_CHECK(cudaMalloc(&d, 32 * 4 * sizeof *d));
  for (int n = 1; n <= 4; n *= 2)
    for (int trans = 0; trans < 2; trans++) {
      CUDA_CHECK(cudaMemset(d, 0, 32 * 4 * sizeof *d));
      TXL_LAUNCH(ldmatrix_kernel, 1, 32, 32 * LD_ROW_BYTES)(n, trans, d);
      CUDA_LAUNCH_CHECK();
      uint32_t out[32 * 4];
      CUDA_CHECK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
      int bad = 0, other = 0;
      for (int lane = 0; lane < 32; lane++)
        for (int m = 0; m < n; m++) {
          bad += out[lane * 4 + m] != ld_expected(trans, lane, m);
          other += out[lane * 4 + m] != ld_expected(!trans, lane, m);
        }
      check(bad == 0 && other > 0, "ldmatrix.x%d%s: %d of %d registers off the layout (%d off the %s one: must be some)",
            n, trans ? ".trans" : "", bad, 32 * n, other, trans ? "plain" : "transposed");
    }
  CUDA_CHECK(cudaFree(d));
}

/* ---- mma_tile.h: S = Q K^T, O = S V --------------------------------------------------------- */
enum { TQ_LD = 40, TV_LD = 24 }; /* row pitches (elements) of the Q and K tiles and of V: padded */

/* One warp: Q, K [16][32] and V [16][16] (16-bit bits, row-major) copied into the dynamic shared
 * memory, S [16][16] = Q K^T and O [16][16] = T(S) V out (fp32, row-major). */
template <class T>
static __global__ void tile_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, float *S, float *O,
                                   float *U) {
  TXL_DYNAMIC_SHARED(uint16_t, sm);
  uint16_t *sq = sm, *sk = sm + 16 * TQ_LD, *sv = sm + 32 * TQ_LD;
  const int lane = (int)threadIdx.x, g = lane / 4, t = lane % 4;
  for (int i = lane; i < 16 * 32; i += 32) {
    sq[(i / 32) * TQ_LD + i % 32] = q[i];
    sk[(i / 32) * TQ_LD + i % 32] = k[i];
  }
  for (int i = lane; i < 16 * 16; i += 32) sv[(i / 16) * TV_LD + i % 16] = v[i];
  __syncthreads();
  float s0[4] = {0, 0, 0, 0}, s1[4] = {0, 0, 0, 0};
  for (int kk = 0; kk < 32; kk += 16) {
    uint32_t a[4], b[2][2];
    txl_tile_load_a(a, sq + kk, TQ_LD);
    txl_tile_load_b_nk(b, sk + kk, TQ_LD);
    T::mma(s0, a, b[0], s0);
    T::mma(s1, a, b[1], s1);
  }
  uint32_t p[4], b[2][2];
  txl_tile_c_to_a<T>(p, s0, s1);
  txl_tile_load_b_kn(b, sv, TV_LD);
  const float zero[4] = {0, 0, 0, 0};
  float o0[4], o1[4];
  T::mma(o0, p, b[0], zero);
  T::mma(o1, p, b[1], zero);
  /* U = Q[:, 0:16]^T V: A from the transposed storage (txl_tile_load_a_t) */
  uint32_t qt[4];
  txl_tile_load_a_t(qt, sq, TQ_LD);
  float u0[4], u1[4];
  T::mma(u0, qt, b[0], zero);
  T::mma(u1, qt, b[1], zero);
  for (int i = 0; i < 4; i++) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    S[row * 16 + col] = s0[i], S[row * 16 + col + 8] = s1[i];
    O[row * 16 + col] = o0[i], O[row * 16 + col + 8] = o1[i];
    U[row * 16 + col] = u0[i], U[row * 16 + col + 8] = u1[i];
  }
}

static uint16_t bits16(bool bf16, float x) { return bf16 ? txl_bf16_from_float(x) : txl_fp16_from_float(x).bits; }

static void test_tiles(bool bf16) {
  /* Q, K in {-1/2, 0, 1/2}: S = n / 4 with |n| <= 32, exact in fp32 and in both 16-bit types;
   * V in integers / 8: O a multiple of 1/32 of at most 128 in size, exact in fp32 */
  float q[16 * 32], k[16 * 32], v[16 * 16];
  uint16_t hq[16 * 32], hk[16 * 32], hv[16 * 16];
  for (int i = 0; i < 16 * 32; i++) {
    q[i] = (float)((int)(uniform() * 3) - 1) / 2.0f, hq[i] = bits16(bf16, q[i]);
    k[i] = (float)((int)(uniform() * 3) - 1) / 2.0f, hk[i] = bits16(bf16, k[i]);
  }
  for (int i = 0; i < 16 * 16; i++) v[i] = (float)((int)(uniform() * 17) - 8) / 8.0f, hv[i] = bits16(bf16, v[i]);
  uint16_t *dq, *dk, *dv;
  CUDA_CHECK(cudaMalloc(&dq, sizeof hq));
  CUDA_CHECK(cudaMalloc(&dk, sizeof hk));
  CUDA_CHECK(cudaMalloc(&dv, sizeof hv));
  float *dS = dev_alloc(256), *dO = dev_alloc(256), *dU = dev_alloc(256);
  CUDA_CHECK(cudaMemcpy(dq, hq, sizeof hq, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dk, hk, sizeof hk, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dv, hv, sizeof hv, cudaMemcpyHostToDevice));
  const size_t shared = (32 * TQ_LD + 16 * TV_LD) * sizeof(uint16_t);
  if (bf16) {
    auto kern = tile_kernel<TxlMmaBf16>;
    TXL_LAUNCH(kern, 1, 32, shared)(dq, dk, dv, dS, dO, dU);
  } else {
    auto kern = tile_kernel<TxlMmaF16>;
    TXL_LAUNCH(kern, 1, 32, shared)(dq, dk, dv, dS, dO, dU);
  }
  CUDA_LAUNCH_CHECK();
  float S[256], O[256], U[256];
  CUDA_CHECK(cudaMemcpy(S, dS, sizeof S, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(O, dO, sizeof O, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(U, dU, sizeof U, cudaMemcpyDeviceToHost));
  int bad_s = 0, bad_o = 0, bad_u = 0;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      double sij = 0, oij = 0;
      for (int e = 0; e < 32; e++) sij += (double)q[i * 32 + e] * k[j * 32 + e];
      bad_s += S[i * 16 + j] != (float)sij;
      for (int x = 0; x < 16; x++) {
        double sx = 0;
        for (int e = 0; e < 32; e++) sx += (double)q[i * 32 + e] * k[x * 32 + e];
        oij += sx * v[x * 16 + j];
      }
      bad_o += O[i * 16 + j] != (float)oij;
      double uij = 0; /* sums of 16 products of halves and eighths: exact */
      for (int x = 0; x < 16; x++) uij += (double)q[x * 32 + i] * v[x * 16 + j];
      bad_u += U[i * 16 + j] != (float)uij;
    }
  check(bad_s == 0 && bad_o == 0 && bad_u == 0,
        "mma_tile.h (%s): S = Q K^T (ldmatrix A, B from K's rows) %d of 256 wrong; "
        "O = S V (S's accumulators as A, V by ldmatrix .trans) %d of 256 wrong; "
        "U = Q^T V (A by ldmatrix .trans of Q's rows) %d of 256 wrong", bf16 ? "bf16" : "f16", bad_s, bad_o, bad_u);
  CUDA_CHECK(cudaFree(dq));
  CUDA_CHECK(cudaFree(dk));
  CUDA_CHECK(cudaFree(dv));
  CUDA_CHECK(cudaFree(dS));
  CUDA_CHECK(cudaFree(dO));
  CUDA_CHECK(cudaFree(dU));
}

/* ---- cp.async ---------------------------------------------------------------------------------- */
enum { CP_FLOATS = 224 }; /* [0, 128) 16-byte copies, [128, 192) 8-byte, [192, 224) 4-byte */

static __global__ void cp_async_kernel(const float *src, uint32_t *early, uint32_t *final_) {
  TXL_DYNAMIC_SHARED(float, sm);
  const int t = (int)threadIdx.x; /* 32 threads */
  txl_cp_async(sm + 4 * t, src + 4 * t, 16, 16);                    /* group 0 */
  txl_cp_async_commit();
  txl_cp_async(sm + 128 + 2 * t, src + 128 + 2 * t, 8, 4);          /* group 1: the second float zeroed */
  txl_cp_async_commit();
  txl_cp_async(sm + 192 + t, src + 192 + t, 4, t % 2 ? 0 : 4);      /* group 2: odd threads read nothing */
  txl_cp_async_commit();
  txl_cp_async_wait<2>(); /* group 0 complete, in every thread after the barrier */
  __syncthreads();
  for (int i = t; i < 128; i += 32) memcpy(&early[i], &sm[i], 4);
#ifdef TXL_CUDA_EMU
  /* the emulator's model: the later groups' destinations are NaN bytes until their wait (on a
   * GPU reading them here would be a race). Each thread reads only its own copies' destinations:
   * another thread's may already have passed its own wait_group 0 */
  memcpy(&early[128 + 2 * t], &sm[128 + 2 * t], 8);
  memcpy(&early[192 + t], &sm[192 + t], 4);
#endif
  txl_cp_async_wait<0>();
  __syncthreads();
  for (int i = t; i < CP_FLOATS; i += 32) memcpy(&final_[i], &sm[i], 4);
}

static void test_cp_async(void) {
  float src[CP_FLOATS];
  for (int i = 0; i < CP_FLOATS; i++) src[i] = 1.0f + (float)i;
  float *dsrc = dev_alloc(CP_FLOATS);
  uint32_t *de, *df;
  CUDA_CHECK(cudaMalloc(&de, CP_FLOATS * sizeof *de));
  CUDA_CHECK(cudaMalloc(&df, CP_FLOATS * sizeof *df));
  CUDA_CHECK(cudaMemcpy(dsrc, src, sizeof src, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(de, 0, CP_FLOATS * sizeof *de));
  TXL_LAUNCH(cp_async_kernel, 1, 32, CP_FLOATS * sizeof(float))(dsrc, de, df);
  CUDA_LAUNCH_CHECK();
  uint32_t early[CP_FLOATS], fin[CP_FLOATS];
  CUDA_CHECK(cudaMemcpy(early, de, sizeof early, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(fin, df, sizeof fin, cudaMemcpyDeviceToHost));
  int bad0 = 0, bad = 0, poisoned = 0;
  for (int i = 0; i < 128; i++) {
    float e;
    memcpy(&e, &early[i], 4);
    bad0 += e != src[i];
  }
  for (int i = 0; i < CP_FLOATS; i++) {
    float want = src[i];
    if (i >= 128 && i < 192 && (i - 128) % 2 == 1) want = 0.0f;  /* past the 4 bytes read */
    if (i >= 192 && (i - 192) % 2 == 1) want = 0.0f;             /* 0 bytes read */
    float f;
    memcpy(&f, &fin[i], 4);
    bad += f != want || (want == 0.0f && fin[i] != 0);
    if (i >= 128) poisoned += early[i] == 0xffffffffu;
  }
  check(bad0 == 0, "cp.async: wait_group 2 completes the first of three groups (16-byte copies): %d of 128 wrong",
        bad0);
  check(bad == 0, "cp.async: wait_group 0 completes all: 16, 8 and 4 bytes, partial sources zero-filled: %d of %d "
        "wrong", bad, (int)CP_FLOATS);
#ifdef TXL_CUDA_EMU
  check(poisoned == CP_FLOATS - 128, "cp.async on the emulator: the later groups' destinations are NaN bytes until "
        "their wait: %d of %d", poisoned, (int)CP_FLOATS - 128);
#else
  (void)poisoned;
#endif
  CUDA_CHECK(cudaFree(dsrc));
  CUDA_CHECK(cudaFree(de));
  CUDA_CHECK(cudaFree(df));
}

/* ---- misuse, on the emulator --------------------------------------------------------------------- */
#ifdef TXL_CUDA_EMU
static float *g_dev;

static __global__ void tf32_unrounded_kernel(float *out) {
  const uint32_t a[4] = {0x3f800001u, 0, 0, 0}, b[2] = {0, 0}; /* 1 + 2^-23: not a tf32 */
  const float c[4] = {0, 0, 0, 0};
  float d[4];
  txl_mma_tf32_m16n8k8(d, a, b, c);
  out[threadIdx.x] = d[0];
}
static __global__ void not_waited_kernel(const float *src) {
  TXL_DYNAMIC_SHARED(float, sm);
  txl_cp_async(sm + 4 * threadIdx.x, src + 4 * threadIdx.x, 16, 16);
  txl_cp_async_commit();
}
static __global__ void ldmatrix_row_kernel(int misaligned, const float *global) {
  TXL_DYNAMIC_SHARED(unsigned char, sm);
  uint32_t r[1];
  txl_ldmatrix_x1(r, misaligned ? (const void *)(sm + 8 + 16 * (threadIdx.x % 8)) : (const void *)global);
  (void)r;
}
static __global__ void cp_to_global_kernel(float *dst) {
  txl_cp_async(dst + 4 * threadIdx.x, dst + 64 + 4 * threadIdx.x, 16, 16);
  txl_cp_async_wait<0>();
}
static __global__ void divergent_kernel(float *out) {
  TXL_DYNAMIC_SHARED(unsigned char, sm);
  const uint32_t a[2] = {0, 0}, b[1] = {0};
  const float c[4] = {0, 0, 0, 0};
  float d[4] = {0, 0, 0, 0};
  uint32_t r[1] = {0};
  if (threadIdx.x < 16) txl_mma_f16_m16n8k8(d, a, b, c);
  else txl_ldmatrix_x1(r, sm + 16 * (threadIdx.x % 8));
  out[threadIdx.x] = d[0] + (float)r[0];
}
static __global__ void bf16_kernel(float *out) {
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  const float c[4] = {0, 0, 0, 0};
  float d[4];
  txl_mma_bf16_m16n8k16(d, a, b, c);
  out[threadIdx.x] = d[0];
}
static void run_tf32_unrounded(void) { TXL_LAUNCH(tf32_unrounded_kernel, 1, 32, 0)(g_dev); }
static void run_not_waited(void) { TXL_LAUNCH(not_waited_kernel, 1, 32, 512)(g_dev); }
static void run_ldmatrix_misaligned(void) { TXL_LAUNCH(ldmatrix_row_kernel, 1, 32, 512)(1, g_dev); }
static void run_ldmatrix_global(void) { TXL_LAUNCH(ldmatrix_row_kernel, 1, 32, 512)(0, g_dev); }
static void run_cp_to_global(void) { TXL_LAUNCH(cp_to_global_kernel, 1, 32, 0)(g_dev); }
static void run_divergent(void) { TXL_LAUNCH(divergent_kernel, 1, 32, 512)(g_dev); }
static void run_bf16(void) { TXL_LAUNCH(bf16_kernel, 1, 32, 0)(g_dev); }

static void test_misuse(int sm) {
  g_dev = dev_alloc(1024);
  if (sm >= 80) {
    expect_fatal("mma.sync tf32 with an operand not rounded to tf32", run_tf32_unrounded, "tf32_unrounded_kernel",
                 "not a tf32");
    expect_fatal("cp.async copies never waited for", run_not_waited, "not_waited_kernel", "not waited for");
    expect_fatal("cp.async into global memory", run_cp_to_global, "cp_to_global_kernel",
                 "destination is not 16 bytes inside the launch's dynamic shared memory");
  } else {
    expect_fatal("mma.sync m16n8k16 bf16 on sm_75", run_bf16, "bf16_kernel", "needs sm_80");
  }
  expect_fatal("ldmatrix with a row address not 16-byte aligned", run_ldmatrix_misaligned, "ldmatrix_row_kernel",
               "not 16-byte aligned");
  expect_fatal("ldmatrix of a row in global memory", run_ldmatrix_global, "ldmatrix_row_kernel",
               "inside the launch's dynamic shared memory");
  expect_fatal("half a warp at mma.sync, half at ldmatrix", run_divergent, "divergent_kernel", "divergent");
  CUDA_CHECK(cudaFree(g_dev));
}
#endif

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sm = prop.major * 10 + prop.minor;
  printf("the instructions of kernels/cuda/ptx.h on %s (sm_%d)\n", prop.name, sm);
  for (int s = BF16_16816; s <= F16_1688; s++) {
    if (sm < shape_sm(s)) {
      printf("SKIPPED on sm_%d: mma.sync %s (sm_%d)\n", sm, kShapeName[s], shape_sm(s));
      continue;
    }
    test_mma(s);
  }
  test_ldmatrix();
  if (sm >= 80) {
    test_tiles(true);
    test_tiles(false);
  } else {
    printf("SKIPPED on sm_%d: mma_tile.h's tiles (m16n8k16: sm_80)\n", sm);
  }
  if (sm >= 80) test_cp_async();
  else printf("SKIPPED on sm_%d: cp.async (sm_80)\n", sm);
#ifdef TXL_CUDA_EMU
  test_misuse(sm);
#endif
  return selftest_finish();
}
