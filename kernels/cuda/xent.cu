/* Softmax cross-entropy per row with the max shift, as the CPU backend:
 *   loss[t] = log(sum_j exp(x[t,j] - m)) + (m - x[t, target[t]]),  m = max_j x[t, j];
 * and, when grad_scale != 0, the logits are overwritten with the gradient
 *   x[t, j] = exp(x[t,j] - m) * (grad_scale / sum) - (j == target[t] ? grad_scale : 0).
 *   logits [n, V] (rows ld >= V apart) of type T (float, txl_bf16 or txl_fp16, see cuda_util.h: read widened, the gradient
 *   rounded once when stored), target [n], loss [n] (fp32)
 *
 * One block per row. Pass 1 reads the row once with an online max / sum (each thread keeps a
 * running max m and sum s of exp(x - m), rescaling s when m grows); the per-thread pairs are
 * combined in a fixed order (warp butterflies, then warp 0 over the warps), so the result is
 * deterministic. Pass 2 writes the gradient.
 *
 * A row of target < 0 is padding (adaptive_group's): loss 0, gradient 0. A target >= V gives loss NaN (the CPU backend stops with an error instead; here
 * that would cost a device-to-host copy per call). The corpus reader checks token ids. */
#include <math.h>

#include "kernels/cuda/act.h"

/* (m, s) of two parts -> (m, s) of their union. An empty part is (-inf, 0). */
static __device__ __forceinline__ void combine(float &m, float &s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return; /* both empty (or all -inf): keep (-inf, s) */
  s = (m == -INFINITY ? 0.0f : s * expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - mm));
  m = mm;
}

template <typename T>
static __global__ void xent_kernel(T *logits, float *loss, const int32_t *target, float grad_scale,
                                   int64_t n, int V, int ld) {
  __shared__ float sm[TXL_CUDA_THREADS / 32], ss[TXL_CUDA_THREADS / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) { /* t is uniform across the block */
    T *x = logits + t * ld;
    const int tg = target[t];
    if (tg < 0) { /* padding (adaptive_group): uniform across the block, no barrier skipped */
      if (grad_scale != 0.0f)
        for (int j = threadIdx.x; j < V; j += blockDim.x) txl_st(&x[j], 0.0f);
      if (threadIdx.x == 0) loss[t] = 0.0f;
      continue;
    }
    const bool tg_ok = tg < V;
    const float xt = tg_ok ? txl_ld(&x[tg]) : NAN; /* read before any thread overwrites the row */

    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
      const float v = txl_ld(&x[j]);
      if (v > m) {
        s = s * expf(m - v) + 1.0f; /* m = -inf at first: s = 0 * 0 + 1 */
        m = v;
      } else {
        s += expf(v - m); /* NaN logits make s NaN, as they should */
      }
    }
    for (int o = 16; o > 0; o >>= 1)
      combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (lane == 0) {
      sm[warp] = m;
      ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
      m = lane < nwarps ? sm[lane] : -INFINITY;
      s = lane < nwarps ? ss[lane] : 0.0f;
      for (int o = 16; o > 0; o >>= 1)
        combine(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
      if (lane == 0) {
        sm[0] = m;
        ss[0] = s;
        loss[t] = logf(s) + (m - xt);
      }
    }
    __syncthreads();
    m = sm[0];
    s = ss[0];
    if (grad_scale != 0.0f) {
      const float k = grad_scale / s;
      for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float g = expf(txl_ld(&x[j]) - m) * k;
        txl_st(&x[j], j == tg ? g - grad_scale : g);
      }
    }
    __syncthreads(); /* sm, ss are rewritten by the next row */
  }
}

template <typename T>
static void xent_forward_backward(T *logits, float *loss, const int32_t *target, float grad_scale,
                                  int64_t n, int V, int ld) {
  if (n <= 0 || V <= 0) return;
  const unsigned int blocks = (unsigned int)(n < (1 << 20) ? n : (1 << 20));
  TXL_LAUNCH(xent_kernel<T>, blocks, TXL_CUDA_THREADS, 0)(logits, loss, target, grad_scale, n, V, ld);
  CUDA_LAUNCH_CHECK();
}

/* One thread: the terms in order, as the host loop adds them (a parallel sum would change the
 * bits). n is a segment's rows x columns, a few thousand at most per call. */
static __global__ void loss_sum_kernel(double *sum, const float *loss, int64_t n, int add) {
  double s = add ? *sum : 0.0;
  for (int64_t t = 0; t < n; t++) s += (double)loss[t];
  *sum = s;
}

extern "C" void txl_cuda_loss_sum(double *sum, const float *loss, int64_t n, int add) {
  TXL_LAUNCH(loss_sum_kernel, 1, 1, 0)(sum, loss, n, add);
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT>
void txl_act_xent_forward_backward(void *logits, float *loss, const int32_t *target, float grad_scale, int64_t n,
                                   int V, int ld) {
  xent_forward_backward(static_cast<typename TxlAct<AT>::T *>(logits), loss, target, grad_scale, n, V, ld);
}
TXL_CUDA_ACT_ENTRIES(xent_forward_backward)
