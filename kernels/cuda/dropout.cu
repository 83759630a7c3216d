/* Dropout with Philox4x32-10 masks keyed by (seed, site) and counted by (feature / 4, row,
 * global column, step): the same txl_dropout_words as the CPU backend
 * (kernels/common/dropout.h), so the masks are bit-identical on both. p = 0 is the identity and
 * touches nothing.
 *
 * One thread per group of 4 features (one Philox call gives the 4 words of the group).
 *   x [rows, cols, feats] (each (row, column) row of feats features ld apart) of type T (float, txl_bf16 or txl_fp16, see cuda_util.h);
 *   thread t -> (row, column c, group q), feats f = 4q .. 4q+3 (< feats) */
#include "kernels/cuda/act.h"
#include "kernels/cuda/dropout_group.h"

template <typename T>
static __global__ void dropout_kernel(T *x, int rows, int cols, int feats, int ld, int col0, TxlDropout d,
                                      uint32_t threshold, float scale) {
  txl_drop_groups_each<true>(rows, cols, feats, ld, col0, d, [&](const TxlDropGroup &g) {
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < g.n)
        txl_st(&x[g.e0 + k], txl_ld(&x[g.e0 + k]) * txl_drop_factor(g.w.v[k], threshold, scale));
  });
}

template <typename T>
static void dropout(T *x, int rows, int cols, int feats, int ld, int col0, TxlDropout d) {
  if (d.p == 0.0f) return;
  if (!(d.p > 0.0f && d.p < 1.0f)) txl_fatal("dropout: probability %g is not in [0, 1)", (double)d.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = txl_drop_groups(rows, cols, feats);
  TXL_LAUNCH(dropout_kernel<T>, txl_cuda_blocks(total, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      x, rows, cols, feats, ld, col0, d, txl_dropout_threshold(d.p), txl_dropout_scale(d.p));
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT>
void txl_act_dropout(void *x, int rows, int cols, int feats, int ld, int col0, TxlDropout d) {
  dropout(static_cast<typename TxlAct<AT>::T *>(x), rows, cols, feats, ld, col0, d);
}
TXL_CUDA_ACT_ENTRIES(dropout)
