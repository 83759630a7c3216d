/* The fused FFN hidden layer (bias, ReLU, dropout), as the CPU backend:
 *   forward:   a = max(a + b[f], 0) in place; when drop.p > 0 also ad = dropout(a) (ad is not
 *              touched when drop.p == 0)
 *   backward:  dx = a > 0 ? dropout(dx) : 0 in place (the backward of the dropout, then of the
 *              ReLU; a is the forward's ReLU output)
 *   a, ad, dx [rows, cols, feats] (each (row, column) row of feats features ld apart); b [feats]
 * The masks are those of the dropout op (kernels/cuda/dropout.cu): Philox words from
 * txl_dropout_words keyed by (row, col0 + column, feature / 4), and the same single float
 * operations as the unfused ops, so the results are the same bits as bias + relu + dropout.
 * Activations of type T (float, txl_bf16 or txl_fp16, see cuda_util.h); with bf16 or fp16, ad is made from a as
 * stored (rounded), as the dropout op would make it from a copy of a.
 *
 * One thread per group of 4 features of one (row, column) (one Philox call gives the 4 words of
 * the group), grid-stride: thread t -> (row, column c, group q), features 4q .. 4q+3 (< feats). */
#include "kernels/cuda/act.h"
#include "kernels/cuda/dropout_group.h"

/* The Philox words are computed only when DROP (p > 0). */
template <typename T, bool DROP>
static __global__ void bias_relu_dropout_kernel(T *a, T *ad, const float *b, int rows, int cols,
                                                int feats, int ld, int col0, TxlDropout d,
                                                uint32_t threshold, float scale) {
  txl_drop_groups_each<DROP>(rows, cols, feats, ld, col0, d, [&](const TxlDropGroup &g) {
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < g.n) {
        const float v = txl_ld(&a[g.e0 + k]) + b[g.f0 + k];
        T r;
        txl_st(&r, v > 0.0f ? v : 0.0f); /* as the CPU: -0 and NaN give +0 */
        a[g.e0 + k] = r;
        if (DROP) txl_st(&ad[g.e0 + k], txl_ld(&r) * txl_drop_factor(g.w.v[k], threshold, scale));
      }
  });
}

template <typename T, bool DROP>
static __global__ void relu_dropout_backward_kernel(T *dx, const T *a, int rows, int cols,
                                                    int feats, int ld, int col0, TxlDropout d,
                                                    uint32_t threshold, float scale) {
  txl_drop_groups_each<DROP>(rows, cols, feats, ld, col0, d, [&](const TxlDropGroup &g) {
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < g.n) {
        float v = txl_ld(&dx[g.e0 + k]);
        if (DROP) v *= txl_drop_factor(g.w.v[k], threshold, scale); /* as the dropout op */
        txl_st(&dx[g.e0 + k], txl_ld(&a[g.e0 + k]) > 0.0f ? v : 0.0f); /* ReLU backward */
      }
  });
}

static void check_p(const char *op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) txl_fatal("%s: dropout probability %g is not in [0, 1)", op, (double)p);
}

template <typename T>
static void bias_relu_dropout_forward(T *a, T *ad, const float *b, int rows, int cols, int feats, int ld,
                                      int col0, TxlDropout drop) {
  check_p("bias_relu_dropout_forward", drop.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = txl_drop_groups(rows, cols, feats);
  const unsigned int blocks = txl_cuda_blocks(total, TXL_CUDA_THREADS);
  if (drop.p > 0.0f) {
    auto k = bias_relu_dropout_kernel<T, true>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(a, ad, b, rows, cols, feats, ld, col0, drop,
                                              txl_dropout_threshold(drop.p),
                                              txl_dropout_scale(drop.p));
  } else {
    auto k = bias_relu_dropout_kernel<T, false>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(a, ad, b, rows, cols, feats, ld, col0, drop, 0u, 1.0f);
  }
  CUDA_LAUNCH_CHECK();
}

template <typename T>
static void relu_dropout_backward(T *dx, const T *a, int rows, int cols, int feats, int ld, int col0,
                                  TxlDropout drop) {
  check_p("relu_dropout_backward", drop.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = txl_drop_groups(rows, cols, feats);
  const unsigned int blocks = txl_cuda_blocks(total, TXL_CUDA_THREADS);
  if (drop.p > 0.0f) {
    auto k = relu_dropout_backward_kernel<T, true>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(dx, a, rows, cols, feats, ld, col0, drop,
                                              txl_dropout_threshold(drop.p),
                                              txl_dropout_scale(drop.p));
  } else {
    auto k = relu_dropout_backward_kernel<T, false>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(dx, a, rows, cols, feats, ld, col0, drop, 0u, 1.0f);
  }
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT>
void txl_act_bias_relu_dropout_forward(void *a, void *ad, const float *b, int rows, int cols, int feats, int ld,
                                       int col0, TxlDropout drop) {
  using T = typename TxlAct<AT>::T;
  bias_relu_dropout_forward(static_cast<T *>(a), static_cast<T *>(ad), b, rows, cols, feats, ld, col0, drop);
}
TXL_CUDA_ACT_ENTRIES(bias_relu_dropout_forward)

template <TxlDtype AT>
void txl_act_relu_dropout_backward(void *dx, const void *a, int rows, int cols, int feats, int ld, int col0,
                                   TxlDropout drop) {
  using T = typename TxlAct<AT>::T;
  relu_dropout_backward(static_cast<T *>(dx), static_cast<const T *>(a), rows, cols, feats, ld, col0, drop);
}
TXL_CUDA_ACT_ENTRIES(relu_dropout_backward)
