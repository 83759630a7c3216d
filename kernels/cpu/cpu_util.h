/* Small helpers shared by the CPU kernels (private to kernels/cpu). */
#ifndef TXL_KERNELS_CPU_UTIL_H
#define TXL_KERNELS_CPU_UTIL_H

#include <stdint.h>

#include "kernels/ops.h"
#include "src/base/error.h"

/* The CPU table stores everything in fp32 (kernels/ops.h): a bf16 tensor reaching it is a bug. */
static inline void txl_cpu_require_f32(TxlDtype t, const char *op) {
  if (t != TXL_F32) txl_fatal("internal: %s on the CPU backend with a bf16 tensor (fp32 only)", op);
}

/* Below this many elements an element-wise op runs on the calling thread: waking the OpenMP
 * pool costs more than the work. */
#define TXL_CPU_PAR_MIN_ELEMS ((int64_t)1 << 15)

/* The optimizer ops (adam.c, sgd_lamb.c) run in blocks of this many elements, one block a task;
 * each op's block is one noinline function that the unfused op and its fused pass both call, so
 * the element math is compiled once and both give the same bits (whether the compiler contracts
 * a * b + c into a fused multiply-add may depend on the code around it). */
#define TXL_CPU_OPT_BLOCK ((int64_t)4096)

/* Below this many rows * columns a row-wise op runs on the calling thread. */
#define TXL_CPU_PAR_MIN_WORK ((int64_t)1 << 14)

/* Column sums (bias, layer-norm weights) over many rows are computed deterministically in two
 * ways, chosen by the shape only (never by the thread count):
 *   - narrow rows (n <= TXL_CPU_COLSUM_MAX_N): the rows are cut into a fixed number of
 *     contiguous chunks, each chunk's column sums go to a double partial on the caller's stack
 *     (TXL_CPU_PARTIAL_DOUBLES at most), and the partials are added in chunk order;
 *   - wide rows: column blocks of TXL_CPU_COL_BLOCK, each summed over all rows in order by one
 *     thread. */
#define TXL_CPU_COLSUM_MAX_N 4096
#define TXL_CPU_PARTIAL_DOUBLES 32768
#define TXL_CPU_MAX_CHUNKS 32
/* 1024 columns (8 KiB of double accumulators): each row is read in 4 KiB runs; 256 columns gave
 * 1 KiB runs and a third more time for the 264 x 10,000 output-layer bias gradient on a 2-core
 * EPYC. Each column's order of summation, and so every bit, is the same for any width. */
#define TXL_CPU_COL_BLOCK 1024

/* Number of row chunks for `rows` rows whose partials take `per_chunk` doubles each. */
static inline int txl_cpu_row_chunks(int64_t rows, int64_t per_chunk) {
  int64_t c = TXL_CPU_PARTIAL_DOUBLES / (per_chunk > 0 ? per_chunk : 1);
  if (c > TXL_CPU_MAX_CHUNKS) c = TXL_CPU_MAX_CHUNKS;
  if (c > rows / 16) c = rows / 16; /* at least 16 rows a chunk */
  return c < 1 ? 1 : (int)c;
}

/* acc[j] += sum_r y[r * ld + j] for r < rows, j < w: four rows added in float, then into the
 * double accumulator (a quarter of the double loads and stores). */
static inline void txl_cpu_add_rows(double *acc, const float *y, int64_t rows, int w, int64_t ld) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const float *a = y + r * ld, *b = a + ld, *c = b + ld, *d = c + ld;
#pragma omp simd
    for (int j = 0; j < w; j++) acc[j] += (double)((a[j] + b[j]) + (c[j] + d[j]));
  }
  for (; r < rows; r++) {
    const float *a = y + r * ld;
#pragma omp simd
    for (int j = 0; j < w; j++) acc[j] += (double)a[j];
  }
}

#endif
