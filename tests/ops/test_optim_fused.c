/* The fused optimizer passes of the CPU table (adam_fused, sgd_fused, axpy_fused: kernels/ops.def)
 * against the unfused ops they replace (adam_update, sgd_update, axpy; the CPU's weights are their
 * own compute copy, so to_act is nothing there), from the same state, bit for bit: the same float
 * operations per element in the same order (the element math of kernels/common/adam.h and
 * sgd_lamb.h), so no tolerance. Several updates, each from the state the last left; odd sizes, one
 * element, and one past the threads' threshold (TXL_CPU_PAR_MIN_ELEMS). A stretch of every input
 * is zero, as the padding of the parameter buffer: the unfused ops keep it zero and so must the
 * fused ones. After each fused pass the gradient must be all zeros (the +0.0 bits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"
#include "tests/ops/op_test.h"

/* [lo, hi) of n: the zero stretch (the padding), empty for n < 4 */
static void pad_range(int64_t n, int64_t *lo, int64_t *hi) {
  *lo = n / 3;
  *hi = n < 4 ? *lo : *lo + n / 4;
}

static void zero_pad(float *x, int64_t n) {
  int64_t lo, hi;
  pad_range(n, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) x[i] = 0.0f;
}

static void check_copy(const char *what, const float *got, const float *want, int64_t n) {
  ot_check_same(what, got, want, (size_t)n * sizeof(float));
}

/* the gradient after a fused pass: every element +0.0 */
static void check_zeroed(const char *what, const float *g, int64_t n) {
  float *z = ot_alloc(n);
  ot_check_same(what, g, z, (size_t)n * sizeof(float));
  free(z);
}

/* the padding of x still zero (the unfused op's bits already say so; this names the failure) */
static void check_pad(const char *what, const float *x, int64_t n) {
  int64_t lo, hi, bad = 0;
  pad_range(n, &lo, &hi);
  for (int64_t i = lo; i < hi; i++) bad += x[i] != 0.0f;
  ot_check_true(what, bad == 0, "%lld non-zero in the padding [%lld, %lld)", (long long)bad, (long long)lo,
                (long long)hi);
}

/* "WHAT PART" (one name at a time) */
static const char *nm(const char *what, const char *part) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s %s", what, part);
  return buf;
}

static float *rand_pad(int64_t n, float lo, float hi, OtRng *rng) {
  float *x = ot_alloc(n);
  ot_fill(x, n, lo, hi, rng);
  zero_pad(x, n);
  return x;
}

static float *dup(const float *x, int64_t n) {
  float *y = ot_alloc(n);
  memcpy(y, x, (size_t)n * sizeof(float));
  return y;
}

static void test_adam(int64_t n, int steps, float gs, OtRng *rng) {
  char what[160];
  float *p = rand_pad(n, -1.0f, 1.0f, rng), *m = ot_alloc(n), *v = ot_alloc(n);
  float *fp = dup(p, n), *fm = ot_alloc(n), *fv = ot_alloc(n);
  for (int t = 1; t <= steps; t++) {
    float *g = rand_pad(n, -2.0f, 2.0f, rng), *fg = dup(g, n);
    txl_cpu_adam_update(p, g, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, t, gs);
    const TxlOptimStep st = {txl_adam_coef(1e-3f, 0.9f, 0.999f, 1e-8f, t, 0.0f), 0.0f, 0.0f, 0, 0};
    txl_cpu_adam_fused(fp, fp, fg, fm, fv, n, &st, &gs);
    snprintf(what, sizeof what, "adam_fused n=%lld step %d", (long long)n, t);
    check_copy(nm(what, "p"), fp, p, n);
    check_copy(nm(what, "m"), fm, m, n);
    check_copy(nm(what, "v"), fv, v, n);
    check_zeroed(nm(what, "g zeroed"), fg, n);
    check_pad(nm(what, "p padding"), fp, n);
    free(g), free(fg);
  }
  free(p), free(m), free(v), free(fp), free(fm), free(fv);
}

static void test_sgd(int64_t n, int steps, float mom, float gs, OtRng *rng) {
  char what[160];
  float *p = rand_pad(n, -1.0f, 1.0f, rng), *b = rand_pad(n, -5.0f, 5.0f, rng); /* b: garbage before step 1 */
  float *fp = dup(p, n), *fb = dup(b, n);
  for (int t = 1; t <= steps; t++) {
    float *g = rand_pad(n, -2.0f, 2.0f, rng), *fg = dup(g, n);
    txl_cpu_sgd_update(p, g, b, n, 0.05f, mom, gs, t == 1);
    const TxlOptimStep st = {{0}, 0.05f, mom, t == 1, 0};
    txl_cpu_sgd_fused(fp, fp, fg, fb, n, &st, &gs);
    snprintf(what, sizeof what, "sgd_fused n=%lld mom=%g step %d", (long long)n, mom, t);
    check_copy(nm(what, "p"), fp, p, n);
    check_copy(nm(what, "buf"), fb, b, n);
    check_zeroed(nm(what, "g zeroed"), fg, n);
    check_pad(nm(what, "p padding"), fp, n);
    free(g), free(fg);
  }
  free(p), free(b), free(fp), free(fb);
}

