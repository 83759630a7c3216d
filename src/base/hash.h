/* FNV-1a, 64 bit: a fingerprint of a buffer (replica checks, tests). Not cryptographic. */
#ifndef TXL_BASE_HASH_H
#define TXL_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t txl_hash_bytes(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

#endif
