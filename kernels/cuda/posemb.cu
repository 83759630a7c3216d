/* Sinusoidal relative-position embedding, as the CPU backend (kernels/cpu/posemb.c):
 *   R[p, i] = sin(pos f_i),  R[p, d/2 + i] = cos(pos f_i),  f_i = 1 / 10000^(2i/d),
 *   pos = K-1-p, clamped to clamp_len when clamp_len > 0;
 * computed in double and rounded to float (then to bf16 or fp16 for those tables: stored through
 * txl_st, see cuda_util.h).   R [K, d] (rows ld apart), d even
 *
 * One thread per (p, i), i < d/2, grid-stride; it writes both the sine and the cosine. The
 * double operations are those of the CPU (2i / d, pow, the division, pos * f_i, sin, cos); the
 * results may differ from the CPU's only where the device's double pow / sin / cos (a few ulp of
 * double) and glibc's round differently, which moves the float result by at most one float ulp
 * and almost never at all. */
#include "kernels/cuda/act.h"

template <typename T>
static __global__ void posemb_kernel(T *R, int K, int d, int ld, int clamp_len) {
  const int half = d / 2;
  const int64_t total = (int64_t)K * half;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int p = (int)(e / half), i = (int)(e % half);
    int pos = K - 1 - p;
    if (clamp_len > 0 && pos > clamp_len) pos = clamp_len;
    const double f = 1.0 / pow(10000.0, (2.0 * i) / d);
    const double arg = (double)pos * f;
    T *row = R + (int64_t)p * ld;
    txl_st(&row[i], (float)sin(arg));
    txl_st(&row[half + i], (float)cos(arg));
  }
}

template <typename T>
static void posemb_forward(T *R, int K, int d, int ld, int clamp_len) {
  if (d % 2 != 0) txl_fatal("posemb_forward: d = %d must be even", d);
  if (K <= 0 || d <= 0) return;
  const int64_t total = (int64_t)K * (d / 2);
  TXL_LAUNCH(posemb_kernel<T>, txl_cuda_blocks(total, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      R, K, d, ld, clamp_len);
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT> void txl_act_posemb_forward(void *R, int K, int d, int ld, int clamp_len) {
  posemb_forward(static_cast<typename TxlAct<AT>::T *>(R), K, d, ld, clamp_len);
}
TXL_CUDA_ACT_ENTRIES(posemb_forward)
