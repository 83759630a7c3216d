/* The helpers every C test shares (see test_util.h). */
#include "tests/lib/test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks = 0, g_failed = 0;

OtRng ot_rng(uint64_t seed) {
  OtRng r = {seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull};
  return r;
}

static uint64_t next_u64(OtRng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double ot_uniform(OtRng *r) { return (double)(next_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

void ot_fill(float *x, int64_t n, float lo, float hi, OtRng *r) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * ot_uniform(r));
}

void ot_fill_d(double *x, int64_t n, double lo, double hi, OtRng *r) {
  for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * ot_uniform(r);
}

int ot_randint(OtRng *r, int n) { return (int)(ot_uniform(r) * n); }

static void *alloc_bytes(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void *p = aligned_alloc(64, rounded);
  if (!p) {
    fprintf(stderr, "op test: out of memory (%zu bytes)\n", bytes);
    exit(2);
  }
  memset(p, 0, rounded);
  return p;
}

float *ot_alloc(int64_t n) { return alloc_bytes((size_t)n * sizeof(float)); }
double *ot_alloc_d(int64_t n) { return alloc_bytes((size_t)n * sizeof(double)); }

float *ot_alloc_filled(int64_t n, float value) {
  float *x = ot_alloc(n);
  for (int64_t i = 0; i < n; i++) x[i] = value;
  return x;
}

void ot_to_double(double *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

void ot_to_float(float *dst, const double *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

int ot_record(int ok) {
  g_checks++;
  if (!ok) g_failed++;
  return ok;
}

int ot_check(const char *name, const float *got, const double *want, int64_t n, double atol,
             double rtol) {
  double max_abs = 0.0, max_rel = 0.0;
  int ok = 1;
  int64_t worst = -1;
  for (int64_t i = 0; i < n; i++) {
    const double g = got[i], w = want[i];
    const double err = fabs(g - w);
    if (!(err <= atol + rtol * fabs(w))) {
      if (ok) worst = i;
      ok = 0;
    }
    if (!(err <= max_abs)) max_abs = err; /* a NaN error shows as nan */
    if (w != 0.0) {
      const double rel = err / fabs(w);
      if (!(rel <= max_rel)) max_rel = rel;
    }
  }
  printf("  %-34s n=%-7lld max_abs=%.3e max_rel=%.3e  tol: abs %.2e + rel %.2e  %s\n", name,
         (long long)n, max_abs, max_rel, atol, rtol, ok ? "PASS" : "FAIL");
  if (!ok)
    printf("    first failure at [%lld]: got %.9g want %.9g\n", (long long)worst,
           (double)got[worst], want[worst]);
  return ot_record(ok);
}

int ot_check_bound(const char *name, const float *got, const double *want, const double *bound,
                   int64_t n) {
  double max_abs = 0.0, max_rel = 0.0, max_bound = 0.0, max_ratio = 0.0;
  int ok = 1;
  int64_t worst = -1;
  for (int64_t i = 0; i < n; i++) {
    const double err = fabs((double)got[i] - want[i]);
    if (!(err <= bound[i])) {
      if (ok) worst = i;
      ok = 0;
    }
    if (!(err <= max_abs)) max_abs = err;
    if (want[i] != 0.0 && !(err / fabs(want[i]) <= max_rel)) max_rel = err / fabs(want[i]);
    if (bound[i] > max_bound) max_bound = bound[i];
    const double ratio = bound[i] > 0.0 ? err / bound[i] : (err == 0.0 ? 0.0 : INFINITY);
    if (!(ratio <= max_ratio)) max_ratio = ratio;
  }
  printf("  %-34s n=%-7lld max_abs=%.3e max_rel=%.3e  tol: per-element bound (max %.2e), "
         "worst err/bound %.3f  %s\n",
         name, (long long)n, max_abs, max_rel, max_bound, max_ratio, ok ? "PASS" : "FAIL");
  if (!ok)
    printf("    first failure at [%lld]: got %.9g want %.9g bound %.3e\n", (long long)worst,
           (double)got[worst], want[worst], bound[worst]);
  return ot_record(ok);
}

int ot_check_f(const char *name, const float *got, const float *want, int64_t n, double atol,
               double rtol) {
  double *w = ot_alloc_d(n);
  ot_to_double(w, want, n);
  const int ok = ot_check(name, got, w, n, atol, rtol);
  free(w);
  return ok;
}

int ot_check_same(const char *name, const void *got, const void *want, size_t bytes) {
  const int ok = memcmp(got, want, bytes) == 0;
  printf("  %-34s bit-identical (%zu bytes)  %s\n", name, bytes, ok ? "PASS" : "FAIL");
  return ot_record(ok);
}

void ot_pad_rows(float *dst, const float *src, int64_t n, int d, int ld, float fill) {
  for (int64_t r = 0; r < n; r++) {
    memcpy(dst + r * ld, src + r * d, (size_t)d * sizeof(float));
    for (int j = d; j < ld; j++) dst[r * ld + j] = fill;
  }
}

int ot_check_padded(const char *name, const float *padded, const float *packed, int64_t n, int d, int ld,
                    float fill) {
  int64_t differ = 0, gaps = 0;
  for (int64_t r = 0; r < n; r++) {
    differ += memcmp(padded + r * ld, packed + r * d, (size_t)d * sizeof(float)) != 0;
    for (int j = d; j < ld; j++) gaps += memcmp(&padded[r * ld + j], &fill, sizeof fill) != 0;
  }
  return ot_check_true(name, differ == 0 && gaps == 0, "rows %lld apart, %lld rows: %lld differ, %lld gap elements written",
                       (long long)ld, (long long)n, (long long)differ, (long long)gaps);
}

int ot_check_true(const char *name, int ok, const char *fmt, ...) {
  char detail[512] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
  }
  printf("  %-34s %s  %s\n", name, detail, ok ? "PASS" : "FAIL");
  return ot_record(ok);
}

int ot_check_scalar(const char *name, double got, double want, double tol) {
  const double err = fabs(got - want);
  const int ok = err <= tol;
  printf("  %-34s got=%.12g want=%.12g abs_err=%.3e rel_err=%.3e tol=%.2e  %s\n", name, got, want,
         err, want != 0.0 ? err / fabs(want) : err, tol, ok ? "PASS" : "FAIL");
  return ot_record(ok);
}

double ot_max_abs(const double *x, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++)
    if (fabs(x[i]) > m) m = fabs(x[i]);
  return m;
}

double ot_max_abs_f(const float *x, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; i++)
    if (fabs((double)x[i]) > m) m = fabs((double)x[i]);
  return m;
}

