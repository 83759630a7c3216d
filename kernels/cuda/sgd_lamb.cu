/* SGD with momentum, LAMB's moments and axpy, and the fused passes of SGD and of LAMB's axpy (the
 * math is kernels/common/sgd_lamb.h, shared with the CPU backend). One thread per element
 * (grid-stride): each element's result is independent of the launch.
 * sgd_update and sgd_fused launch one kernel, axpy and axpy_fused another, so that each pair's
 * element math is compiled once and gives the same bits (as adam.cu says: a contraction into a
 * fused multiply-add may depend on the code around it). */
#include "kernels/common/sgd_lamb.h"
#include "kernels/cuda/act.h"

/* The element's update, p's copy (txl_st_copy), and g[i] = 0 when zero (unfused: g only read). */
/* s NULL: lr, momentum, grad_scale, first as given (unfused); else the update's constants and the
 * factor gs on the device (ops.def), a NaN factor writing nothing (kernels/common/clip.h). */
static __global__ void sgd_kernel(float *p, void *p_act, TxlDtype copy, float *g, int zero, float *buf, int64_t n,
                                  float lr, float momentum, float grad_scale, int first, const TxlOptimStep *s,
                                  const float *gs) {
  if (s) {
    lr = s->lr;
    momentum = s->momentum;
    first = s->first;
    grad_scale = *gs;
    if (isnan(grad_scale)) return;
  }
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    txl_sgd_element(&p[i], g[i], &buf[i], lr, momentum, grad_scale, first);
    txl_st_copy(p_act, copy, i, p[i]);
    if (zero) g[i] = 0.0f;
  }
}

static void sgd(float *p, void *p_act, TxlDtype copy, float *g, int zero, float *buf, int64_t n, float lr,
                float momentum, float grad_scale, int first, const TxlOptimStep *s, const float *gs) {
  if (n <= 0) return;
  TXL_LAUNCH(sgd_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(p, p_act, copy, g, zero, buf, n,
                                                                                    lr, momentum, grad_scale, first, s,
                                                                                    gs);
  CUDA_LAUNCH_CHECK();
}

extern "C" void txl_cuda_sgd_update(float *p, const float *g, float *buf, int64_t n, float lr, float momentum,
                                    float grad_scale, int first) {
  /* g is only read (zero = 0): the cast leaves it as it is */
  sgd(p, nullptr, TXL_F32, const_cast<float *>(g), 0, buf, n, lr, momentum, grad_scale, first, nullptr, nullptr);
}

template <TxlDtype AT>
void txl_act_sgd_fused(float *p, void *p_act, float *g, float *buf, int64_t n, const TxlOptimStep *s,
                       const float *grad_scale) {
  txl_cuda_check_act_copy(p_act, p, AT, "sgd_fused");
  sgd(p, p_act, AT, g, 1, buf, n, 0.0f, 0.0f, 0.0f, 0, s, grad_scale);
}
TXL_CUDA_ACT_ENTRIES(sgd_fused)

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

/* y[i] += a x[i], y's copy (txl_st_copy), and x[i] = 0 when zero (unfused: x only read). */
static __global__ void axpy_kernel(float *y, void *y_act, TxlDtype copy, float *x, int zero, float a, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    txl_axpy_element(&y[i], x[i], a);
    txl_st_copy(y_act, copy, i, y[i]);
    if (zero) x[i] = 0.0f;
  }
}

static void axpy(float *y, void *y_act, TxlDtype copy, float *x, int zero, float a, int64_t n) {
  if (n <= 0) return;
  TXL_LAUNCH(axpy_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(y, y_act, copy, x, zero, a, n);
  CUDA_LAUNCH_CHECK();
}

extern "C" void txl_cuda_axpy(float *y, const float *x, float a, int64_t n) {
  /* x is only read (zero = 0): the cast leaves it as it is */
  axpy(y, nullptr, TXL_F32, const_cast<float *>(x), 0, a, n);
}

template <TxlDtype AT> void txl_act_axpy_fused(float *y, void *y_act, float *x, float a, int64_t n) {
  txl_cuda_check_act_copy(y_act, y, AT, "axpy_fused");
  axpy(y, y_act, AT, x, 1, a, n);
}
TXL_CUDA_ACT_ENTRIES(axpy_fused)
