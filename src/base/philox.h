/* Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers: as easy as 1, 2, 3"): a
 * counter-based generator, so any random number can be computed from its coordinates alone,
 * on any device, in any order. Shared by the CPU and CUDA backends, the model's initialisation and
 * the data's shuffles (so here, below all of them; header-only, host and device), and mirrored bit
 * for bit by tests/reference. Known answer: counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8. */
#ifndef TXL_BASE_PHILOX_H
#define TXL_BASE_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define TXL_HD __host__ __device__
#else
#define TXL_HD
#endif

typedef struct { uint32_t v[4]; } TxlPhilox4;

static inline TXL_HD TxlPhilox4 txl_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                   uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  TxlPhilox4 r = {{c0, c1, c2, c3}};
  return r;
}

#endif
