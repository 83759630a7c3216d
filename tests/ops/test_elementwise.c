/* bias_fill, bias_backward, add, sumsq against double references, the digest against its known answer,
 * and the reductions bit-identical across thread counts. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"
#include "tests/lib/norm_parts.h"

static void test_bias(int64_t rows, int n, OtRng *rng) {
  char name[96];
  float *x = ot_alloc(rows * n), *b = ot_alloc(n), *db = ot_alloc(n);
  double *want = ot_alloc_d(rows * n), *wdb = ot_alloc_d(n), *bound = ot_alloc_d(n);
  ot_fill(x, rows * n, -2.0f, 2.0f, rng);
  ot_fill(b, n, -1.0f, 1.0f, rng);
  ot_fill(db, n, -1.0f, 1.0f, rng); /* db accumulates: start from a non-zero value */
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < n; j++) want[r * n + j] = b[j];
  /* each column sum: db0 + sum_r dy[r, j] over `rows` terms. Bound: any fp32 summation order of
   * rows + 1 terms is within gamma_{rows+1} sum |terms| ~ (rows + 1) u sum |terms| (the kernel
   * sums in double and rounds once, far inside this). */
  for (int j = 0; j < n; j++) {
    double s = db[j], sa = fabs(db[j]);
    for (int64_t r = 0; r < rows; r++) s += x[r * n + j], sa += fabs(x[r * n + j]);
    wdb[j] = s;
    bound[j] = OT_U * fabs(s) + 1.01 * (double)(rows + 1) * OT_U * sa;
  }
  txl_cpu_bias_backward(db, x, rows, n, n); /* x is dy here (before bias_fill overwrites it) */
  snprintf(name, sizeof name, "bias_backward db rows=%lld n=%d", (long long)rows, n);
  ot_check_bound(name, db, wdb, bound, n);
  txl_cpu_bias_fill(x, b, rows, n);
  /* a copy: exact */
  snprintf(name, sizeof name, "bias_fill rows=%lld n=%d", (long long)rows, n);
  ot_check(name, x, want, rows * n, 0.0, 0.0);
  free(x), free(b), free(db), free(want), free(wdb), free(bound);
}

static void test_elementwise(int64_t n, OtRng *rng) {
  char name[96];
  float *x = ot_alloc(n), *a = ot_alloc(n), *o = ot_alloc(n);
  double *want = ot_alloc_d(n);
  ot_fill(x, n, -1.0f, 1.0f, rng);
  ot_fill(a, n, -5.0f, 5.0f, rng);

  /* add: one rounding, |err| <= u |a + b|; also in place (out aliases a) */
  for (int64_t i = 0; i < n; i++) want[i] = (double)a[i] + x[i];
  txl_cpu_add(o, a, x, n, TXL_F32);
  snprintf(name, sizeof name, "add n=%lld", (long long)n);
  ot_check(name, o, want, n, 0.0, OT_U);
  txl_cpu_add(a, a, x, n, TXL_F32);
  snprintf(name, sizeof name, "add in place n=%lld", (long long)n);
  ot_check(name, a, want, n, 0.0, OT_U);
  free(x), free(a), free(o), free(want);
}

static void test_sumsq(int64_t n, OtRng *rng) {
  char name[96];
  float *x = ot_alloc(n);
  ot_fill(x, n, -3.0f, 3.0f, rng);
  /* Reference: sequential double sum of the exact (in double) squares. Both sums add n
   * non-negative terms in double, each within gamma_n ~ n 2^-53 (relative) of the exact sum. */
  double want = 0.0;
  for (int64_t i = 0; i < n; i++) want += (double)x[i] * x[i];
  omp_set_num_threads(1);
  const double got1 = txl_cpu_sumsq(x, n);
  omp_set_num_threads(2);
  const double got2 = txl_cpu_sumsq(x, n);
  omp_set_num_threads(3);
  const double got3 = txl_cpu_sumsq(x, n);
  omp_set_num_threads(2);
  snprintf(name, sizeof name, "sumsq n=%lld", (long long)n);
  ot_check_scalar(name, got2, want, 2.02 * (double)n * ldexp(1.0, -53) * want);
  snprintf(name, sizeof name, "sumsq threads 1/2/3 n=%lld", (long long)n);
  ot_check_true(name, memcmp(&got1, &got2, sizeof got1) == 0 && memcmp(&got1, &got3, sizeof got1) == 0,
                "%.17g %.17g %.17g", got1, got2, got3);
  free(x);
}

