/* bfloat16 storage: the upper 16 bits of an IEEE fp32 (sign, 8-bit exponent, 7-bit mantissa).
 * Activations of a bf16 run are stored in it; every op computes in fp32 after widening.
 * Shared by the host, the CPU reference of the tests and the CUDA kernels, so a value rounds
 * the same way everywhere. Bit-compatible with cuBLAS's CUDA_R_16BF and __nv_bfloat16.
 *
 * Rounding: to nearest, ties to even (as cvt.rn.bf16.f32); a NaN stays a NaN (its payload is
 * made quiet so the rounding can never carry it into an infinity); infinities stay infinities.
 * Relative error of a rounding: at most 2^-8 (u = 2^-8 for the tolerance arguments). */
#ifndef TXL_KERNELS_BF16_H
#define TXL_KERNELS_BF16_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TXL_BF16_HD __host__ __device__
#else
#define TXL_BF16_HD
#endif

typedef uint16_t txl_bf16;

static inline TXL_BF16_HD txl_bf16 txl_bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (txl_bf16)((u >> 16) | 0x0040u); /* NaN: quiet */
  u += 0x7fffu + ((u >> 16) & 1u); /* ties to even */
  return (txl_bf16)(u >> 16);
}

static inline TXL_BF16_HD float txl_bf16_to_float(txl_bf16 h) {
  const uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* f rounded to bf16 and back: the value a bf16 store keeps. */
static inline TXL_BF16_HD float txl_bf16_round(float f) { return txl_bf16_to_float(txl_bf16_from_float(f)); }

#endif
