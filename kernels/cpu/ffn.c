/* The FFN hidden layer's element-wise work fused, one time row at a time while it is in cache:
 *   forward   a = max(a + b, 0) (a holds x W1), ad = dropout(a) when p > 0
 *   backward  dx = a > 0 ? dropout(dx) : 0
 * The masks are those of the dropout op (txl_cpu_dropout_rows), so the results are the ones of
 * the separate bias, ReLU, copy and dropout passes, bit for bit.
 *   a, ad, dx [rows, cols, feats] (each (row, column) row of feats features ld apart), b [feats] */
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_bias_relu_dropout_forward(void *a_, void *ad_, const float *b, int rows, int cols,
                                       int feats, int ld, int col0, TxlDropout drop) {
  float *a = a_;
  float *ad = ad_;
  const int64_t row = (int64_t)cols * ld; /* one time row: cols rows of feats, ld apart */
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols * feats >= TXL_CPU_PAR_MIN_ELEMS)
  for (int i = 0; i < rows; i++) {
    float *ai = a + i * row;
    for (int c = 0; c < cols; c++) {
      float *x = ai + (int64_t)c * ld;
#pragma omp simd
      for (int f = 0; f < feats; f++) {
        const float v = x[f] + b[f];
        x[f] = v > 0.0f ? v : 0.0f;
      }
    }
    if (drop.p > 0.0f) {
      for (int c = 0; c < cols; c++)
        memcpy(ad + i * row + (int64_t)c * ld, ai + (int64_t)c * ld, (size_t)feats * sizeof(float));
      txl_cpu_dropout_rows(ad + i * row, i, 1, cols, feats, ld, col0, drop);
    }
  }
}

void txl_cpu_relu_dropout_backward(void *dx_, const void *a_, int rows, int cols, int feats, int ld,
                                   int col0, TxlDropout drop) {
  float *dx = dx_;
  const float *a = a_;
  const int64_t row = (int64_t)cols * ld;
#pragma omp parallel for schedule(static) if ((int64_t)rows * cols * feats >= TXL_CPU_PAR_MIN_ELEMS)
  for (int i = 0; i < rows; i++) {
    txl_cpu_dropout_rows(dx + i * row, i, 1, cols, feats, ld, col0, drop);
    for (int c = 0; c < cols; c++) {
      float *g = dx + i * row + (int64_t)c * ld;
      const float *y = a + i * row + (int64_t)c * ld;
#pragma omp simd
      for (int f = 0; f < feats; f++) g[f] = y[f] > 0.0f ? g[f] : 0.0f;
    }
  }
}
