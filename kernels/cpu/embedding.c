/* Word embedding lookup and its gradient. demb accumulates (+=, parameter). */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_embedding_forward(float *out, const int32_t *tok, const float *emb, float scale,
                               int64_t n, int d) {
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t t = 0; t < n; t++) {
    const float *e = emb + (int64_t)tok[t] * d;
    float *o = out + t * d;
#pragma omp simd
    for (int j = 0; j < d; j++) o[j] = e[j] * scale;
  }
}

/* Feature blocks of one cache line: each block is owned by one thread, which walks all tokens
 * in order, so repeated token ids never race and every element's sum has a fixed order. */
#define TXL_EMB_BLOCK 16

void txl_cpu_embedding_backward(float *demb, const float *dout, const int32_t *tok, float scale,
                                int64_t n, int d) {
  const int nblk = (d + TXL_EMB_BLOCK - 1) / TXL_EMB_BLOCK;
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int blk = 0; blk < nblk; blk++) {
    const int j0 = blk * TXL_EMB_BLOCK;
    const int w = d - j0 < TXL_EMB_BLOCK ? d - j0 : TXL_EMB_BLOCK;
    for (int64_t t = 0; t < n; t++) {
      float *g = demb + (int64_t)tok[t] * d + j0;
      const float *o = dout + t * d + j0;
#pragma omp simd
      for (int j = 0; j < w; j++) g[j] += o[j] * scale;
    }
  }
}
