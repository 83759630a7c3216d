/* Softmax cross-entropy per row, with the max shift; optionally overwrites the logits with
 * the gradient (softmax - onehot) * grad_scale. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/vmath.h"
#include "src/base/error.h"

void txl_cpu_xent_forward_backward(float *logits, float *loss, const int32_t *target,
                                   float grad_scale, int64_t n, int V) {
  for (int64_t t = 0; t < n; t++)
    if (target[t] < 0 || target[t] >= V)
      txl_fatal("xent: target %d of row %lld is outside the vocabulary [0, %d)", (int)target[t],
                (long long)t, V);
#pragma omp parallel for schedule(static) if (n * V >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t t = 0; t < n; t++) {
    float *x = logits + t * V;
    const float xt = x[target[t]];
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int j = 0; j < V; j++) m = x[j] > m ? x[j] : m;
    double sum = 0.0;
    if (grad_scale != 0.0f) {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) {
        const float e = txl_expf(x[j] - m);
        x[j] = e;
        sum += (double)e;
      }
      const float k = (float)((double)grad_scale / sum);
#pragma omp simd
      for (int j = 0; j < V; j++) x[j] *= k;
      x[target[t]] -= grad_scale;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < V; j++) sum += (double)txl_expf(x[j] - m);
    }
    loss[t] = (float)(log(sum) + ((double)m - (double)xt));
  }
}
