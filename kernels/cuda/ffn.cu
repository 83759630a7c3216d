/* The fused FFN hidden layer (bias, ReLU, dropout), as the CPU backend:
 *   forward:   a = max(a + b[f], 0) in place; when drop.p > 0 also ad = dropout(a) (ad is not
 *              touched when drop.p == 0)
 *   backward:  dx = a > 0 ? dropout(dx) : 0 in place (the backward of the dropout, then of the
 *              ReLU; a is the forward's ReLU output)
 *   a, ad, dx [rows, cols, feats]; b [feats]
 * The masks are those of the dropout op (kernels/cuda/dropout.cu): Philox words from
 * txl_dropout_words keyed by (row, col0 + column, feature / 4), and the same single float
 * operations as the unfused ops, so the results are the same bits as bias + relu + dropout.
 *
 * One thread per group of 4 features of one (row, column) (one Philox call gives the 4 words of
 * the group), grid-stride: thread t -> (row, column c, group q), features 4q .. 4q+3 (< feats). */
#include "kernels/common/dropout.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

/* The Philox words are computed only when DROP (p > 0). */
template <bool DROP>
static __global__ void bias_relu_dropout_kernel(float *a, float *ad, const float *b, int rows,
                                                int cols, int feats, int col0, TxlDropout d,
                                                uint32_t threshold, float scale) {
  const int groups = (feats + 3) / 4;
  const int64_t total = (int64_t)rows * cols * groups;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int q = (int)(t % groups);
    const int64_t rc = t / groups; /* row * cols + c */
    const uint32_t f0 = 4u * (uint32_t)q;
    TxlPhilox4 w = {{0u, 0u, 0u, 0u}};
    if (DROP) {
      const int row = (int)(rc / cols), c = (int)(rc % cols);
      w = txl_dropout_words(d, (uint32_t)row, (uint32_t)(col0 + c), f0);
    }
    const int64_t e0 = rc * feats + f0;
    const int n = feats - (int)f0 < 4 ? feats - (int)f0 : 4;
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < n) {
        const float v = a[e0 + k] + b[f0 + k];
        const float r = v > 0.0f ? v : 0.0f; /* as relu_forward */
        a[e0 + k] = r;
        if (DROP) ad[e0 + k] = r * ((w.v[k] >> 8) >= threshold ? scale : 0.0f);
      }
  }
}

template <bool DROP>
static __global__ void relu_dropout_backward_kernel(float *dx, const float *a, int rows, int cols,
                                                    int feats, int col0, TxlDropout d,
                                                    uint32_t threshold, float scale) {
  const int groups = (feats + 3) / 4;
  const int64_t total = (int64_t)rows * cols * groups;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int q = (int)(t % groups);
    const int64_t rc = t / groups;
    const uint32_t f0 = 4u * (uint32_t)q;
    TxlPhilox4 w = {{0u, 0u, 0u, 0u}};
    if (DROP) {
      const int row = (int)(rc / cols), c = (int)(rc % cols);
      w = txl_dropout_words(d, (uint32_t)row, (uint32_t)(col0 + c), f0);
    }
    const int64_t e0 = rc * feats + f0;
    const int n = feats - (int)f0 < 4 ? feats - (int)f0 : 4;
#pragma unroll
    for (int k = 0; k < 4; k++)
      if (k < n) {
        float g = dx[e0 + k];
        if (DROP) g *= (w.v[k] >> 8) >= threshold ? scale : 0.0f; /* as the dropout op */
        dx[e0 + k] = a[e0 + k] > 0.0f ? g : 0.0f;                 /* as relu_backward  */
      }
  }
}

static void check_p(const char *op, float p) {
  if (!(p >= 0.0f && p < 1.0f)) txl_fatal("%s: dropout probability %g is not in [0, 1)", op, (double)p);
}

extern "C" void txl_cuda_bias_relu_dropout_forward(float *a, float *ad, const float *b, int rows,
                                                   int cols, int feats, int col0,
                                                   TxlDropout drop) {
  check_p("bias_relu_dropout_forward", drop.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = (int64_t)rows * cols * ((feats + 3) / 4);
  const unsigned int blocks = txl_cuda_blocks(total, TXL_CUDA_THREADS);
  if (drop.p > 0.0f) {
    TXL_LAUNCH(bias_relu_dropout_kernel<true>, blocks, TXL_CUDA_THREADS, 0)(
        a, ad, b, rows, cols, feats, col0, drop, txl_dropout_threshold(drop.p),
        txl_dropout_scale(drop.p));
  } else {
    TXL_LAUNCH(bias_relu_dropout_kernel<false>, blocks, TXL_CUDA_THREADS, 0)(
        a, ad, b, rows, cols, feats, col0, drop, 0u, 1.0f);
  }
  CUDA_LAUNCH_CHECK();
}

extern "C" void txl_cuda_relu_dropout_backward(float *dx, const float *a, int rows, int cols,
                                               int feats, int col0, TxlDropout drop) {
  check_p("relu_dropout_backward", drop.p);
  if (rows <= 0 || cols <= 0 || feats <= 0) return;
  const int64_t total = (int64_t)rows * cols * ((feats + 3) / 4);
  const unsigned int blocks = txl_cuda_blocks(total, TXL_CUDA_THREADS);
  if (drop.p > 0.0f) {
    TXL_LAUNCH(relu_dropout_backward_kernel<true>, blocks, TXL_CUDA_THREADS, 0)(
        dx, a, rows, cols, feats, col0, drop, txl_dropout_threshold(drop.p),
        txl_dropout_scale(drop.p));
  } else {
    TXL_LAUNCH(relu_dropout_backward_kernel<false>, blocks, TXL_CUDA_THREADS, 0)(
        dx, a, rows, cols, feats, col0, drop, 0u, 1.0f);
  }
  CUDA_LAUNCH_CHECK();
}
