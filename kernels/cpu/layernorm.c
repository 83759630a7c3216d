/* Layer norm over the last dimension, as torch.nn.LayerNorm:
 *   mean = sum(x) / d,  var = sum((x - mean)^2) / d (biased),  rstd = 1 / sqrt(var + eps),
 *   out = (x - mean) * rstd * w + b.
 * The backward adds into dinp (+=, residual stream; skipped when dinp is NULL) and into dw, db
 * (+=, parameters). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

void txl_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, int64_t n, int d, float eps) {
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t r = 0; r < n; r++) {
    const float *x = inp + r * d;
    float *y = out + r * d;
    float s = 0.0f; /* two passes in float: the mean, then the squared deviations */
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < d; j++) s += x[j];
    const float mu = s / (float)d;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int j = 0; j < d; j++) {
      const float c = x[j] - mu;
      ss += c * c;
    }
    const float rs = 1.0f / sqrtf(ss / (float)d + eps);
#pragma omp simd
    for (int j = 0; j < d; j++) y[j] = (x[j] - mu) * rs * w[j] + b[j];
    mean[r] = mu;
    rstd[r] = rs;
  }
}

/* dinp: row-parallel. dw, db: column blocks, each summed over all rows in order (in double), so
 * that the result does not depend on the thread count. */
void txl_cpu_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, const float *mean,
                                const float *rstd, int64_t n, int d) {
  const int par = n * d >= TXL_CPU_PAR_MIN_WORK;
  const int nblk = (d + TXL_CPU_COL_BLOCK - 1) / TXL_CPU_COL_BLOCK;
#pragma omp parallel if (par)
  {
    /* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w,  xhat = (x - mean) rstd */
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < (dinp ? n : 0); r++) {
      const float *x = inp + r * d, *dy = dout + r * d;
      float *dx = dinp + r * d;
      const float mu = mean[r], rs = rstd[r];
      float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
      for (int j = 0; j < d; j++) {
        const float g = dy[j] * w[j];
        sg += g;
        sgx += g * ((x[j] - mu) * rs);
      }
      const float mg = sg / (float)d, mgx = sgx / (float)d;
#pragma omp simd
      for (int j = 0; j < d; j++) {
        const float xhat = (x[j] - mu) * rs;
        dx[j] += rs * (dy[j] * w[j] - mg - xhat * mgx);
      }
    }
#pragma omp for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
      const int j0 = blk * TXL_CPU_COL_BLOCK;
      const int bw = d - j0 < TXL_CPU_COL_BLOCK ? d - j0 : TXL_CPU_COL_BLOCK;
      double aw[TXL_CPU_COL_BLOCK] = {0}, ab[TXL_CPU_COL_BLOCK] = {0};
      for (int64_t r = 0; r < n; r++) {
        const float *x = inp + r * d + j0, *dy = dout + r * d + j0;
        const float mu = mean[r], rs = rstd[r];
#pragma omp simd
        for (int j = 0; j < bw; j++) {
          aw[j] += (double)(dy[j] * ((x[j] - mu) * rs));
          ab[j] += (double)dy[j];
        }
      }
      for (int j = 0; j < bw; j++) {
        dw[j0 + j] = (float)((double)dw[j0 + j] + aw[j]);
        db[j0 + j] = (float)((double)db[j0 + j] + ab[j]);
      }
    }
  }
}
