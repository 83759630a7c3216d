/* Element-wise ops and column sums. Parameter gradients accumulate (+=); see kernels/ops.h. */
#include <omp.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_bias_fill(void *x_, const float *b, int64_t rows, int n) {
  float *x = x_;
#pragma omp parallel for schedule(static) if (rows * n >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t r = 0; r < rows; r++) memcpy(x + r * n, b, (size_t)n * sizeof(float));
}

/* db[j] += sum_r dy[r, j], accumulated in double (groups of four rows in float) in an order
 * fixed by the shape, never by the thread count (see cpu_util.h). */
void txl_cpu_bias_backward(float *db, const void *dy_, int64_t rows, int n) {
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
      txl_cpu_add_rows(pc, dy + rows * c / nc * n, rows * (c + 1) / nc - rows * c / nc, n, n);
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
    txl_cpu_add_rows(acc, dy + j0, rows, w, n);
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

double txl_cpu_sumsq(const float *x, int64_t n) {
  double part[TXL_SUMSQ_CHUNKS];
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) {
    const int64_t i0 = n * c / TXL_SUMSQ_CHUNKS, i1 = n * (c + 1) / TXL_SUMSQ_CHUNKS;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; i++) s += (double)x[i] * (double)x[i];
    part[c] = s;
  }
  double total = 0.0;
  for (int c = 0; c < TXL_SUMSQ_CHUNKS; c++) total += part[c];
  return total;
}
