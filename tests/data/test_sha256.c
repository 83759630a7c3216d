/* data/sha256.c against the FIPS 180-2 / NIST example vectors, whole and fed in pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/sha256.h"

static int failures = 0;

static void check(const char *what, const char *got, const char *want) {
  int ok = strcmp(got, want) == 0;
  printf("%s sha256(%s) = %s\n", ok ? "ok  " : "FAIL", what, got);
  if (!ok) {
    printf("     expected          %s\n", want);
    failures++;
  }
}

int main(void) {
  char hex[65];
  txl_sha256_hex("", 0, hex);
  check("\"\"", hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  txl_sha256_hex("abc", 3, hex);
  check("\"abc\"", hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits */
  txl_sha256_hex(two, strlen(two), hex);
  check("448-bit message", hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *four = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                     "klmnopqrlmnopqrsmnopqrstnopqrstu"; /* 896 bits */
  txl_sha256_hex(four, strlen(four), hex);
  check("896-bit message", hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");

  /* one million 'a', fed in uneven pieces (exercises the partial-block buffering) */
  char *a = malloc(1000000);
  memset(a, 'a', 1000000);
  TxlSha256 s;
  unsigned char d[32];
  txl_sha256_init(&s);
  size_t done = 0, piece = 1;
  while (done < 1000000) {
    size_t n = piece < 1000000 - done ? piece : 1000000 - done;
    txl_sha256_update(&s, a + done, n);
    done += n;
    piece = piece * 3 % 1000 + 1;
  }
  txl_sha256_final(&s, d, hex);
  check("1,000,000 x 'a' in pieces", hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(a);

  /* every length 0..200 of a pattern: whole == byte by byte (padding boundaries 55, 56, 64) */
  char buf[201];
  for (int i = 0; i < 200; i++) buf[i] = (char)('a' + i % 26);
  int split_ok = 1;
  for (size_t n = 0; n <= 200; n++) {
    char h1[65], h2[65];
    txl_sha256_hex(buf, n, h1);
    txl_sha256_init(&s);
    for (size_t i = 0; i < n; i++) txl_sha256_update(&s, buf + i, 1);
    txl_sha256_final(&s, d, h2);
    if (strcmp(h1, h2)) split_ok = 0;
  }
  printf("%s whole == byte by byte for lengths 0..200\n", split_ok ? "ok  " : "FAIL");
  failures += !split_ok;

  printf("%s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
