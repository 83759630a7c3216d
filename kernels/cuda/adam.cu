/* Adam and its fused pass (the math is kernels/common/adam.h, shared with the CPU backend).
 *   p, g, m, v [n]; one thread per element (grid-stride).
 * adam_update and adam_fused launch the one kernel below, so the element math is compiled once
 * and both ops give the same bits: whether a compiler contracts a * b + c into a fused
 * multiply-add may depend on the code around it (the host compiler of the emulator does), which
 * two kernels of their own would not share. */
#include "kernels/common/adam.h"
#include "kernels/cuda/act.h"

/* The element's update, p's copy (txl_st_copy), and g[i] = 0 when zero (unfused: g only read). */
/* s NULL: c as given (unfused); else the update's constants and the factor gs on the device
 * (ops.def), a NaN factor writing nothing (kernels/common/clip.h). */
static __global__ void adam_kernel(float *p, void *p_act, TxlDtype copy, float *g, int zero, float *m, float *v,
                                   int64_t n, TxlAdamCoef c, const TxlOptimStep *s, const float *gs) {
  if (s) {
    c = s->adam;
    c.grad_scale = *gs;
    if (isnan(c.grad_scale)) return;
  }
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    txl_adam_element(&p[i], g[i], &m[i], &v[i], c);
    txl_st_copy(p_act, copy, i, p[i]);
    if (zero) g[i] = 0.0f;
  }
}

static void launch(float *p, void *p_act, TxlDtype copy, float *g, int zero, float *m, float *v, int64_t n,
                   TxlAdamCoef c, const TxlOptimStep *s, const float *gs) {
  if (n <= 0) return;
  TXL_LAUNCH(adam_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(p, p_act, copy, g, zero, m, v,
                                                                                     n, c, s, gs);
  CUDA_LAUNCH_CHECK();
}

extern "C" void txl_cuda_adam_update(float *p, const float *g, float *m, float *v, int64_t n,
                                     float lr, float beta1, float beta2, float eps, int step,
                                     float grad_scale) {
  if (step < 1) txl_fatal("adam_update: step %d must be >= 1 (1-based)", step);
  /* g is only read (zero = 0): the cast leaves it as it is */
  launch(p, nullptr, TXL_F32, const_cast<float *>(g), 0, m, v, n,
         txl_adam_coef(lr, beta1, beta2, eps, step, grad_scale), nullptr, nullptr);
}

/* The fused pass on the table of activation type AT: p's copy of that type (none in fp32). */
template <TxlDtype AT>
void txl_act_adam_fused(float *p, void *p_act, float *g, float *m, float *v, int64_t n, const TxlOptimStep *s,
                        const float *grad_scale) {
  txl_cuda_check_act_copy(p_act, p, AT, "adam_fused");
  launch(p, p_act, AT, g, 1, m, v, n, TxlAdamCoef{}, s, grad_scale);
}
TXL_CUDA_ACT_ENTRIES(adam_fused)
