/* What config.c and config_check.c share (private to src/config). */
#ifndef TXL_CONFIG_CONFIG_INTERNAL_H
#define TXL_CONFIG_CONFIG_INTERNAL_H

#include <stddef.h>

/* A message into err[errlen], printf-style. */
void txl_cfg_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The shortest "%.Ng" that reads back as v: what was written for any value given with at most 17
 * significant digits (0.9999999 stays 0.9999999, never a rounded 1). */
void txl_cfg_format_double(double v, char *out, size_t n);

#endif
