/* FNV-1a, 64 bit: a fingerprint of a buffer (replica checks, the vocabularies' hash tables,
 * tests). Not cryptographic. */
#ifndef TXL_BASE_HASH_H
#define TXL_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TXL_HASH_START 1469598103934665603ull /* FNV-1a's offset basis: the hash of nothing */

/* The hash h of some bytes continued over p[0, n). */
static inline uint64_t txl_hash_more(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

static inline uint64_t txl_hash_bytes(const void *p, size_t n) { return txl_hash_more(TXL_HASH_START, p, n); }

#endif
