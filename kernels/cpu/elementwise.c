/* Element-wise ops and column sums. Parameter gradients accumulate (+=); see kernels/ops.h. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/digest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

void txl_cpu_bias_fill(void *x_, const float *b, int64_t rows, int n) {
  float *x = x_;
#pragma omp parallel for schedule(static) if (rows * n >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t r = 0; r < rows; r++) memcpy(x + r * n, b, (size_t)n * sizeof(float));
}

/* db[j] += sum_r dy[r, j], accumulated in double (groups of four rows in float) in an order
 * fixed by the shape, never by the thread count (see cpu_util.h). */
void txl_cpu_bias_backward(float *db, const void *dy_, int64_t rows, int n, int ld) {
  const float *dy = dy_;
  if (rows <= 0 || n <= 0) return;
  const int par = rows * n >= TXL_CPU_PAR_MIN_WORK;
  if (n <= TXL_CPU_COLSUM_MAX_N) {
    const int nc = txl_cpu_row_chunks(rows, n);
    double part[TXL_CPU_PARTIAL_DOUBLES]; /* [nc, n] */
#pragma omp parallel for schedule(static) if (par && nc > 1)
    for (int c = 0; c < nc; c++) {
      double *pc = part + (int64_t)c * n;
      for (int j = 0; j < n; j++) pc[j] = 0.0;
      txl_cpu_add_rows(pc, dy + rows * c / nc * ld, rows * (c + 1) / nc - rows * c / nc, n, ld);
    }
    for (int j = 0; j < n; j++) {
      double s = db[j];
      for (int c = 0; c < nc; c++) s += part[(int64_t)c * n + j];
      db[j] = (float)s;
    }
    return;
  }
  const int nblk = (n + TXL_CPU_COL_BLOCK - 1) / TXL_CPU_COL_BLOCK;
#pragma omp parallel for schedule(static) if (par)
  for (int blk = 0; blk < nblk; blk++) {
    const int j0 = blk * TXL_CPU_COL_BLOCK;
    const int w = n - j0 < TXL_CPU_COL_BLOCK ? n - j0 : TXL_CPU_COL_BLOCK;
    double acc[TXL_CPU_COL_BLOCK];
    for (int j = 0; j < w; j++) acc[j] = db[j0 + j];
    txl_cpu_add_rows(acc, dy + j0, rows, w, ld);
    for (int j = 0; j < w; j++) db[j0 + j] = (float)acc[j];
  }
}

void txl_cpu_add(void *out_, const void *a_, const void *b_, int64_t n, TxlDtype t) {
  txl_cpu_require_f32(t, "add");
  float *out = out_;
  const float *a = a_, *b = b_;
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

/* A fixed number of chunks, independent of the thread count; each chunk is summed in double by
 * the same (vectorised) code, and the chunk sums are added in chunk order. */
#define TXL_SUMSQ_CHUNKS 64

/* One chunk's sum: the only loop that sums squares, so sumsq and sumsq_segments agree. */
static double chunk_sumsq(const float *x, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
  return s;
}

double txl_cpu_sumsq(const float *x, int64_t n) {
  double part[TXL_SUMSQ_CHUNKS];
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) {
    const int64_t i0 = n * c / TXL_SUMSQ_CHUNKS, i1 = n * (c + 1) / TXL_SUMSQ_CHUNKS;
    part[c] = chunk_sumsq(x + i0, i1 - i0);
  }
  double total = 0.0;
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) total += part[c];
  return total;
}

/* Integer sums are exact: any split over the threads gives digest.h's bits. */
uint64_t txl_cpu_digest(const float *x, int64_t n) {
  uint64_t s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) s += txl_digest_term(i, txl_digest_bits(x[i]));
  return s;
}

/* sumsq's chunks of the packed view (n values, the segments end to end): a chunk inside one
 * segment is summed where it lies, one spanning segments is first gathered (host scratch of the
 * chunk's length, at most n / 64 + 1 values), so every chunk sees the values sumsq would. */
double txl_cpu_sumsq_segments(const float *x, int n_seg, const int64_t *seg) {
  int64_t n = 0;
  for (int s = 0; s < n_seg; s++) n += seg[2 * s + 1];
  double part[TXL_SUMSQ_CHUNKS];
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) {
    const int64_t i0 = n * c / TXL_SUMSQ_CHUNKS, i1 = n * (c + 1) / TXL_SUMSQ_CHUNKS;
    /* the segment holding packed index i0 (lengths may be 0), and its packed start */
    int s = 0;
    int64_t start = 0;
    while (s < n_seg - 1 && start + seg[2 * s + 1] <= i0) start += seg[2 * s++ + 1];
    if (i1 - i0 == 0 || i1 <= start + seg[2 * s + 1]) {
      part[c] = i1 > i0 ? chunk_sumsq(x + seg[2 * s] + (i0 - start), i1 - i0) : 0.0;
      continue;
    }
    float *tmp = txl_malloc((size_t)(i1 - i0) * sizeof(float), "sum of squares (gathered chunk)");
    int64_t got = 0;
    for (int64_t from = i0 - start; got < i1 - i0; s++, from = 0) {
      int64_t take = seg[2 * s + 1] - from;
      if (take > i1 - i0 - got) take = i1 - i0 - got;
      if (take > 0) memcpy(tmp + got, x + seg[2 * s] + from, (size_t)take * sizeof(float));
      got += take > 0 ? take : 0;
    }
    part[c] = chunk_sumsq(tmp, i1 - i0);
    free(tmp);
  }
  double total = 0.0;
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) total += part[c];
  return total;
}

void txl_cpu_grad_clip(TxlGradClip *r, const float *g, int n_seg, const int64_t *seg, float clip, double loss_scale) {
  txl_grad_clip_record(r, txl_cpu_sumsq_segments(g, n_seg, seg), clip, loss_scale);
}
