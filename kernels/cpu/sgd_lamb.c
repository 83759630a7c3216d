/* SGD with momentum, LAMB's moments and axpy, and the fused passes of SGD and of LAMB's axpy (the
 * math is kernels/common/sgd_lamb.h, shared with the CUDA backend). Element-wise: each element's
 * result is independent of the threads. */
#include <math.h>
#include <string.h>

#include "kernels/common/sgd_lamb.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

/* noinline: the one compiled loop of sgd_update and sgd_fused (cpu_util.h) */
static __attribute__((noinline)) void sgd_block(float *restrict p, const float *restrict g, float *restrict buf,
                                                int64_t n, float lr, float momentum, float grad_scale, int first) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) txl_sgd_element(&p[i], g[i], &buf[i], lr, momentum, grad_scale, first);
}

void txl_cpu_sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                        float grad_scale, int first) {
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    sgd_block(p + i0, g + i0, buf + i0, len, lr, momentum, grad_scale, first);
  }
}

void txl_cpu_lamb_moments(float *g, const float *p, float *m, float *v, int64_t n, float beta1,
                          float beta2, float eps, float weight_decay, int step, float grad_scale) {
  if (step < 1) txl_fatal("lamb_moments: step %d must be >= 1 (1-based)", step);
  const TxlLambCoef c = txl_lamb_coef(beta1, beta2, eps, weight_decay, step, grad_scale);
#pragma omp parallel for simd schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t i = 0; i < n; i++) txl_lamb_element(&g[i], p[i], &m[i], &v[i], c);
}

/* noinline: the one compiled loop of axpy and axpy_fused (cpu_util.h) */
static __attribute__((noinline)) void axpy_block(float *restrict y, const float *restrict x, float a, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) txl_axpy_element(&y[i], x[i], a);
}

void txl_cpu_axpy(float *y, const float *x, float a, int64_t n) {
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    axpy_block(y + i0, x + i0, a, len);
  }
}

/* The fused passes: the unfused op's blocks, each block's gradient (SGD's g, LAMB's u) zeroed
 * while it is in the cache. */
void txl_cpu_sgd_fused(float *p, void *p_act, float *g, float *buf, int64_t n, const TxlOptimStep *s,
                       const float *grad_scale) {
  txl_cpu_check_act_copy(p_act, p, "sgd_fused");
  if (isnan(*grad_scale)) return; /* the updates are halted (kernels/common/clip.h) */
  const float gs = *grad_scale, lr = s->lr, momentum = s->momentum;
  const int first = s->first;
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    sgd_block(p + i0, g + i0, buf + i0, len, lr, momentum, gs, first);
    memset(g + i0, 0, (size_t)len * sizeof(float));
  }
}

void txl_cpu_axpy_fused(float *y, void *y_act, float *x, float a, int64_t n) {
  txl_cpu_check_act_copy(y_act, y, "axpy_fused");
  const int64_t blk = TXL_CPU_OPT_BLOCK, nblk = (n + blk - 1) / blk;
#pragma omp parallel for schedule(static) if (n >= TXL_CPU_PAR_MIN_ELEMS)
  for (int64_t b = 0; b < nblk; b++) {
    const int64_t i0 = b * blk, len = n - i0 < blk ? n - i0 : blk;
    axpy_block(y + i0, x + i0, a, len);
    memset(x + i0, 0, (size_t)len * sizeof(float));
  }
}
