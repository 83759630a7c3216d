/* Sinusoidal relative-position embedding R [K, d] (rows ld apart): row p is position K-1-p
 * (clamped). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sincos */
#endif
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

#define TXL_POSEMB_FREQ_CHUNK 256

void txl_cpu_posemb_forward(void *R_, int K, int d, int ld, int clamp_len) {
  float *R = R_;
  if (d % 2 != 0) txl_fatal("posemb_forward: d = %d must be even", d);
  const int half = d / 2;
#pragma omp parallel if ((int64_t)K * d >= TXL_CPU_PAR_MIN_WORK / 4)
  for (int i0 = 0; i0 < half; i0 += TXL_POSEMB_FREQ_CHUNK) {
    const int ni = half - i0 < TXL_POSEMB_FREQ_CHUNK ? half - i0 : TXL_POSEMB_FREQ_CHUNK;
    double f[TXL_POSEMB_FREQ_CHUNK]; /* f_i = 1 / 10000^(2i/d), per thread */
    for (int i = 0; i < ni; i++) f[i] = 1.0 / pow(10000.0, (2.0 * (i0 + i)) / d);
#pragma omp for schedule(static)
    for (int p = 0; p < K; p++) {
      int pos = K - 1 - p;
      if (clamp_len > 0 && pos > clamp_len) pos = clamp_len;
      float *row = R + (int64_t)p * ld;
      for (int i = 0; i < ni; i++) {
        double s, c;
        sincos((double)pos * f[i], &s, &c);
        row[i0 + i] = (float)s;
        row[half + i0 + i] = (float)c;
      }
    }
  }
}
