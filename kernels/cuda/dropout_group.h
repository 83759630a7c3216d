/* The unit of work of the dropout kernels (dropout.cu, ffn.cu; private to kernels/cuda, CUDA /
 * C++ only): a group of up to 4 consecutive features of one (row, column) of a tensor
 * x [rows, cols, feats], whose 4 mask words one Philox call gives (kernels/common/dropout.h). */
#ifndef TXL_KERNELS_CUDA_DROPOUT_GROUP_H
#define TXL_KERNELS_CUDA_DROPOUT_GROUP_H

#include "kernels/common/dropout.h"
#include "kernels/cuda/cuda_util.h"

struct TxlDropGroup {
  int64_t e0;   /* the group's first element in x     */
  int f0;       /* and its feature                     */
  int n;        /* its features: 4, fewer at a row end */
  TxlPhilox4 w; /* the mask words (when drawn)         */
};

/* Groups in x: rows * cols * ceil(feats / 4). Host and device. */
static inline TXL_HD int64_t txl_drop_groups(int rows, int cols, int feats) {
  return (int64_t)rows * cols * ((feats + 3) / 4);
}

/* Group t; the words are drawn only when `draw` (dropout on), keyed by the row, the global column
 * col0 + c and the feature. Each (row, c) holds feats features, ld >= feats apart in x. */
static __device__ __forceinline__ TxlDropGroup txl_drop_group(int64_t t, int cols, int feats, int ld, int col0,
                                                             TxlDropout d, bool draw) {
  const int groups = (feats + 3) / 4;
  const int64_t rc = t / groups; /* row * cols + c */
  const uint32_t f0 = 4u * (uint32_t)(t % groups);
  TxlDropGroup g;
  g.e0 = rc * ld + f0;
  g.f0 = (int)f0;
  g.n = feats - (int)f0 < 4 ? feats - (int)f0 : 4;
  g.w = TxlPhilox4{{0u, 0u, 0u, 0u}};
  if (draw) g.w = txl_dropout_words(d, (uint32_t)(rc / cols), (uint32_t)(col0 + rc % cols), f0);
  return g;
}

/* body(g) for every group this thread takes of x [rows, cols, feats], grid-stride (thread t: groups
 * t, t + the grid's threads, ...); g.w holds the group's mask words when DRAW. The loop of every
 * dropout kernel, which differ only in what they do with a group. */
template <bool DRAW, typename Body>
static __device__ __forceinline__ void txl_drop_groups_each(int rows, int cols, int feats, int ld, int col0,
                                                            const TxlDropout &d, Body body) {
  const int64_t total = txl_drop_groups(rows, cols, feats);
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x)
    body(txl_drop_group(t, cols, feats, ld, col0, d, DRAW));
}

/* The factor of an element whose mask word is `word`: scale when kept, 0 when dropped. */
static __device__ __forceinline__ float txl_drop_factor(uint32_t word, uint32_t threshold, float scale) {
  return (word >> 8) >= threshold ? scale : 0.0f;
}

#endif
