/* Softmax cross-entropy per row (rows ld >= V apart; only the first V values of a row are read or
 * written), with the max shift; optionally overwrites the logits with
 * the gradient (softmax - onehot) * grad_scale. A row of target < 0 is padding: loss 0, gradient 0.
 * The sum of exponentials is taken in float over blocks of TXL_XENT_BLOCK (vectorised: a float
 * to double conversion inside the loop would stop that; so would GCC's default -ftrapping-math,
 * which kernels/CMakeLists.txt turns off for this file) and the block sums in double. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vmath.h"
#include "src/base/error.h"

#define TXL_XENT_BLOCK 256

/* sum_j exp(x[j] - m), and x[j] = exp(x[j] - m) when store. `next` (NULL for none): the next
 * row, prefetched a block at a time while this row's exponentials are computed, so that its max
 * pass, the first read of logits the GEMM wrote out of cache, finds it in cache (measured on a
 * 2-core EPYC, 264 rows of 10,000: about a fifth of the op's time, the same bits). */
static inline double sum_exp(float *x, int V, float m, int store, const float *next) {
  double sum = 0.0;
  for (int j0 = 0; j0 < V; j0 += TXL_XENT_BLOCK) {
    const int j1 = V - j0 < TXL_XENT_BLOCK ? V : j0 + TXL_XENT_BLOCK;
    if (next) /* one prefetch a 64-byte line; for writing when the row is overwritten */
      for (int j = j0; j < j1; j += 16) {
        if (store)
          __builtin_prefetch(next + j, 1);
        else
          __builtin_prefetch(next + j, 0);
      }
    float bs = 0.0f;
    if (store) {
#pragma omp simd reduction(+ : bs)
      for (int j = j0; j < j1; j++) {
        const float e = txl_expf(x[j] - m);
        x[j] = e;
        bs += e;
      }
    } else {
#pragma omp simd reduction(+ : bs)
      for (int j = j0; j < j1; j++) bs += txl_expf(x[j] - m);
    }
    sum += (double)bs;
  }
  return sum;
}

void txl_cpu_loss_sum(double *sum, const float *loss, int64_t n, int add) {
  double s = add ? *sum : 0.0;
  for (int64_t t = 0; t < n; t++) s += loss[t];
  *sum = s;
}

void txl_cpu_xent_forward_backward(void *logits_, float *loss, const int32_t *target,
                                   float grad_scale, int64_t n, int V, int ld) {
  float *logits = logits_;
  for (int64_t t = 0; t < n; t++)
    if (target[t] >= V)
      txl_fatal("xent: target %d of row %lld is outside the vocabulary [0, %d)", (int)target[t],
                (long long)t, V);
#pragma omp parallel for schedule(static) if (n * V >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t t = 0; t < n; t++) {
    float *x = logits + t * ld;
    if (target[t] < 0) { /* padding (adaptive_group): no loss, no gradient */
      if (grad_scale != 0.0f)
        for (int j = 0; j < V; j++) x[j] = 0.0f;
      loss[t] = 0.0f;
      continue;
    }
    const float xt = x[target[t]];
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int j = 0; j < V; j++) m = x[j] > m ? x[j] : m;
    const int grad = grad_scale != 0.0f;
    const double sum = sum_exp(x, V, m, grad, t + 1 < n ? x + ld : NULL);
    if (grad) {
      const float k = (float)((double)grad_scale / sum);
#pragma omp simd
      for (int j = 0; j < V; j++) x[j] *= k;
      x[target[t]] -= grad_scale;
    }
    loss[t] = (float)(log(sum) + ((double)m - (double)xt));
  }
}
