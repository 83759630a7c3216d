/* Small helpers shared by the CPU kernels (private to kernels/cpu). */
#ifndef TXL_KERNELS_CPU_UTIL_H
#define TXL_KERNELS_CPU_UTIL_H

#include <stdint.h>

/* Below this many elements an element-wise op runs on the calling thread: waking the OpenMP
 * pool costs more than the work. */
#define TXL_CPU_PAR_MIN_ELEMS ((int64_t)1 << 15)

/* Below this many rows * columns a row-wise op runs on the calling thread. */
#define TXL_CPU_PAR_MIN_WORK ((int64_t)1 << 14)

/* Width of the column blocks of the column-sum reductions (bias, layer-norm weights, embedding
 * gradient): each block is owned by one thread, which walks all rows in order, so a column's sum
 * never depends on the thread count. */
#define TXL_CPU_COL_BLOCK 32

#endif
