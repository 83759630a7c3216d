/* The gradient norm in parts (kernels/ops.def: norm_parts, sumsq_parts, grad_clip_parts), checked
 * the same way on any backend's ops (tests/ops: the CPU's; tests/cuda: the CUDA backend's on the
 * emulator): for a padded layout and `world` ranks of ZeRO-1's plan (src/optim/shard.h), each
 * rank's sumsq_parts over its own parts, with every value outside its slice a NaN, summed over
 * the ranks in reverse order (each part one rank's value and zeros: exact), makes through
 * grad_clip_parts the record grad_clip makes of the whole buffer, bit for bit; the bounds
 * increase from seg[0] to the end of the last segment. Prints one line; returns 1 on pass. */
#ifndef TXL_TESTS_LIB_NORM_PARTS_H
#define TXL_TESTS_LIB_NORM_PARTS_H

#include <stdint.h>

#include "kernels/ops.h"

int txl_test_norm_parts(const TxlOps *o, int n_seg, int max_len, int world, uint64_t seed);

#endif
