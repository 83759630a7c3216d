/* IEEE binary16 (fp16) storage: sign, 5-bit exponent (bias 15), 10-bit mantissa; largest finite
 * 65504, smallest normal 2^-14, subnormals down to 2^-24. Activations of an fp16 run are stored
 * in it; every op computes in fp32 after widening. Shared by the host, the CPU reference of the
 * tests, the CPU emulator and the CUDA kernels, so a value rounds the same way everywhere.
 * Bit-compatible with CUDA's __half and cuBLAS's CUDA_R_16F.
 *
 * txl_fp16 is a struct, not a typedef of uint16_t: txl_bf16 is uint16_t, and the kernels'
 * overloads and templates on the storage type (kernels/cuda/cuda_util.h's txl_ld / txl_st) need
 * a distinct type to get an fp16 instantiation.
 *
 * Rounding (txl_fp16_from_float): the bits of cvt.rn.f16.f32 (and of cuda_fp16.h's
 * __float2half_rn): to nearest, ties to even, with gradual underflow (results below 2^-14 are
 * subnormal multiples of 2^-24; |f| <= 2^-25 becomes a signed zero); |f| >= 65520 (the midpoint
 * between 65504 and 2^16, which ties to the even 2^16) becomes a signed infinity; infinities stay
 * infinities; every NaN becomes the canonical quiet NaN 0x7fff. Widening (txl_fp16_to_float) is
 * exact, a NaN becoming the fp32 NaN 0x7fffffff (as cuda_fp16.h's __half2float on the host). Both
 * were checked bit for bit against cuda_fp16.h's host conversions over every fp32 and every fp16
 * input (CUDA 13.0). The same software code runs on the device: no hardware conversion whose NaN
 * bits could differ.
 * Error of a rounding of a value within range: at most 2^-11 relative (u = 2^-11) for
 * |f| >= 2^-14, at most 2^-25 absolute below (half the subnormal spacing); together
 * |fl(f) - f| <= 2^-11 |f| + 2^-25. */
#ifndef TXL_KERNELS_FP16_H
#define TXL_KERNELS_FP16_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TXL_FP16_HD __host__ __device__
#else
#define TXL_FP16_HD
#endif

typedef struct {
  uint16_t bits;
} txl_fp16;

static inline TXL_FP16_HD txl_fp16 txl_fp16_from_bits(uint16_t bits) {
  txl_fp16 h;
  h.bits = bits;
  return h;
}

static inline TXL_FP16_HD txl_fp16 txl_fp16_from_float(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return txl_fp16_from_bits(0x7fffu);                       /* NaN        */
  if (a >= 0x477ff000u) return txl_fp16_from_bits((uint16_t)(sign | 0x7c00u));   /* >= 65520   */
  if (a >= 0x38800000u) { /* normal: rebias the exponent (127 -> 15), round 13 bits away */
    uint32_t r = a - 0x38000000u;
    r += 0x0fffu + ((r >> 13) & 1u); /* ties to even; a carry moves into the exponent */
    return txl_fp16_from_bits((uint16_t)(sign | (r >> 13)));
  }
  if (a <= 0x33000000u) return txl_fp16_from_bits(sign); /* |f| <= 2^-25: zero (the tie is even) */
  /* subnormal: |f| = m 2^(e-150) with the implicit bit in m, i.e. m >> (126 - e) units of 2^-24
   * (e in [102, 112], so the shift is 14..24); a round up to 0x400 is the smallest normal */
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
  const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  uint32_t q = m >> shift;
  if (rem > half || (rem == half && (q & 1u))) q++;
  return txl_fp16_from_bits((uint16_t)(sign | q));
}

static inline TXL_FP16_HD float txl_fp16_to_float(txl_fp16 h) {
  const uint32_t sign = (uint32_t)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
  uint32_t x;
  if (e == 0x1fu) {
    x = m ? 0x7fffffffu : sign | 0x7f800000u; /* a NaN: the canonical 0x7fffffff; infinity */
  } else if (e != 0) {
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else { /* zero or subnormal: m 2^-24, exact in fp32 */
    float f = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
    memcpy(&x, &f, sizeof x);
    x |= sign;
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* f rounded to fp16 and back: the value an fp16 store keeps. */
static inline TXL_FP16_HD float txl_fp16_round(float f) { return txl_fp16_to_float(txl_fp16_from_float(f)); }

#endif
