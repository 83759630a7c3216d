/* The parameters' digest: a 64-bit fingerprint of the bits of n fp32 values, the replica check's
 * (src/train: every rank's digest compared, 8 bytes, instead of the parameters themselves).
 *
 *   digest(x) = sum over i < n of mix(i * K + bits(x[i]))   mod 2^64
 *
 * mix is splitmix64's finalizer (a bijection of 64-bit words) and K an odd constant. For a fixed
 * position i the term is a bijection of the value's bits, so two buffers that differ in ONE
 * element always have different digests; differences in several elements cancel only by chance
 * (about 2^-64). The term depends on the position, so moved values change it too. Integer
 * addition is exact and commutative: every order of summation gives the same bits, so each
 * backend may reduce in parallel in its own order and both backends give the same digest.
 * Shared by the CPU and CUDA backends. */
#ifndef TXL_KERNELS_DIGEST_H
#define TXL_KERNELS_DIGEST_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TXL_DIGEST_HD __host__ __device__
#else
#define TXL_DIGEST_HD
#endif

/* The term of element i holding the bits w. */
static inline TXL_DIGEST_HD uint64_t txl_digest_term(int64_t i, uint32_t w) {
  uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + w;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The bits of an fp32 value (any value: NaN payloads and the sign of zero count). */
static inline TXL_DIGEST_HD uint32_t txl_digest_bits(float x) {
  uint32_t w;
  memcpy(&w, &x, sizeof w);
  return w;
}

#endif
