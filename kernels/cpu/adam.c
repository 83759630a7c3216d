/* Adam (the math is kernels/common/adam.h, shared with the CUDA backend). */
#include "kernels/common/adam.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

static void adam_block(float *restrict p, const float *restrict g, float *restrict m, float *restrict v,
                       int64_t n, const TxlAdamCoef c) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) txl_adam_element(&p[i], g[i], &m[i], &v[i], c);
}

void txl_cpu_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                         float beta1, float beta2, float eps, int step, float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  const TxlAdamCoef c = txl_adam_coef(lr, beta1, beta2, eps, step, grad_scale);
  /* blocks of 4096 per thread: in the loop the constants stay in registers and the elements
   * are 16 a vector instruction (restrict: p, g, m, v never overlap) */
  const int64_t blk = 4096, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    adam_block(p + i0, g + i0, m + i0, v + i0, len, c);
  }
}
