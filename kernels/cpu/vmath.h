/* Vectorisable single-precision math for the CPU kernels (private to kernels/cpu).
 * glibc's expf is not vectorised without -ffast-math; this one is (no calls; its clamps become
 * vector selects where the file is compiled with -fno-trapping-math, as kernels/CMakeLists.txt
 * compiles the files that use it: without it GCC keeps a branch per element on AVX2). */
#ifndef TXL_KERNELS_CPU_VMATH_H
#define TXL_KERNELS_CPU_VMATH_H

#include <stdint.h>

/* exp(x) in float, within 2 ulp of the exact value for x in [-87.3, 88] (Cephes' expf
 * polynomial on a Cody-Waite reduced argument). Below -87.33 (where exp leaves the normal
 * range) it returns 0; above 88 it returns exp(88); NaN stays NaN. */
static inline float txl_expf(float x) {
  union { float f; uint32_t i; } t, s; /* unsigned: no overflow UB for NaN */
  const float lo = -87.33654f, hi = 88.0f;
  const float xc = x < lo ? lo : (x > hi ? hi : x); /* comparisons keep a NaN */
  /* n = round(x / ln 2) by the 1.5 * 2^23 trick; r = x - n ln 2 in two pieces */
  t.f = xc * 1.44269504088896341f + 12582912.0f;
  const float n = t.f - 12582912.0f;
  const uint32_t ni = t.i - 0x4B400000u; /* n as a two's-complement integer */
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  s.i = (ni + 127u) << 23;
  const float e = y * s.f;
  return x < lo ? 0.0f : e;
}

#endif
