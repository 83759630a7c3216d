/* Sinusoidal relative-position embedding R [K, d]: row p is position K-1-p (clamped). */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "src/base/error.h"

void txl_cpu_posemb_forward(float *R, int K, int d, int clamp_len) {
  if (d % 2 != 0) txl_fatal("posemb_forward: d = %d must be even", d);
  const int half = d / 2;
#pragma omp parallel for schedule(static) if ((int64_t)K * d >= TXL_CPU_PAR_MIN_WORK / 4)
  for (int p = 0; p < K; p++) {
    int pos = K - 1 - p;
    if (clamp_len > 0 && pos > clamp_len) pos = clamp_len;
    float *row = R + (int64_t)p * d;
    for (int i = 0; i < half; i++) {
      const double f = 1.0 / pow(10000.0, (2.0 * i) / d);
      const double a = (double)pos * f;
      row[i] = (float)sin(a);
      row[half + i] = (float)cos(a);
    }
  }
}
