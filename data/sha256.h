/* SHA-256 (FIPS 180-4), streaming. Used by txl-prep to record a checksum of each source file. */
#ifndef TXL_DATA_SHA256_H
#define TXL_DATA_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t h[8];          /* chaining state */
  uint64_t n_bytes;       /* total bytes hashed so far */
  unsigned char buf[64];  /* pending partial block */
  size_t buf_len;
} TxlSha256;

void txl_sha256_init(TxlSha256 *s);
void txl_sha256_update(TxlSha256 *s, const void *data, size_t len);
/* Finishes the hash: digest (32 bytes) and, when hex is not NULL, its lower-case hex string
 * (65 bytes with the terminating NUL). The state must be initialised again before reuse. */
void txl_sha256_final(TxlSha256 *s, unsigned char digest[32], char hex[65]);
/* One-shot convenience: hex digest of a buffer. */
void txl_sha256_hex(const void *data, size_t len, char hex[65]);

#endif
