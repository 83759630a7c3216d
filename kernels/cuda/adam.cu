/* Adam (the math is kernels/common/adam.h, shared with the CPU backend).
 *   p, g, m, v [n]; one thread per element (grid-stride). */
#include "kernels/common/adam.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void adam_kernel(float *p, const float *g, float *m, float *v, int64_t n, TxlAdamCoef c) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    txl_adam_element(&p[i], g[i], &m[i], &v[i], c);
}

extern "C" void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n,
                                     float lr, float beta1, float beta2, float eps, int step,
                                     float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  if (n <= 0) return;
  const TxlAdamCoef c = txl_adam_coef(lr, beta1, beta2, eps, step, grad_scale);
  TXL_LAUNCH(adam_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(p, g, m, v, n, c);
  CUDA_LAUNCH_CHECK();
}
