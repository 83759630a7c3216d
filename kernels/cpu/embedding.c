/* Word embedding lookup and its gradient. demb accumulates (+=, parameter). A token id below 0 is
 * adaptive_group's padding: a row of zeros forward, nothing added backward. */
#include <omp.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_embedding_forward(void *out_, const int32_t *tok, const void *emb_, float scale,
                               int64_t n, int d, int lde, int ldo) {
  float *out = out_;
  const float *emb = emb_;
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t t = 0; t < n; t++) {
    float *o = out + t * ldo;
    if (tok[t] < 0) { /* padding (adaptive_group) */
      for (int j = 0; j < d; j++) o[j] = 0.0f;
      continue;
    }
    const float *e = emb + (int64_t)tok[t] * lde;
#pragma omp simd
    for (int j = 0; j < d; j++) o[j] = e[j] * scale;
  }
}

/* Each thread owns a contiguous range of features (whole cache lines) and walks all tokens in
 * order: repeated token ids never race, and every element receives its additions in token
 * order whatever the number of threads, so the result is deterministic. */
void txl_cpu_embedding_backward(void *demb_, TxlDtype demb_type, const void *dout_,
                                const int32_t *tok, float scale, int64_t n, int d, int lde,
                                int ldo) {
  txl_cpu_require_f32(demb_type, "embedding_backward");
  float *demb = demb_;
  const float *dout = dout_;
#pragma omp parallel if (n * d >= TXL_CPU_PAR_MIN_WORK)
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int lines = (d + 15) / 16; /* 16 floats = one 64-byte line */
    const int j0 = 16 * (int)((int64_t)lines * id / nt);
    int j1 = 16 * (int)((int64_t)lines * (id + 1) / nt);
    if (j1 > d) j1 = d;
    for (int64_t t = 0; t < n && j0 < j1; t++) {
      if (tok[t] < 0) continue; /* padding (adaptive_group) */
      float *g = demb + (int64_t)tok[t] * lde;
      const float *o = dout + t * ldo;
#pragma omp simd
      for (int j = j0; j < j1; j++) g[j] += o[j] * scale;
    }
  }
}
