/* The helpers every C test shares (tests/ops and tests/cuda): the one fixed-seed random source,
 * buffers, float <-> double copies, and checks that print one line per tensor and count
 * failures (one count per test program; ot_finish reports it). A comparison FAILS on NaN: every
 * check is written as !(err <= tol). The prefix ot_ is the op tests', where these began. */
#ifndef TXL_TESTS_LIB_TEST_UTIL_H
#define TXL_TESTS_LIB_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Unit roundoff of fp32 (round to nearest): |fl(x op y) - x op y| <= OT_U |x op y|. */
#define OT_U (1.0 / 16777216.0)

/* ---- random numbers (splitmix64; the same sequence on every machine) ---------------------- */
typedef struct { uint64_t s; } OtRng;
OtRng ot_rng(uint64_t seed);
double ot_uniform(OtRng *r);                            /* [0, 1) */
void ot_fill(float *x, int64_t n, float lo, float hi, OtRng *r);  /* uniform in [lo, hi) */
void ot_fill_d(double *x, int64_t n, double lo, double hi, OtRng *r);
int ot_randint(OtRng *r, int n);                        /* uniform in [0, n) */

/* ---- buffers ------------------------------------------------------------------------------ */
float *ot_alloc(int64_t n);   /* zeroed, 64-byte aligned; ends the test when out of memory */
double *ot_alloc_d(int64_t n);
float *ot_alloc_filled(int64_t n, float value); /* ot_alloc'ed, every element `value` */
void ot_to_double(double *dst, const float *src, int64_t n);
void ot_to_float(float *dst, const double *src, int64_t n);

/* ---- checks ------------------------------------------------------------------------------- */
/* Passes when every element satisfies |got - want| <= atol + rtol * |want|. Prints the name,
 * the max abs error, the max rel error (abs error / |want| over elements with want != 0), the
 * tolerance and PASS/FAIL. Returns 1 on pass. */
int ot_check(const char *name, const float *got, const double *want, int64_t n, double atol,
             double rtol);
/* Per-element tolerance: passes when |got[i] - want[i]| <= bound[i] for every i (bound from a
 * rounding-error analysis of the element). Prints the max abs and rel errors, the largest bound
 * and the largest ratio error / bound. */
int ot_check_bound(const char *name, const float *got, const double *want, const double *bound,
                   int64_t n);
/* Same as ot_check, against a float reference (converted to double). */
int ot_check_f(const char *name, const float *got, const float *want, int64_t n, double atol,
               double rtol);
/* Bit-identical (memcmp) comparison. */
int ot_check_same(const char *name, const void *got, const void *want, size_t bytes);
/* Padded rows (an op's row stride ld > its width d): a copy of the packed [n, d] src into
 * dst [n, ld], every gap element set to `fill` (NaN: a gap an op reads poisons its result). */
void ot_pad_rows(float *dst, const float *src, int64_t n, int d, int ld, float fill);
/* A fill for gaps that an op must neither read nor write where NaN does not do (a check that
 * rejects NaN, a 16-bit copy): exact in bf16 and fp16, far from any result. */
#define PAD_FILL (-3072.0f)
/* The padded [n, ld] result of an op against its packed [n, d] run: each row's d values the same
 * bits, and every gap element still the bits of `fill` (no op writes a gap). */
int ot_check_padded(const char *name, const float *padded, const float *packed, int64_t n, int d, int ld,
                    float fill);
/* A named condition. */
int ot_check_true(const char *name, int ok, const char *detail_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A double value against a double reference, |got - want| <= tol. */
int ot_check_scalar(const char *name, double got, double want, double tol);
/* Counts one check, failed when ok is 0 (for a test's own comparison); returns ok. */
int ot_record(int ok);

/* A float result against a float reference (the CUDA tests: the device against the CPU op):
 * |got_i - want_i| <= bound_i for every i (NaN fails). */
void check_close(const char *what, const float *got, const float *want, const double *bound,
                 int64_t n);
/* got and want must be the same bits (and not NaN). */
void check_bits(const char *what, const float *got, const float *want, int64_t n);
/* A failed check that is not a comparison: prints `what` and counts a failure. */
void check_fail(const char *what);

double ot_max_abs(const double *x, int64_t n);
double ot_max_abs_f(const float *x, int64_t n);

/* Prints "<test>: N checks, F failed" and returns the process exit status (0 when all passed). */
int ot_finish(const char *test);

#endif
