/* Dropout with Philox4x32-10 masks keyed by (seed, site) and counted by (feature / 4, row,
 * global column, step): see kernels/common/dropout.h. p = 0 is the identity and touches nothing.
 *
 * The generator is evaluated TXL_PHILOX_LANES counters at a time in structure-of-arrays form so
 * that the compiler vectorises the ten rounds (32x32 -> 64-bit multiplies are vector
 * instructions); the words are bit-identical to txl_dropout_words (tests/ops check this). */
#include <omp.h>

#include "kernels/common/dropout.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

#define TXL_PHILOX_LANES 16

/* words[w][l] = word w of Philox(counter (c0[l], c1[l], c2[l], c3), key (k0, k1)), l < LANES. */
static inline void philox_lanes(uint32_t words[4][TXL_PHILOX_LANES], const uint32_t *c0, const uint32_t *c1,
                                const uint32_t *c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  uint32_t a0[TXL_PHILOX_LANES], a1[TXL_PHILOX_LANES], a2[TXL_PHILOX_LANES], a3[TXL_PHILOX_LANES];
  for (int l = 0; l < TXL_PHILOX_LANES; l++) {
    a0[l] = c0[l];
    a1[l] = c1[l];
    a2[l] = c2[l];
    a3[l] = c3;
  }
  for (int round = 0; round < 10; round++) {
#pragma omp simd
    for (int l = 0; l < TXL_PHILOX_LANES; l++) {
      const uint64_t p0 = (uint64_t)0xD2511F53u * a0[l];
      const uint64_t p1 = (uint64_t)0xCD9E8D57u * a2[l];
      const uint32_t n0 = (uint32_t)(p1 >> 32) ^ a1[l] ^ k0;
      const uint32_t n2 = (uint32_t)(p0 >> 32) ^ a3[l] ^ k1;
      a1[l] = (uint32_t)p1;
      a3[l] = (uint32_t)p0;
      a0[l] = n0;
      a2[l] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < TXL_PHILOX_LANES; l++) {
    words[0][l] = a0[l];
    words[1][l] = a1[l];
    words[2][l] = a2[l];
    words[3][l] = a3[l];
  }
}

/* One contiguous row of `feats` features at (row, column). */
static void dropout_row(float *x, int feats, uint32_t row, uint32_t column, TxlDropout d,
                        uint32_t threshold, float scale) {
  const int per_batch = 4 * TXL_PHILOX_LANES; /* features covered by one philox_lanes call */
  uint32_t words[4][TXL_PHILOX_LANES];
  int f0 = 0;
  for (; f0 + per_batch <= feats; f0 += per_batch) {
    uint32_t c0[TXL_PHILOX_LANES], c1[TXL_PHILOX_LANES], c2[TXL_PHILOX_LANES];
    for (int l = 0; l < TXL_PHILOX_LANES; l++)
      c0[l] = ((uint32_t)f0 >> 2) + (uint32_t)l, c1[l] = row, c2[l] = column;
    philox_lanes(words, c0, c1, c2, txl_dropout_step(d), d.seed, d.site);
    float *xb = x + f0;
#pragma omp simd
    for (int l = 0; l < TXL_PHILOX_LANES; l++)
      for (int w = 0; w < 4; w++)
        xb[4 * l + w] *= (words[w][l] >> 8) >= threshold ? scale : 0.0f;
  }
  for (; f0 < feats; f0 += 4) { /* tail: fewer than 4 * LANES features */
    const TxlPhilox4 r = txl_dropout_words(d, row, column, (uint32_t)f0);
    const int n = feats - f0 < 4 ? feats - f0 : 4;
    for (int w = 0; w < n; w++) x[f0 + w] *= (r.v[w] >> 8) >= threshold ? scale : 0.0f;
  }
}

/* Rows narrower than one batch of lanes: the lanes take consecutive groups of four features
 * across rows, group q = (rc, f4) with rc = q / groups_per_row. Groups [q0, q1). */
static void dropout_narrow(float *x, int row0, int cols, int feats, int ld, int col0, TxlDropout d,
                           uint32_t threshold, float scale, int64_t q0, int64_t q1) {
  const int gpr = (feats + 3) / 4;
  uint32_t words[4][TXL_PHILOX_LANES];
  uint32_t c0[TXL_PHILOX_LANES], c1[TXL_PHILOX_LANES], c2[TXL_PHILOX_LANES];
  int64_t rcl[TXL_PHILOX_LANES];
  /* the group q0 as (rc, f4) and rc as (row, column): one division here, increments after */
  int64_t rc = q0 / gpr;
  uint32_t f4 = (uint32_t)(q0 % gpr), row = (uint32_t)(row0 + rc / cols), col = (uint32_t)(rc % cols);
  for (int64_t q = q0; q < q1; q += TXL_PHILOX_LANES) {
    const int nl = q1 - q < TXL_PHILOX_LANES ? (int)(q1 - q) : TXL_PHILOX_LANES;
    for (int l = 0; l < TXL_PHILOX_LANES; l++) {
      if (l == nl) { /* past the last group: lanes repeat lane 0, their words unused */
        for (; l < TXL_PHILOX_LANES; l++) rcl[l] = rcl[0], c0[l] = c0[0], c1[l] = c1[0], c2[l] = c2[0];
        break;
      }
      rcl[l] = rc, c0[l] = f4, c1[l] = row, c2[l] = (uint32_t)col0 + col;
      if (++f4 == (uint32_t)gpr) {
        f4 = 0, rc++;
        if (++col == (uint32_t)cols) col = 0, row++;
      }
    }
    philox_lanes(words, c0, c1, c2, txl_dropout_step(d), d.seed, d.site);
    for (int l = 0; l < nl; l++) {
      float *xr = x + rcl[l] * ld;
      const int f0 = 4 * (int)c0[l], n = feats - f0 < 4 ? feats - f0 : 4;
      for (int w = 0; w < n; w++) xr[f0 + w] *= (words[w][l] >> 8) >= threshold ? scale : 0.0f;
    }
  }
}

void txl_cpu_dropout(void *x_, int rows, int cols, int feats, int ld, int col0, TxlDropout d) {
  float *x = x_;
  txl_cpu_dropout_rows(x, 0, rows, cols, feats, ld, col0, d);
}

void txl_cpu_dropout_rows(float *x, int row0, int rows, int cols, int feats, int ld, int col0, TxlDropout d) {
  if (d.p == 0.0f) return;
  if (!(d.p > 0.0f && d.p < 1.0f)) txl_fatal("dropout: probability %g is not in [0, 1)", (double)d.p);
  const uint32_t threshold = txl_dropout_threshold(d.p);
  const float scale = txl_dropout_scale(d.p);
  const int64_t nrc = (int64_t)rows * cols;
  /* The fused ops (layernorm, ffn) call this once a row from inside their own parallel loops.
   * There a parallel construct, even one that runs on one thread (its `if` false, or nested),
   * still sets up a team of one for every row (libgomp allocates and frees a nested team and
   * wakes its barrier with a futex call): so it is entered only where it can use more threads.
   * Every element's mask is the same either way. */
  const int par = nrc * feats >= TXL_CPU_PAR_MIN_WORK / 4 && omp_get_max_threads() > 1 && !omp_in_parallel();
  if (feats < 4 * TXL_PHILOX_LANES) {
    const int64_t ng = nrc * ((feats + 3) / 4), per = 64 * TXL_PHILOX_LANES;
    const int64_t nblk = (ng + per - 1) / per;
    if (par) {
#pragma omp parallel for schedule(static)
      for (int64_t b = 0; b < nblk; b++)
        dropout_narrow(x, row0, cols, feats, ld, col0, d, threshold, scale, b * per,
                       ng - b * per < per ? ng : (b + 1) * per);
    } else {
      for (int64_t b = 0; b < nblk; b++)
        dropout_narrow(x, row0, cols, feats, ld, col0, d, threshold, scale, b * per,
                       ng - b * per < per ? ng : (b + 1) * per);
    }
    return;
  }
  if (par) {
#pragma omp parallel for schedule(static)
    for (int64_t rc = 0; rc < nrc; rc++)
      dropout_row(x + rc * ld, feats, (uint32_t)(row0 + rc / cols), (uint32_t)(col0 + rc % cols), d, threshold,
                  scale);
  } else {
    for (int64_t rc = 0; rc < nrc; rc++)
      dropout_row(x + rc * ld, feats, (uint32_t)(row0 + rc / cols), (uint32_t)(col0 + rc % cols), d, threshold,
                  scale);
  }
}
