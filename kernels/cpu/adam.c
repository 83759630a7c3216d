/* Adam and its fused pass (the math is kernels/common/adam.h, shared with the CUDA backend). */
#include <math.h>
#include <string.h>

#include "kernels/common/adam.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

/* noinline: the one compiled loop of adam_update and adam_fused (cpu_util.h) */
static __attribute__((noinline)) void adam_block(float *restrict p, const float *restrict g, float *restrict m,
                                                 float *restrict v, int64_t n, const TxlAdamCoef c) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) txl_adam_element(&p[i], g[i], &m[i], &v[i], c);
}

void txl_cpu_adam_update(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                         float beta1, float beta2, float eps, int step, float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  const TxlAdamCoef c = txl_adam_coef(lr, beta1, beta2, eps, step, grad_scale);
  /* blocks of 4096 per thread: in the loop the constants stay in registers and the elements
   * are 16 a vector instruction (restrict: p, g, m, v never overlap) */
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    adam_block(p + i0, g + i0, m + i0, v + i0, len, c);
  }
}

/* The CPU table's activations are fp32: the model's compute copy of the weights is p itself. */
void txl_cpu_check_act_copy(const void *p_act, const float *p, const char *op) {
  if (p_act != (const void *)p) txl_fatal("internal: %s on the CPU: the weights' fp32 copy must be p itself", op);
}

void txl_cpu_adam_fused(float *p, void *p_act, float *g, float *m, float *v, int64_t n, const TxlOptimStep *s,
                        const float *grad_scale) {
  txl_cpu_check_act_copy(p_act, p, "adam_fused");
  if (isnan(*grad_scale)) return; /* the updates are halted (kernels/common/clip.h) */
  TxlAdamCoef c = s->adam;
  c.grad_scale = *grad_scale;
  /* adam_update's blocks, each block's gradient zeroed while it is in the cache */
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    adam_block(p + i0, g + i0, m + i0, v + i0, len, c);
    memset(g + i0, 0, (size_t)len * sizeof(float));
  }
}
