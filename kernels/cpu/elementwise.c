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

/* The segment holding packed index i (lengths may be 0; i == n: the last), and its packed start. */
static int segment_of(int n_seg, const int64_t *seg, int64_t i, int64_t *start) {
  int s = 0;
  *start = 0;
  while (s < n_seg - 1 && *start + seg[2 * s + 1] <= i) *start += seg[2 * s++ + 1];
  return s;
}

static int64_t packed_length(int n_seg, const int64_t *seg) {
  int64_t n = 0;
  for (int s = 0; s < n_seg; s++) n += seg[2 * s + 1];
  return n;
}

/* Chunk c of sumsq's chunks of the packed view (n values, the segments end to end): one inside a
 * segment is summed where it lies, one spanning segments is first gathered (host scratch of the
 * chunk's length, at most n / 64 + 1 values), so every chunk sees the values sumsq would. */
static double segments_chunk(const float *x, int n_seg, const int64_t *seg, int64_t n, int c) {
  const int64_t i0 = n * c / TXL_SUMSQ_CHUNKS, i1 = n * (c + 1) / TXL_SUMSQ_CHUNKS;
  if (i1 == i0) return 0.0;
  int64_t start;
  int s = segment_of(n_seg, seg, i0, &start);
  if (i1 <= start + seg[2 * s + 1]) return chunk_sumsq(x + seg[2 * s] + (i0 - start), i1 - i0);
  float *tmp = txl_malloc((size_t)(i1 - i0) * sizeof(float), "sum of squares (gathered chunk)");
  int64_t got = 0;
  for (int64_t from = i0 - start; got < i1 - i0; s++, from = 0) {
    int64_t take = seg[2 * s + 1] - from;
    if (take > i1 - i0 - got) take = i1 - i0 - got;
    if (take > 0) memcpy(tmp + got, x + seg[2 * s] + from, (size_t)take * sizeof(float));
    got += take > 0 ? take : 0;
  }
  const double sum = chunk_sumsq(tmp, i1 - i0);
  free(tmp);
  return sum;
}

/* The chunk sums added in chunk order: the one addition of sumsq_segments and grad_clip_parts. */
static double sum_parts(const double *part, int n_parts) {
  double total = 0.0;
  for (int c = 0; c < n_parts; c++) total += part[c];
  return total;
}

double txl_cpu_sumsq_segments(const float *x, int n_seg, const int64_t *seg) {
  double part[TXL_SUMSQ_CHUNKS];
  txl_cpu_sumsq_parts(part, x, n_seg, seg, 0, TXL_SUMSQ_CHUNKS);
  return sum_parts(part, TXL_SUMSQ_CHUNKS);
}

/* The chunks' starts in the buffer: packed index i0 lies at seg[2s] + (i0 - start) of the segment
 * holding it (an empty chunk, or one at a segment's end, begins where the next value lies). */
int txl_cpu_norm_parts(int64_t *bounds, int n_seg, const int64_t *seg) {
  const int64_t n = packed_length(n_seg, seg);
  for (int c = 0; c <= TXL_SUMSQ_CHUNKS; c++) {
    if (n_seg <= 0) {
      bounds[c] = 0;
      continue;
    }
    const int64_t i0 = n * c / TXL_SUMSQ_CHUNKS;
    int64_t start;
    const int s = segment_of(n_seg, seg, i0, &start);
    bounds[c] = c == 0 ? seg[0] : seg[2 * s] + (i0 - start);
  }
  return TXL_SUMSQ_CHUNKS;
}

void txl_cpu_sumsq_parts(double *part, const float *x, int n_seg, const int64_t *seg, int p0, int p1) {
  const int64_t n = packed_length(n_seg, seg);
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) part[c] = c >= p0 && c < p1 ? segments_chunk(x, n_seg, seg, n, c) : 0.0;
}

void txl_cpu_grad_clip_parts(TxlGradClip *r, const double *part, int n_parts, float clip, double loss_scale) {
  txl_grad_clip_record(r, sum_parts(part, n_parts), clip, loss_scale);
}

void txl_cpu_grad_clip(TxlGradClip *r, const float *g, int n_seg, const int64_t *seg, float clip, double loss_scale) {
  txl_grad_clip_record(r, txl_cpu_sumsq_segments(g, n_seg, seg), clip, loss_scale);
}
