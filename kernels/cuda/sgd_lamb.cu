/* SGD with momentum, LAMB's moments and axpy (the math is kernels/common/sgd_lamb.h, shared with
 * the CPU backend). One thread per element (grid-stride): each element's result is independent
 * of the launch. */
#include "kernels/common/sgd_lamb.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void sgd_kernel(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                                  float grad_scale, int first) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    txl_sgd_element(&p[i], g[i], &buf[i], lr, momentum, grad_scale, first);
}

extern "C" void txl_cuda_sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                                    float grad_scale, int first) {
  if (n <= 0) return;
  TXL_LAUNCH(sgd_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(p, g, buf, n, lr, momentum,
                                                                                    grad_scale, first);
  CUDA_LAUNCH_CHECK();
}

static __global__ void lamb_kernel(float *g, const float *p, float *m, float *v, int64_t n, TxlLambCoef c) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    txl_lamb_element(&g[i], p[i], &m[i], &v[i], c);
}

extern "C" void txl_cuda_lamb_moments(float *g, const float *p, float *m, float *v, int64_t n, float beta1,
                                      float beta2, float eps, float weight_decay, int step, float grad_scale) {
  if (step < 1) txl_fatal("lamb_moments: step %d must be >= 1 (1-based)", step);
  if (n <= 0) return;
  const TxlLambCoef c = txl_lamb_coef(beta1, beta2, eps, weight_decay, step, grad_scale);
  TXL_LAUNCH(lamb_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(g, p, m, v, n, c);
  CUDA_LAUNCH_CHECK();
}

static __global__ void axpy_kernel(float *y, const float *x, float a, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] += a * x[i];
}

extern "C" void txl_cuda_axpy(float *y, const float *x, float a, int64_t n) {
  if (n <= 0) return;
  TXL_LAUNCH(axpy_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(y, x, a, n);
  CUDA_LAUNCH_CHECK();
}
