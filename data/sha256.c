/* SHA-256 as specified in FIPS 180-4, section 6.2. Plain C, no dependencies; on x86-64 CPUs with
 * the SHA extensions (SHA-NI) the blocks go through those instead, about ten times as fast: the
 * checkpoints' digest streams whole files of up to gigabytes through it (src/checkpoint). */
#include "data/sha256.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TXL_SHA_NI 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void compress(uint32_t h[8], const unsigned char *block) {
  uint32_t w[64];
  for (int t = 0; t < 16; t++)
    w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
           (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
  for (int t = 16; t < 64; t++) {
    uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int t = 0; t < 64; t++) {
    uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = hh + S1 + ch + K[t] + w[t];
    uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    uint32_t t2 = S0 + maj;
    hh = g; g = f; f = e; e = d + t1;
    d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d;
  h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void txl_sha256_init(TxlSha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->n_bytes = 0;
  s->buf_len = 0;
}

#ifdef TXL_SHA_NI
/* n blocks through the SHA-NI rounds: the state as two vectors ABEF and CDGH, each group of four
 * message words W_j (j >= 4) from W_{j-4}..W_{j-1} by sha256msg1 / msg2 (FIPS 180-4's schedule). */
__attribute__((target("sha,sse4.1,ssse3"))) static void compress_ni(uint32_t h[8], const unsigned char *p,
                                                                     size_t n) {
  const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL); /* big endian */
  __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1);    /* CDAB */
  __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B);   /* EFGH */
  __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                           /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                                                /* CDGH */
  for (; n > 0; n--, p += 64) {
    const __m128i abef = s0, cdgh = s1;
    __m128i m[4];
    for (int j = 0; j < 16; j++) {
      __m128i w;
      if (j < 4) {
        w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), mask);
      } else { /* m[j % 4] is W_{j-4}, m[(j+1) % 4] W_{j-3}, m[(j+2) % 4] W_{j-2}, m[(j+3) % 4] W_{j-1} */
        w = _mm_sha256msg1_epu32(m[j % 4], m[(j + 1) % 4]);
        w = _mm_add_epi32(w, _mm_alignr_epi8(m[(j + 3) % 4], m[(j + 2) % 4], 4));
        w = _mm_sha256msg2_epu32(w, m[(j + 3) % 4]);
      }
      m[j % 4] = w;
      __m128i k = _mm_add_epi32(w, _mm_loadu_si128((const __m128i *)&K[4 * j]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, k);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);  /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1); /* DCHG */
  _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0)); /* DCBA */
  _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));    /* HGFE */
}

/* 1 when the CPU has the SHA extensions and SSE4.1 (asked once). */
static int have_sha_ni(void) {
  static int known = -1;
  if (known < 0) {
    unsigned a, b, c, d;
    const int sse41 = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)) && (c & (1u << 9));
    known = sse41 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
  }
  return known;
}
#endif

/* n whole blocks of p into h. */
static void compress_blocks(uint32_t h[8], const unsigned char *p, size_t n) {
#ifdef TXL_SHA_NI
  if (have_sha_ni()) {
    compress_ni(h, p, n);
    return;
  }
#endif
  for (; n > 0; n--, p += 64) compress(h, p);
}

void txl_sha256_update(TxlSha256 *s, const void *data, size_t len) {
  const unsigned char *p = data;
  s->n_bytes += len;
  if (s->buf_len > 0) {
    size_t take = 64 - s->buf_len < len ? 64 - s->buf_len : len;
    memcpy(s->buf + s->buf_len, p, take);
    s->buf_len += take;
    p += take;
    len -= take;
    if (s->buf_len < 64) return;
    compress_blocks(s->h, s->buf, 1);
    s->buf_len = 0;
  }
  compress_blocks(s->h, p, len / 64);
  p += len / 64 * 64;
  len %= 64;
  memcpy(s->buf, p, len);
  s->buf_len = len;
}

void txl_sha256_final(TxlSha256 *s, unsigned char digest[32], char hex[65]) {
  uint64_t bits = s->n_bytes * 8;
  unsigned char pad[72];
  size_t pad_len = (s->buf_len < 56 ? 56 : 120) - s->buf_len;
  memset(pad, 0, sizeof pad);
  pad[0] = 0x80;
  for (int i = 0; i < 8; i++) pad[pad_len + i] = (unsigned char)(bits >> (56 - 8 * i));
  uint64_t n = s->n_bytes; /* update() counts the padding; restore the message length after */
  txl_sha256_update(s, pad, pad_len + 8);
  s->n_bytes = n;
  for (int i = 0; i < 8; i++) {
    digest[4 * i] = (unsigned char)(s->h[i] >> 24);
    digest[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
    digest[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
    digest[4 * i + 3] = (unsigned char)s->h[i];
  }
  if (hex) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
      hex[2 * i] = digits[digest[i] >> 4];
      hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
  }
}

void txl_sha256_hex(const void *data, size_t len, char hex[65]) {
  TxlSha256 s;
  unsigned char d[32];
  txl_sha256_init(&s);
  txl_sha256_update(&s, data, len);
  txl_sha256_final(&s, d, hex);
}