int ot_finish(const char *test) {
  printf("%s: %d checks, %d failed\n", test, g_checks, g_failed);
  return g_failed == 0 && g_checks > 0 ? 0 : 1;
}

/* ---- float against float (the CUDA tests) ------------------------------------------------ */

static void report(const char *what, double max_abs, double max_rel, int bad, int64_t first_bad,
                   float got, float want, const char *kind) {
  printf("%-50s max abs %.3e  max rel %.3e  %s%s\n", what, max_abs, max_rel, kind,
         bad ? "  FAIL" : "  ok");
  if (bad)
    printf("    %d elements out of tolerance; first at %lld: cuda %.9g, cpu %.9g\n", bad,
           (long long)first_bad, (double)got, (double)want);
  ot_record(!bad);
}

/* got (CUDA) against want (CPU): |got_i - want_i| <= bound_i for every i. */
void check_close(const char *what, const float *got, const float *want, const double *bound,
                 int64_t n) {
  double max_abs = 0.0, max_rel = 0.0, max_ratio = 0.0;
  int bad = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; i++) {
    const double e = fabs((double)got[i] - (double)want[i]);
    const double r = want[i] != 0.0f ? e / fabs((double)want[i]) : 0.0; /* rel: where defined */
    const double q = e / fmax(bound[i], 1e-300);
    if (!(e <= bound[i])) { /* NaN in either side fails here */
      if (!bad) first = i;
      bad++;
    }
    if (e > max_abs || isnan(e)) max_abs = e;
    if (r > max_rel || isnan(r)) max_rel = r;
    if (q > max_ratio || isnan(q)) max_ratio = q;
  }
  char kind[64];
  snprintf(kind, sizeof kind, "err/bound %.2e", max_ratio);
  report(what, max_abs, max_rel, bad, first, bad ? got[first] : 0.0f,
         bad ? want[first] : 0.0f, kind);
}

/* got and want must be the same bits (and not NaN). */
void check_bits(const char *what, const float *got, const float *want, int64_t n) {
  double max_abs = 0.0;
  int bad = 0;
  int64_t first = -1;
  for (int64_t i = 0; i < n; i++) {
    uint32_t a, b;
    memcpy(&a, &got[i], 4);
    memcpy(&b, &want[i], 4);
    if (a != b || isnan(got[i])) {
      if (!bad) first = i;
      bad++;
      const double e = fabs((double)got[i] - (double)want[i]);
      if (e > max_abs || isnan(e)) max_abs = e;
    }
  }
  report(what, max_abs, max_abs, bad, first, bad ? got[first] : 0.0f,
         bad ? want[first] : 0.0f, "bit-identical required");
}

void check_fail(const char *what) {
  printf("    %s  FAIL\n", what);
  ot_record(0);
}
