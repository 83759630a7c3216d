/* The FFN hidden layer's element-wise work fused, one time row at a time while it is in cache:
 *   forward   a = max(a + b, 0) (a holds x W1), ad = dropout(a) when p > 0
 *   backward  dx = a > 0 ? dropout(dx) : 0
 * The masks are those of the dropout op (txl_cpu_dropout_rows), so the results are the ones of
 * the separate bias, ReLU, copy and dropout passes, bit for bit.
 *   a, ad, dx [rows, cols, feats], b [feats] */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_bias_relu_dropout_forward(void *a_, void *ad_, const float *b, int rows, int cols,
                                       int feats, int col0, TxlDropout drop) {
  float *a = a_;
  float *ad = ad_;
  const int64_t row = (int64_t)cols * feats;
#pragma omp parallel for schedule(static) if (rows * row >= TXL_CPU_PAR_MIN_ELEMS)
  for (int i = 0; i < rows; i++) {
    float *ai = a + i * row;
    for (int c = 0; c < cols; c++) {
      float *x = ai + (int64_t)c * feats;
#pragma omp simd
      for (int f = 0; f < feats; f++) {
        const float v = x[f] + b[f];
        x[f] = v > 0.0f ? v : 0.0f;
      }
    }
    if (drop.p > 0.0f) {
      memcpy(ad + i * row, ai, (size_t)row * sizeof(float));
      txl_cpu_dropout_rows(ad + i * row, i, 1, cols, feats, col0, drop);
    }
  }
}

void txl_cpu_relu_dropout_backward(void *dx_, const void *a_, int rows, int cols, int feats,
                                   int col0, TxlDropout drop) {
  float *dx = dx_;
  const float *a = a_;
  const int64_t row = (int64_t)cols * feats;
#pragma omp parallel for schedule(static) if (rows * row >= TXL_CPU_PAR_MIN_ELEMS)
  for (int i = 0; i < rows; i++) {
    float *g = dx + i * row;
    const float *y = a + i * row;
    txl_cpu_dropout_rows(g, i, 1, cols, feats, col0, drop);
#pragma omp simd
    for (int64_t k = 0; k < row; k++) g[k] = y[k] > 0.0f ? g[k] : 0.0f;
  }
}