/* sumsq_segments: n_seg segments of random lengths (some 0, some longer than a chunk) at random
 * gaps (zeros) give the bits sumsq gives on the segments end to end, for 1 to 3 threads. */
static void test_sumsq_segments(int n_seg, int max_len, OtRng *rng) {
  char name[96];
  int64_t *seg = malloc((size_t)n_seg * 2 * sizeof(int64_t));
  int64_t end = 0, n = 0;
  for (int s = 0; s < n_seg; s++) {
    seg[2 * s] = end + ot_randint(rng, 200);
    seg[2 * s + 1] = ot_randint(rng, 5) == 0 ? 0 : 1 + ot_randint(rng, max_len);
    end = seg[2 * s] + seg[2 * s + 1];
    n += seg[2 * s + 1];
  }
  float *x = ot_alloc(end + 1), *packed = ot_alloc(n + 1);
  for (int s = 0, k = 0; s < n_seg; s++)
    for (int64_t i = 0; i < seg[2 * s + 1]; i++, k++) packed[k] = x[seg[2 * s] + i] = 6.0f * (float)ot_uniform(rng) - 3.0f;
  const double want = txl_cpu_sumsq(packed, n);
  int same = 1;
  double got = 0.0;
  for (int t = 1; t <= 3; t++) {
    omp_set_num_threads(t);
    got = txl_cpu_sumsq_segments(x, n_seg, seg);
    same &= memcmp(&got, &want, sizeof got) == 0;
  }
  omp_set_num_threads(2);
  snprintf(name, sizeof name, "sumsq_segments %d segments, %lld values = sumsq packed", n_seg, (long long)n);
  ot_check_true(name, same, "%.17g, want %.17g", got, want);
  free(seg);
  free(x);
  free(packed);
}

/* The column reductions must not depend on the number of threads. */
static void test_bias_backward_threads(int64_t rows, int n, OtRng *rng) {
  float *dy = ot_alloc(rows * n), *db1 = ot_alloc(n), *db2 = ot_alloc(n), *db3 = ot_alloc(n);
  ot_fill(dy, rows * n, -1.0f, 1.0f, rng);
  omp_set_num_threads(1);
  txl_cpu_bias_backward(db1, dy, rows, n, n);
  omp_set_num_threads(2);
  txl_cpu_bias_backward(db2, dy, rows, n, n);
  omp_set_num_threads(3);
  txl_cpu_bias_backward(db3, dy, rows, n, n);
  omp_set_num_threads(2);
  char name[96];
  snprintf(name, sizeof name, "bias_backward threads 1 vs 2 n=%d", n);
  ot_check_same(name, db1, db2, (size_t)n * sizeof(float));
  snprintf(name, sizeof name, "bias_backward threads 1 vs 3 n=%d", n);
  ot_check_same(name, db1, db3, (size_t)n * sizeof(float));
  free(dy), free(db1), free(db2), free(db3);
}

/* dy's rows ld > n apart: the packed rows' sums bit for bit (the gaps hold NaN: never read). */
static void test_bias_backward_padded(int64_t rows, int n, int ld, OtRng *rng) {
  float *dy = ot_alloc(rows * n), *dyp = ot_alloc(rows * ld), *db1 = ot_alloc(n), *db2 = ot_alloc(n);
  ot_fill(dy, rows * n, -1.0f, 1.0f, rng);
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < ld; j++) dyp[r * ld + j] = j < n ? dy[r * n + j] : NAN;
  memset(db1, 0, (size_t)n * sizeof(float));
  memset(db2, 0, (size_t)n * sizeof(float));
  txl_cpu_bias_backward(db1, dy, rows, n, n);
  txl_cpu_bias_backward(db2, dyp, rows, n, ld);
  char name[96];
  snprintf(name, sizeof name, "bias_backward rows %d apart = packed, n=%d", ld, n);
  ot_check_same(name, db2, db1, (size_t)n * sizeof(float));
  free(dy), free(dyp), free(db1), free(db2);
}

/* ---- digest ------------------------------------------------------------------------------- */

