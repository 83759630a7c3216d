/* Word embedding lookup: out[t, :] = emb[tok[t], :] * scale.
 *   out [n, d], tok [n], emb [V, d]; one thread per output element.
 * The token ids are trusted (the corpus reader checks them against the vocabulary). */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void embedding_forward_kernel(float *out, const int32_t *tok, const float *emb,
                                                float scale, int64_t n, int d) {
  const int64_t total = n * d;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = e / d, j = e % d;
    out[e] = emb[(int64_t)tok[t] * d + j] * scale;
  }
}

extern "C" void txl_cuda_embedding_forward(float *out, const int32_t *tok, const float *emb,
                                           float scale, int64_t n, int d) {
  if (n <= 0 || d <= 0) return;
  embedding_forward_kernel<<<txl_cuda_blocks(n * d, TXL_CUDA_THREADS), TXL_CUDA_THREADS>>>(
      out, tok, emb, scale, n, d);
  CUDA_LAUNCH_CHECK();
}
