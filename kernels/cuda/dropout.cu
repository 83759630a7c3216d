/* Dropout with Philox4x32-10 masks keyed by (seed, site) and counted by (feature / 4, row,
 * global column, step): the same txl_dropout_words as the CPU backend
 * (kernels/common/dropout.h), so the masks are bit-identical on both. p = 0 is the identity and
 * touches nothing.
 *
 * One thread per group of 4 features (one Philox call gives the 4 words of the group).
 *   x [rows, cols, feats]; thread t -> (row, column c, group q), feats f = 4q .. 4q+3 (< feats) */
#include "kernels/common/dropout.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void dropout_kernel(float *x, int rows, int cols, int feats, int col0,
                                      TxlDropout d, uint32_t threshold, float scale) {
  const int groups = (feats + 3) / 4;
  const int64_t total = (int64_t)rows * cols * groups;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int q = (int)(t % groups);
    const int64_t rc = t / groups; /* row * cols + c */
    const int row = (int)(rc / cols), c = (int)(rc % cols);
    const uint32_t f0 = 4u * (uint32_t)q;
    const TxlPhilox4 w = txl_dropout_words(d, (uint32_t)row, (uint32_t)(col0 + c), f0);
    float *xg = x + rc * feats + f0;
    const int n = feats - (int)f0 < 4 ? feats - (int)f0 : 4;
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < n) xg[k] *= (w.v[k] >> 8) >= threshold ? scale : 0.0f;
  }
}

extern "C" void txl_cuda_dropout(float *x, int rows, int cols, int feats, int col0,
                                 TxlDropout d) {
  if (d.p == 0.0f) return;
  if (!(d.p > 0.0f && d.p < 1.0f)) txl_fatal("dropout: probability %g is not in [0, 1)", (double)d.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = (int64_t)rows * cols * ((feats + 3) / 4);
  TXL_LAUNCH(dropout_kernel, txl_cuda_blocks(total, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      x, rows, cols, feats, col0, d, txl_dropout_threshold(d.p), txl_dropout_scale(d.p));
  CUDA_LAUNCH_CHECK();
}