/* The known answer: x[i] = (i % 7) / 4 - 1/2 for i < 1000 (exact in float), its digest computed
 * from kernels/common/digest.h's definition by a separate implementation (Python's integers, mod
 * 2^64), so a change of the definition or of its arithmetic fails here. Then: the same bits for 1
 * to 3 threads on the parallel path, and every kind of change of one element (one ulp, the sign
 * of a zero, a NaN payload) and a swap of two elements change the digest. */
static void test_digest(OtRng *rng) {
  float k[1000];
  for (int i = 0; i < 1000; i++) k[i] = (float)(i % 7) * 0.25f - 0.5f;
  const uint64_t want = 0x53778d59b55dec24ull;
  ot_check_true("digest known answer (1000 values)", txl_cpu_digest(k, 1000) == want, "%016llx, want %016llx",
                (unsigned long long)txl_cpu_digest(k, 1000), (unsigned long long)want);
  ot_check_true("digest of nothing", txl_cpu_digest(k, 0) == 0, NULL);

  const int64_t n = 1000003;
  float *x = ot_alloc(n);
  ot_fill(x, n, -3.0f, 3.0f, rng);
  uint64_t got[3];
  for (int t = 1; t <= 3; t++) {
    omp_set_num_threads(t);
    got[t - 1] = txl_cpu_digest(x, n);
  }
  omp_set_num_threads(2);
  ot_check_true("digest threads 1/2/3 n=1000003", got[0] == got[1] && got[0] == got[2], "%016llx %016llx %016llx",
                (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
  x[0] = 0.0f; /* then -0.0: the sign counts */
  x[n - 1] = NAN;
  const uint64_t base = txl_cpu_digest(x, n);
  const int64_t at[3] = {0, 12345, n - 1};
  int changed = 0;
  for (int c = 0; c < 3; c++) {
    const float keep = x[at[c]];
    uint32_t w;
    memcpy(&w, &x[at[c]], sizeof w);
    w ^= c == 0 ? 0x80000000u : 1u; /* -0.0; one ulp; another NaN payload */
    memcpy(&x[at[c]], &w, sizeof w);
    changed += txl_cpu_digest(x, n) != base;
    x[at[c]] = keep;
  }
  const float a = x[7], b = x[8];
  x[7] = b, x[8] = a;
  changed += a != b && txl_cpu_digest(x, n) != base;
  ot_check_true("digest: -0.0, one ulp, a NaN payload, a swap each change it", changed == 4, "%d of 4", changed);
  free(x);
}

int main(void) {
  OtRng rng = ot_rng(2);
  printf("bias_fill / bias_backward\n");
  test_bias(1, 7, &rng);
  test_bias(13, 7, &rng);
  test_bias(37, 33, &rng);
  test_bias(2050, 97, &rng);  /* large enough for the parallel path */
  test_bias(37, 4099, &rng);  /* wide rows: the column-block path */
  test_bias_backward_threads(3001, 301, &rng);
  test_bias_backward_threads(41, 5000, &rng);
  test_bias_backward_padded(301, 67, 72, &rng);
  test_bias_backward_padded(41, 5000, 5008, &rng); /* the wide-row path */
  printf("add\n");
  test_elementwise(1, &rng);
  test_elementwise(13, &rng);
  test_elementwise(100003, &rng);
  printf("sumsq\n");
  test_sumsq(1, &rng);
  test_sumsq(7, &rng);
  test_sumsq(1000003, &rng);
  test_sumsq_segments(1, 1000, &rng);
  test_sumsq_segments(7, 30, &rng);
  test_sumsq_segments(40, 1000, &rng);
  test_sumsq_segments(300, 20000, &rng);
  test_sumsq_segments(5, 400000, &rng);
  printf("norm in parts (dist.shard_optimizer)\n");
  {
    const int cases[][3] = {{1, 1000, 1}, {1, 1000, 2}, {7, 30, 3}, {40, 1000, 2}, {300, 20000, 5}, {5, 400000, 8},
                            {3, 10, 64}, {2, 5, 70}};
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
      for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        ot_check_true("norm_parts / sumsq_parts / grad_clip_parts = grad_clip",
                      txl_test_norm_parts(txl_ops_cpu(), cases[c][0], cases[c][1], cases[c][2], 100 + c), "see above");
      }
    omp_set_num_threads(2);
  }
  printf("digest\n");
  test_digest(&rng);
  return ot_finish("test_op_elementwise");
}
