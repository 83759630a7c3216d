/* Adam as torch.optim.Adam (no weight decay, no amsgrad), on g' = g * grad_scale:
 *   m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2;
 *   p -= step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps),  step_size = lr / (1 - b1^t).
 * The bias corrections are computed on the host in double and used as float, exactly as the
 * CPU backend does.   p, g, m, v [n]; one thread per element. */
#include <math.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void adam_kernel(float *p, const float *g, float *m, float *v, int64_t n,
                                   float step_size, float bc2_sqrt, float b1, float b2, float c1,
                                   float c2, float eps, float grad_scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float gi = g[i] * grad_scale;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
  }
}

extern "C" void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n,
                                     float lr, float beta1, float beta2, float eps, int step,
                                     float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  if (n <= 0) return;
  const double bc1 = 1.0 - pow((double)beta1, step);
  const double bc2 = 1.0 - pow((double)beta2, step);
  const float step_size = (float)((double)lr / bc1);
  const float bc2_sqrt = (float)sqrt(bc2);
  adam_kernel<<<txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS>>>(
      p, g, m, v, n, step_size, bc2_sqrt, beta1, beta2, 1.0f - beta1, 1.0f - beta2, eps,
      grad_scale);
  CUDA_LAUNCH_CHECK();
}