static void test_axpy(int64_t n, float a, OtRng *rng) {
  char what[160];
  float *y = rand_pad(n, -1.0f, 1.0f, rng), *x = rand_pad(n, -3.0f, 3.0f, rng);
  float *fy = dup(y, n), *fx = dup(x, n);
  txl_cpu_axpy(y, x, a, n);
  txl_cpu_axpy_fused(fy, fy, fx, a, n);
  snprintf(what, sizeof what, "axpy_fused n=%lld a=%g", (long long)n, a);
  check_copy(nm(what, "y"), fy, y, n);
  check_zeroed(nm(what, "x zeroed"), fx, n);
  check_pad(nm(what, "y padding"), fy, n);
  free(y), free(x), free(fy), free(fx);
}

/* A NaN factor (the updates halted, kernels/common/clip.h): the fused passes write nothing. */
static void test_halted(int64_t n, OtRng *rng) {
  float *p = rand_pad(n, -1.0f, 1.0f, rng), *g = rand_pad(n, -2.0f, 2.0f, rng), *m = rand_pad(n, -0.1f, 0.1f, rng);
  float *v = rand_pad(n, 0.0f, 0.01f, rng);
  float *p0 = dup(p, n), *g0 = dup(g, n), *m0 = dup(m, n), *v0 = dup(v, n);
  const float nan = NAN;
  char what[160];
  const TxlOptimStep st = {txl_adam_coef(1e-3f, 0.9f, 0.999f, 1e-8f, 2, 0.0f), 0.05f, 0.9f, 0, 0};
  txl_cpu_adam_fused(p, p, g, m, v, n, &st, &nan);
  txl_cpu_sgd_fused(p, p, g, m, n, &st, &nan);
  snprintf(what, sizeof what, "adam_fused, sgd_fused n=%lld halted", (long long)n);
  check_copy(nm(what, "p unchanged"), p, p0, n);
  check_copy(nm(what, "g unchanged"), g, g0, n);
  check_copy(nm(what, "m unchanged"), m, m0, n);
  check_copy(nm(what, "v unchanged"), v, v0, n);
  free(p), free(g), free(m), free(v), free(p0), free(g0), free(m0), free(v0);
}

/* grad_clip: the record's norm and factor, the bits of the host's arithmetic on sumsq_segments
 * (what the trainer computed before the record existed); a non-finite norm halts from that step
 * on, counted from the reset (the zeroed record). */
static void test_grad_clip(OtRng *rng) {
  enum { N = 5000 };
  const int64_t seg[6] = {0, 1200, 1300, 2000, 3400, 1600}; /* three tensors, zeros between */
  float *g = ot_alloc(N);
  for (int s = 0; s < 3; s++)
    for (int64_t i = 0; i < seg[2 * s + 1]; i++) g[seg[2 * s] + i] = 8.0f * (float)(ot_uniform(rng) - 0.5);
  TxlGradClip r;
  memset(&r, 0, sizeof r);
  const double scales[3] = {1.0, 1024.0, 1.0};
  const float clips[3] = {0.25f, 0.25f, 0.0f}; /* clipped; clipped under a loss scale; no clipping */
  for (int k = 0; k < 3; k++) {
    txl_cpu_grad_clip(&r, g, 3, seg, clips[k], scales[k]);
    const double norm = sqrt(txl_cpu_sumsq_segments(g, 3, seg)) / scales[k];
    float coef = 1.0f;
    if (clips[k] > 0.0f && (float)((double)clips[k] / (norm + 1e-6)) < 1.0f) coef = (float)((double)clips[k] / (norm + 1e-6));
    coef *= (float)(1.0 / scales[k]);
    char what[128];
    snprintf(what, sizeof what, "grad_clip call %d: norm and factor as the host computes them", k + 1);
    ot_check_true(what, memcmp(&r.norm, &norm, sizeof norm) == 0 && memcmp(&r.coef, &coef, sizeof coef) == 0 &&
                            r.count == k + 1 && r.bad == 0,
                  "norm %.17g (want %.17g), coef %.9g (want %.9g), count %d, bad %d", r.norm, norm, r.coef, coef,
                  r.count, r.bad);
  }
  g[1500] = INFINITY; /* the second tensor's first element: the fourth step is not finite */
  txl_cpu_grad_clip(&r, g, 3, seg, 0.25f, 1.0);
  g[1500] = 0.5f; /* finite again: the updates stay halted */
  txl_cpu_grad_clip(&r, g, 3, seg, 0.25f, 1.0);
  ot_check_true("grad_clip: an infinite gradient halts the updates from its step on", r.count == 5 && r.bad == 4 &&
                    isinf(r.bad_norm) && isnan(r.coef) && isfinite(r.norm),
                "count %d, bad %d, bad_norm %g, coef %g, norm %g", r.count, r.bad, r.bad_norm, r.coef, r.norm);
  free(g);
}

int main(void) {
  OtRng rng = ot_rng(17);
  printf("fused optimizer passes against the unfused ops (CPU)\n");
  const int64_t sizes[] = {1, 7, 1001, TXL_CPU_PAR_MIN_ELEMS * 3 + 1};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    const int64_t n = sizes[k];
    test_adam(n, 3, k % 2 ? 0.25f : 1.0f, &rng);
    test_sgd(n, 3, 0.9f, 1.0f, &rng);
    test_sgd(n, 2, 0.0f, 0.5f, &rng);
    test_axpy(n, -3e-3f, &rng);
    test_halted(n, &rng);
  }
  test_grad_clip(&rng);
  return ot_finish("test_op_optim_fused");
}
