/* The main of a harness built without libFuzzer (the normal build, with gcc, and its sanitizer
 * build): runs each input file given once, as a libFuzzer binary does with file arguments, so the
 * seeds and the inputs of defects found (tests/fuzz/regressions) are checked by ctest everywhere.
 * With -flips, each input is also run with every one of its bytes inverted in turn (every
 * single-byte damage of a file); -flips=N: of its first N bytes. -bitflips (=N) likewise with
 * every single bit of those bytes flipped in turn (8 runs a byte). Other arguments starting with
 * '-' (libFuzzer flags) are ignored. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static uint8_t *read_all(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
    exit(1);
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fprintf(stderr, "replay: out of memory reading %s\n", path);
      exit(1);
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  if (ferror(f)) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  *size = n;
  return buf;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int flips = 0, bits = 0;
  size_t flip_bytes = SIZE_MAX;
  long runs = 0;
  for (int i = 1; i < argc; i++) {
    const int b = !strncmp(argv[i], "-bitflips", 9);
    const char *rest = argv[i] + (b ? 9 : 6); /* after "-bitflips" or "-flips" */
    if (b || !strncmp(argv[i], "-flips", 6)) {
      flips = 1;
      bits = b;
      if (*rest == '=') flip_bytes = (size_t)strtoull(rest + 1, NULL, 10);
    }
  }
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    size_t size;
    uint8_t *data = read_all(argv[i], &size);
    const size_t n_flips = flips ? (size < flip_bytes ? size : flip_bytes) : 0;
    if (flips)
      printf("replay: %s (%zu bytes; each %s of the first %zu inverted in turn)\n", argv[i], size,
             bits ? "bit of each" : "of", n_flips);
    else
      printf("replay: %s (%zu bytes)\n", argv[i], size);
    fflush(stdout);
    LLVMFuzzerTestOneInput(data, size);
    runs++;
    for (size_t k = 0; k < n_flips; k++)
      for (int bit = 0; bit < (bits ? 8 : 1); bit++) {
        const uint8_t mask = bits ? (uint8_t)(1u << bit) : 0xFF;
        data[k] ^= mask;
        LLVMFuzzerTestOneInput(data, size);
        data[k] ^= mask;
        runs++;
      }
    free(data);
  }
  printf("replay: %ld runs, no crash\n", runs);
  return 0;
}
