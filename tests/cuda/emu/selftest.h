/* The checks of the emulator's self-tests (test_emu.cpp, test_capture.cpp): each prints its line
 * and "ok" or "FAIL"; selftest_finish says how the program went (its exit status). */
#ifndef TXL_TESTS_CUDA_EMU_SELFTEST_H
#define TXL_TESTS_CUDA_EMU_SELFTEST_H

#include <stdarg.h>
#include <stdio.h>

static int g_failures = 0;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("%s\n", ok ? "  ok" : "  FAIL");
  if (!ok) g_failures++;
}

static int selftest_finish(void) {
  if (g_failures) {
    printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}

#endif
