/* The main of a harness built without libFuzzer (the normal build, with gcc, and its sanitizer
 * build): runs each input file given once, as a libFuzzer binary does with file arguments, so the
 * seeds and the inputs of defects found (tests/fuzz/regressions) are checked by ctest everywhere.
 * Arguments starting with '-' (libFuzzer flags) are ignored. */
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
  long runs = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') continue;
    size_t size;
    uint8_t *data = read_all(argv[i], &size);
    printf("replay: %s (%zu bytes)\n", argv[i], size);
    fflush(stdout);
    LLVMFuzzerTestOneInput(data, size);
    runs++;
    free(data);
  }
  printf("replay: %ld runs, no crash\n", runs);
  return 0;
}
