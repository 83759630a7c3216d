/* Wall-clock time for progress lines and benchmarks. */
#ifndef TXL_BASE_TIMER_H
#define TXL_BASE_TIMER_H

#include <time.h>

static inline double txl_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
