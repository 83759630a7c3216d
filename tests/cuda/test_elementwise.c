/* The CUDA backend's three tables (txl_ops_cuda(TXL_F32), (TXL_BF16), (TXL_F16)) and their
 * conversion, element-wise, reduction, embedding, position, fused FFN and fused layer-norm ops
 * against the CPU op of the same name (kernels/cpu, itself tested against double-precision
 * references in tests/ops), on the same random non-zero inputs, odd sizes throughout.
 *
 * The table check needs no device and runs first. Where there is no CUDA device (or no driver)
 * the rest prints "SKIPPED: no CUDA device" and the test exits 77 (skipped: the kernels did not
 * run; a failed table check still fails it; cuda_elementwise_emu runs it all). Otherwise one line per checked output (max absolute
 * and relative error, max ratio error / bound); the exit status is 1 if any element is outside
 * its bound (a NaN always is). Outputs that an op overwrites are poisoned with NaN before the
 * call (every element must be written); outputs that it accumulates into (+=) start from random
 * values.
 *
 * Tolerances (see tests/cuda/test_parity.c for the argument): u = 2^-24, and a float sum of
 * k terms is within about k u of the exact sum relative to the sum of the absolute values of its
 * terms, whatever the order, so each check bounds element i by c (k + a) u mag_i with c = TOL_C
 * (2 backends x 2 of slack), a the few extra roundings, mag_i the sum of absolute values (in
 * double, from the inputs). Where a sum is accumulated in double on both sides its k terms only
 * cost k 2^-53 = k u 2^-29 each. Where both sides do the same single float operation per element
 * (bias_fill, relu, add, scale, the dropout parts of the fused ops, the residual sum), the check
 * demands identical bits.
 *
 * The bf16 table (activations stored in bf16) runs the same cases: its random inputs are rounded
 * to bf16 on the host first and the CPU op runs in fp32 on them, so both sides start from the
 * same values, and each output the device stores in bf16 adds one rounding (relative 2^-8:
 * bounds_act in parity.c) to the fp32 bound; where the fp32 check demands identical bits, the
 * bf16 output must be the CPU's fp32 bits rounded once. Intermediates the bf16 ops store and read
 * back (the residual sum of add_layernorm_forward, the ReLU output behind ad, the input gradient
 * behind dbranch) are the CPU's values rounded the same way before the CPU computes what depends
 * on them, as each case says. Parameter gradients and statistics stay fp32 (the fp32 bounds).
 * The fp16 table runs the same cases the same way, each stored output adding fp16's rounding:
 * 2^-11 relative plus 2^-25 absolute for a value among fp16's subnormals (bounds_act). Its inputs
 * and outputs stay far inside fp16's range (|x| <= 65504): every case's values are O(1) to O(10)
 * (the largest: the embedding gradient's sums of a few dout rows); only to_act takes values past
 * 65504 and below 2^-24 on purpose, to check the rounding's overflow and underflow. It runs on
 * sm_75 too (fp16 tensor cores came with sm_70). */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/dropout_sites.h"
#include "tests/cuda/parity.h"
#include "tests/lib/norm_parts.h"

#define U_F64 (1.0 / 9007199254740992.0) /* 2^-53: the unit roundoff of double */

/* ---- the tables -------------------------------------------------------------------------- */


/* The table of act is named and typed as its activation type says (its members are made from
 * kernels/ops.def, as its type is: none can be forgotten). Returns the number of failures. */
static int test_table(TxlDtype act) {
  const TxlOps *o = txl_ops_cuda(act);
  const char *name = act == TXL_BF16 ? "cuda-bf16" : act == TXL_F16 ? "cuda-fp16" : "cuda";
  const char *label = act == TXL_BF16  ? "txl_ops_cuda(TXL_BF16) table"
                      : act == TXL_F16 ? "txl_ops_cuda(TXL_F16) table"
                                       : "txl_ops_cuda(TXL_F32) table";
  const int bad = !o || !o->name || strcmp(o->name, name) != 0 || o->act != act;
  printf("%-50s \"%s\", act %d  %s\n", label, o && o->name ? o->name : "(null)", o ? (int)o->act : -1,
         bad ? "FAIL" : "ok");
  return bad;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static float *dev_copy_of(const float *host, int64_t n, const char *what) {
  return dev_from(host, (size_t)(n ? n : 1) * sizeof(float), what);
}

/* Random non-zero values in [lo, hi) (a draw of exactly 0 is replaced by lo). */
static float *host_rand_nz(int64_t n, double lo, double hi) {
  float *x = host_rand(n, lo, hi);
  for (int64_t i = 0; i < n; i++)
    if (x[i] == 0.0f) x[i] = (float)lo;
  return x;
}

/* ---- upload ------------------------------------------------------------------------------ */

/* upload (kernels/cuda/upload.cu): 61 uploads of 1 to 250 int32 values (4 to 1000 bytes) through
 * a ring of 8 slots of 1000 bytes (several laps), each from the same host buffer, rewritten at
 * once after the call (the bytes are taken when it returns), each into its own device buffer:
 * every buffer holds exactly its values. Under the emulator, which counts them, the uploads make
 * no host synchronisation (page-locked staging, cudaMemcpyAsync). */
static void test_upload(void) {
  enum { N_UP = 61, MAX_N = 250 };
  const TxlOps *o = txl_ops_cuda(TXL_F32);
  o->upload_reserve(MAX_N * sizeof(int32_t));
  int32_t *dev[N_UP], src[MAX_N];
  int n[N_UP];
  long l0, s0, l1, s1;
  for (int u = 0; u < N_UP; u++) {
    n[u] = 1 + (u * 97) % MAX_N;
    dev[u] = o->alloc((size_t)n[u] * sizeof(int32_t), "test: upload");
  }
  const int counted = txl_cuda_api_counts(&l0, &s0);
  for (int u = 0; u < N_UP; u++) {
    for (int i = 0; i < n[u]; i++) src[i] = u * 1000 + i;
    o->upload(dev[u], src, (size_t)n[u] * sizeof(int32_t));
    for (int i = 0; i < MAX_N; i++) src[i] = -1; /* the next values, or garbage: the call has taken its bytes */
  }
  txl_cuda_api_counts(&l1, &s1);
  int wrong = 0;
  for (int u = 0; u < N_UP; u++) {
    int32_t got[MAX_N];
    o->to_host(got, dev[u], (size_t)n[u] * sizeof(int32_t));
    for (int i = 0; i < n[u]; i++) wrong += got[i] != u * 1000 + i;
    o->free(dev[u]);
  }
  char what[160];
  snprintf(what, sizeof what, "upload: %d uploads through 8 slots of %d bytes, %d values wrong", N_UP,
           (int)(MAX_N * sizeof(int32_t)), wrong);
  if (wrong) check_fail(what);
  else printf("%-50s ok\n", what);
  if (counted) {
    snprintf(what, sizeof what, "upload: %ld host synchronisations (emulator's count)", s1 - s0);
    if (s1 != s0) check_fail(what);
    else printf("%-50s ok\n", what);
  }
}

/* ---- loss_sum ---------------------------------------------------------------------------- */

/* loss_sum: the CPU's bits (its loop is the host loop the model used before the sum stayed on
 * the device), from 0 (add = 0) and continued (add = 1), on losses of many magnitudes. */
static void test_loss_sum(void) {
  const int64_t ns[] = {1, 997, 4096};
  for (int c = 0; c < 3; c++) {
    const int64_t n = ns[c];
    float *x = host_rand(n, 0.0, 12.0);
    for (int64_t i = 0; i < n; i++) x[i] *= powf(2.0f, (float)(i % 41 - 20));
    float *dx = dev_copy_of(x, n, "test: loss_sum losses");
    double *dsum = txl_cuda_alloc(sizeof(double), "test: loss_sum sum");
    double want = 1.0 / 3.0, got = 0.0;
    for (int add = 0; add < 2; add++) {
      txl_cpu_loss_sum(&want, x, n, add);
      txl_cuda_loss_sum(dsum, dx, n, add);
      txl_cuda_to_host(&got, dsum, sizeof got);
      char what[96];
      snprintf(what, sizeof what, "loss_sum n=%lld add=%d: %.17g, cpu %.17g", (long long)n, add, got, want);
      if (memcmp(&got, &want, sizeof got) != 0) check_fail(what);
      else printf("%-50s ok\n", what);
    }
    txl_cuda_free(dsum);
    txl_cuda_free(dx);
    free(x);
  }
}

/* ---- to_act ------------------------------------------------------------------------------ */

/* The fp32 table's to_act is a copy and the bf16 table's one rounding to nearest even per element
 * (kernels/common/bf16.h): bits, on random values of many magnitudes, ties (1 + 2^-8 and
 * 1 + 3 2^-8 round to even: 1 and 1 + 2^-6), signed zeros, infinities, the largest float (it
 * rounds to infinity) and subnormals; the output is poisoned first. The fp16 table's likewise
 * (kernels/common/fp16.h) with fp16's own edges: the magnitudes 2^-30 .. 2^30 run past 65504
 * (infinity) and through the subnormals to zero, and the specials are fp16's ties (1 + 2^-11,
 * 1 + 3 2^-11), 65504, 65519.996 (down to 65504), 65520 (the tie to infinity), 2^-25 (the tie to
 * zero), 1.5 2^-24 (the tie up to 2^-23) and 2^-14 - 2^-25 (rounds up to the smallest normal). */
static void test_to_act_case(TxlDtype act, int64_t n) {
  const TxlOps *o = txl_ops_cuda(act);
  float *x = host_rand_nz(n, -1.0, 1.0);
  for (int64_t i = 0; i < n; i++) x[i] *= powf(2.0f, (float)(i % 61 - 30));
  const float special[] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -(1.0f + 0x1p-8f), 0.0f, -0.0f, INFINITY,
                           -INFINITY, FLT_MAX, -FLT_MAX, 0x1p-140f, -0x1.8p-149f, 0x1.fffffep-127f};
  const float special16[] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -(1.0f + 0x1p-11f), 65504.0f, 65519.996f, 65520.0f,
                             -65520.0f, 0x1p-25f, -0x1p-25f, 0x1.8p-24f, 0x1p-14f - 0x1p-25f, 0.0f, -0.0f, INFINITY};
  const float *sp = act == TXL_F16 ? special16 : special;
  const int64_t ns = act == TXL_F16 ? (int64_t)(sizeof special16 / sizeof special16[0])
                                    : (int64_t)(sizeof special / sizeof special[0]);
  for (int64_t i = 0; i < ns && i < n; i++) x[i] = sp[i];
  float *dsrc = dev_copy_of(x, n, "test: to_act src");
  void *ddst = dev_poison_act(n, act, "test: to_act dst");
  o->to_act(ddst, dsrc, n);
  float *got = host_from_act(ddst, n, act);
  round_act(x, n, act);
  char what[96];
  snprintf(what, sizeof what, "to_act %s n=%lld", act_name(act), (long long)n);
  check_bits(what, got, x, n);
  txl_cuda_free(dsrc);
  txl_cuda_free(ddst);
  free(x);
  free(got);
}

static void test_to_act(TxlDtype act) {
  test_to_act_case(act, 1);
  test_to_act_case(act, 1000);
  test_to_act_case(act, 1000003);
}

/* ---- bias_fill, bias_backward -------------------------------------------------------------- */

/* bias_fill: a copy on both sides, bits (bf16: b rounded once).
 * bias_backward: db_j + sum_r dy[r, j]. The CPU adds groups of four rows in float (two roundings
 * per term, a = 2) into a double accumulator and rounds once at the end; the GPU sums in double
 * and rounds once. Both are within (3 + rows 2^-29) u (|db0_j| + sum_r |dy_rj|) of the exact value:
 *   bound_j = c (3 + rows 2^-29) u (|db0_j| + sum_r |dy_rj|)
 * (db is an fp32 parameter gradient in both tables: no bf16 term).
 * A second call from the same db0 must give the same bits (determinism). With ld > n, dy's rows lie
 * ld apart on the device, the gaps holding 1e30 (the sums would show any of them read). */
static void test_bias_case(TxlDtype act, int64_t rows, int n, int ld) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[96];
  const int64_t total = rows * n;
  float *b = host_rand_nz(n, -1.0, 1.0);
  float *want = host_rand(total, -1.0, 1.0);
  txl_cpu_bias_fill(want, b, rows, n);
  round_act(want, total, act);
  float *db_dev = dev_copy_of(b, n, "test: b");
  void *dx = dev_poison_act(total, act, "test: x");
  o->bias_fill(dx, db_dev, rows, n);
  float *got = host_from_act(dx, total, act);
  snprintf(what, sizeof what, "bias_fill %s rows=%lld n=%d", act_name(act), (long long)rows, n);
  check_bits(what, got, want, total);
  free(got);

  float *dy = host_rand_nz(total, -1.0, 1.0);
  round_act(dy, total, act);
  float *acc0 = host_rand_nz(n, -1.0, 1.0), *acc = host_copy(acc0, n);
  txl_cpu_bias_backward(acc, dy, rows, n, n);
  float *dyp = ot_alloc(rows * ld);
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < ld; j++) dyp[r * ld + j] = j < n ? dy[r * n + j] : 1e30f;
  void *d_dy = dev_act(dyp, rows * ld, act, "test: dy");
  txl_cuda_to_device(db_dev, acc0, (size_t)n * sizeof(float));
  o->bias_backward(db_dev, d_dy, rows, n, ld);
  got = host_from(db_dev, n);
  double *bound = ot_alloc_d(n);
  for (int j = 0; j < n; j++) bound[j] = fabs((double)acc0[j]);
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < n; j++) bound[j] += fabs((double)dy[r * n + j]);
  const double k = TOL_C * (3.0 + (double)rows * U_F64 / OT_U) * OT_U;
  for (int j = 0; j < n; j++) bound[j] *= k;
  snprintf(what, sizeof what, "bias_backward %s rows=%lld n=%d ld=%d (+=)", act_name(act), (long long)rows, n, ld);
  check_close(what, got, acc, bound, n);

  txl_cuda_to_device(db_dev, acc0, (size_t)n * sizeof(float));
  o->bias_backward(db_dev, d_dy, rows, n, ld);
  float *again = host_from(db_dev, n);
  snprintf(what, sizeof what, "bias_backward %s rows=%lld n=%d rerun", act_name(act), (long long)rows, n);
  check_bits(what, again, got, n);

  txl_cuda_free(db_dev);
  txl_cuda_free(dx);
  txl_cuda_free(d_dy);
  free(b); free(want); free(got); free(dy); free(dyp); free(acc0); free(acc); free(bound); free(again);
}

static void test_bias(TxlDtype act) {
  test_bias_case(act, 1, 1, 1);
  test_bias_case(act, 37, 33, 33);
  test_bias_case(act, 37, 33, 40);   /* padded rows */
  test_bias_case(act, 1001, 1025, 1025);
  test_bias_case(act, 20011, 33, 33);  /* the chunk count reaches its cap (512) */
  test_bias_case(act, 7, 5000, 5000);    /* the CPU's wide-row path */
  test_bias_case(act, 112, 300007, 300007); /* a vocabulary-wide output: the partials' size caps the chunks */
}

/* ---- add ---------------------------------------------------------------------------------- */

/* One float addition per element on both sides: bits (tensors of type t, the table's act type or
 * fp32 on the bf16 table; bf16: the CPU's sum of the rounded inputs, rounded once). */
static void test_add_case(TxlDtype act, TxlDtype t, int64_t n) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[96];
  float *x = host_rand_nz(n, -1.0, 1.0), *y = host_rand_nz(n, -1.0, 1.0);
  if (n > 1) x[1] = -0.0f, y[1] = 0.0f;
  if (n > 2) y[2] = -0.0f;
  round_act(x, n, t);
  round_act(y, n, t);
  void *dx = dev_act(x, n, t, "test: x"), *dy = dev_act(y, n, t, "test: y");

  float *want = host_copy(x, n), *got;
  /* add into a poisoned output, then in place (out aliases a, then b) */
  void *dout = dev_poison_act(n, t, "test: out");
  txl_cpu_add(want, x, y, n, TXL_F32);
  round_act(want, n, t);
  o->add(dout, dx, dy, n, t);
  got = host_from_act(dout, n, t);
  snprintf(what, sizeof what, "add %s table, %s n=%lld", act_name(act), act_name(t), (long long)n);
  check_bits(what, got, want, n);
  free(got);
  o->add(dx, dx, dy, n, t);
  got = host_from_act(dx, n, t);
  snprintf(what, sizeof what, "add %s table, %s n=%lld (out = a)", act_name(act), act_name(t), (long long)n);
  check_bits(what, got, want, n);
  free(got);
  to_device_act(dx, x, n, t);
  o->add(dy, dx, dy, n, t);
  got = host_from_act(dy, n, t);
  snprintf(what, sizeof what, "add %s table, %s n=%lld (out = b)", act_name(act), act_name(t), (long long)n);
  check_bits(what, got, want, n);
  free(got);

  txl_cuda_free(dx); txl_cuda_free(dy); txl_cuda_free(dout);
  free(x); free(y); free(want);
}

static void test_add(TxlDtype act) {
  const int64_t sizes[] = {1, 7, 1000, 12345, 1000003};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    test_add_case(act, act, sizes[k]);
    if (act != TXL_F32) test_add_case(act, TXL_F32, sizes[k]); /* fp32 tensors on the bf16 / fp16 table */
  }
}

/* ---- sumsq -------------------------------------------------------------------------------- */

/* The squares of floats are exact in double, so each side's only error is its double summation
 * of n non-negative terms: within (n - 1) 2^-53 S of the exact S = sum x^2 in any order. The two
 * are within 2 (n - 1) 2^-53 S of each other; bound = c n 2^-53 S (c = TOL_C: 2 x 2 of slack).
 * A second call must give the same bits. */
static void test_sumsq_case(int64_t n, double spread) {
  float *x = host_rand_nz(n, -spread, spread);
  float *dx = dev_copy_of(x, n, "test: sumsq x");
  const double want = txl_cpu_sumsq(x, n);
  const double got = txl_cuda_sumsq(dx, n), again = txl_cuda_sumsq(dx, n);
  double exact_ish = 0.0; /* S for the bound (its own rounding is far below the bound) */
  for (int64_t i = 0; i < n; i++) exact_ish += (double)x[i] * (double)x[i];
  const double bound = TOL_C * (double)n * U_F64 * exact_ish, err = fabs(got - want);
  const int ok = err <= bound; /* NaN fails */
  const int same = memcmp(&got, &again, sizeof got) == 0;
  char what[96];
  snprintf(what, sizeof what, "sumsq n=%lld", (long long)n);
  printf("%-50s cuda %.17g cpu %.17g  err/bound %.2e  rerun %s  %s\n", what, got, want,
         err / bound, same ? "same bits" : "OTHER BITS", ok && same ? "ok" : "FAIL");
  if (!ok) check_fail("sumsq: outside the bound");
  if (!same) check_fail("sumsq: a second call gave other bits");
  txl_cuda_free(dx);
  free(x);
}

/* sumsq_segments on a padded layout (segments of random lengths, zero gaps of up to 127 floats)
 * against the CPU's, which is sumsq of the packed values: within the bound of test_sumsq_case,
 * and the same bits on a second call. */
static void test_sumsq_segments_case(int n_seg, int max_len, uint64_t seed) {
  uint64_t s = seed;
  int64_t *seg = (int64_t *)malloc((size_t)n_seg * 2 * sizeof(int64_t)), end = 0, n = 0;
  for (int i = 0; i < n_seg; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    seg[2 * i] = end + (int64_t)((s >> 33) % 128);
    seg[2 * i + 1] = 1 + (int64_t)((s >> 17) % (uint64_t)max_len);
    end = seg[2 * i] + seg[2 * i + 1];
    n += seg[2 * i + 1];
  }
  float *vals = host_rand_nz(n, -1.0, 1.0), *x = (float *)calloc((size_t)end, sizeof(float));
  for (int i = 0, k = 0; i < n_seg; i++)
    for (int64_t j = 0; j < seg[2 * i + 1]; j++) x[seg[2 * i] + j] = vals[k++];
  float *dx = dev_copy_of(x, end, "test: sumsq_segments x");
  const double want = txl_cpu_sumsq_segments(x, n_seg, seg);
  const double got = txl_cuda_sumsq_segments(dx, n_seg, seg), again = txl_cuda_sumsq_segments(dx, n_seg, seg);
  double exact_ish = 0.0;
  for (int64_t i = 0; i < n; i++) exact_ish += (double)vals[i] * (double)vals[i];
  const double bound = TOL_C * (double)n * U_F64 * exact_ish, err = fabs(got - want);
  const int ok = err <= bound, same = memcmp(&got, &again, sizeof got) == 0;
  char what[96];
  snprintf(what, sizeof what, "sumsq_segments %d segments, n=%lld", n_seg, (long long)n);
  printf("%-50s cuda %.17g cpu %.17g  err/bound %.2e  rerun %s  %s\n", what, got, want, err / bound,
         same ? "same bits" : "OTHER BITS", ok && same ? "ok" : "FAIL");
  if (!ok) check_fail("sumsq_segments: outside the bound");
  if (!same) check_fail("sumsq_segments: a second call gave other bits");
  txl_cuda_free(dx);
  free(x);
  free(vals);
  free(seg);
}

static void test_sumsq(void) {
  test_sumsq_segments_case(1, 1000, 1);
  test_sumsq_segments_case(50, 3000, 2);
  test_sumsq_segments_case(200, 100000, 3);
  test_sumsq_case(1, 1.0);
  test_sumsq_case(7, 3.0);
  test_sumsq_case(1000, 1.0);
  test_sumsq_case(12345, 100.0);
  test_sumsq_case(1000003, 1.0);   /* many chunks of the minimum size */
  test_sumsq_case(33566777, 1.0);  /* past 4096 chunks of 8192: larger chunks */
  /* the norm in ZeRO-1's parts (a part per chunk: one chunk, a few, hundreds; more ranks than parts) */
  const int cases[][3] = {{1, 1000, 1}, {7, 30, 3}, {50, 3000, 2}, {100, 40000, 5}, {20, 9000, 7}};
  for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++)
    if (!txl_test_norm_parts(txl_ops_cuda(TXL_F32), cases[c][0], cases[c][1], cases[c][2], 200 + c))
      check_fail("norm_parts / sumsq_parts / grad_clip_parts: not grad_clip's record");
}

/* ---- digest -------------------------------------------------------------------------------- */

/* Integer sums are exact: the device's digest must be the CPU's bits at every size (one chunk,
 * many, past 4096 chunks of 8192: larger chunks), with a negative zero and a NaN among the values. */
static void test_digest_case(int64_t n) {
  float *x = host_rand_nz(n, -2.0, 2.0);
  x[0] = -0.0f;
  if (n > 1) x[n / 2] = NAN;
  float *dx = dev_copy_of(x, n, "test: digest x");
  const uint64_t want = txl_cpu_digest(x, n), got = txl_cuda_digest(dx, n);
  char what[96];
  snprintf(what, sizeof what, "digest n=%lld", (long long)n);
  printf("%-50s cuda %016llx cpu %016llx  %s\n", what, (unsigned long long)got, (unsigned long long)want,
         got == want ? "ok" : "FAIL");
  ot_record(got == want);
  txl_cuda_free(dx);
  free(x);
}

static void test_digest(void) {
  test_digest_case(1);
  test_digest_case(8193);
  test_digest_case(1000003);
  test_digest_case(33566777);
}

/* ---- embedding_backward ------------------------------------------------------------------- */

/* 1 when the CPU's `g += o * scale` is one fused multiply-add (as the compiler contracts it where
 * the CPU has FMA). Probe: o = scale = 1 + 2^-12, g = -(1 + 2^-11): the product
 * 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 (a tie, to even), so unfused g becomes 0, fused 2^-24. */
static int cpu_embedding_fuses(void) {
  const float o = 1.0f + 0x1p-12f, g0 = -(1.0f + 0x1p-11f);
  float g = g0;
  const int32_t tok = 0;
  txl_cpu_embedding_backward(&g, TXL_F32, &o, &tok, o, 1, 1, 1, 1);
  return g != 0.0f;
}

/* The GPU adds each token's occurrences in increasing t, each as fmaf(dout, scale, acc), as the
 * CPU does where it fuses (checked above): then the bits must be the same. Where the CPU does not
 * fuse, element (v, j) is a sum of 1 + k_v terms (k_v occurrences of v, one extra rounding each
 * for the product): bound = c (k_v + 2) u (|demb0| + |scale| sum_t |dout_tj|).
 * Rows of tokens that do not occur must come back untouched (part of the comparison).
 * A second call from the same demb0 must give the same bits. With lde > d the table's rows are
 * padded (a weight's layout): the gaps must come back untouched (bound 0).
 * bf16 table: dout (and a bf16 demb0) rounded on the host; the device accumulates each element
 * in float from its widened start and rounds once when a bf16 demb is stored: the CPU's result
 * rounded (bits where fused, bounds_act otherwise). An fp32 demb (a parameter gradient) takes no
 * rounding. */
static void test_embedding_backward_case(TxlDtype act, TxlDtype demb_type, int64_t n, int d, int lde, int V,
                                         int skew, int fused) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[128];
  const float scale = 0.731f;
  int32_t *tok = malloc((size_t)n * sizeof(int32_t));
  for (int64_t t = 0; t < n; t++) {
    /* skew 1: half the positions are token V / 2 (a run longer than the GPU's batch of 256) */
    tok[t] = skew == 1 && parity_urand() < 0.5 ? V / 2 : (int32_t)(parity_urand() * V);
    if (tok[t] >= V) tok[t] = V - 1;
  }
  tok[0] = V - 1; /* the largest id: the highest digits of the sort */
  if (n > 2) tok[n - 1] = 0, tok[n / 2] = V - 1;
  if (skew == 2) /* adaptive_group's padding: ids -1 add nothing (the sort puts them last) */
    for (int64_t t = 3; t < n; t += 5) tok[t] = -1;
  float *dout = host_rand_nz(n * d, -1.0, 1.0);
  round_act(dout, n * d, act);
  const int64_t VE = (int64_t)V * lde; /* the table's floats, gaps included */
  float *e0 = host_rand_nz(VE, -1.0, 1.0);
  round_act(e0, VE, demb_type);
  float *want = host_copy(e0, VE);
  txl_cpu_embedding_backward(want, TXL_F32, dout, tok, scale, n, d, lde, d);

  void *d_emb = dev_act(e0, VE, demb_type, "test: demb");
  void *d_out = dev_act(dout, n * d, act, "test: dout");
  int32_t *d_tok = dev_from(tok, (size_t)n * sizeof(int32_t), "test: tok");
  o->embedding_backward(d_emb, demb_type, d_out, d_tok, scale, n, d, lde, d);
  float *got = host_from_act(d_emb, VE, demb_type);
  snprintf(what, sizeof what, "embedding_backward %s->%s n=%lld d=%d lde=%d V=%d%s (+=)", act_name(act),
           act_name(demb_type), (long long)n, d, lde, V, skew == 1 ? " skewed" : skew == 2 ? " ids -1 among them" : "");
  if (fused) {
    round_act(want, VE, demb_type);
    check_bits(what, got, want, VE);
  } else {
    double *bound = ot_alloc_d(VE);
    int64_t *count = calloc((size_t)V, sizeof(int64_t));
    for (int64_t i = 0; i < VE; i++) bound[i] = fabs((double)e0[i]);
    for (int64_t t = 0; t < n; t++) {
      if (tok[t] < 0) continue;
      count[tok[t]]++;
      for (int j = 0; j < d; j++)
        bound[(int64_t)tok[t] * lde + j] += fabs((double)scale) * fabs((double)dout[t * d + j]);
    }
    for (int v = 0; v < V; v++)
      for (int j = 0; j < lde; j++)
        bound[(int64_t)v * lde + j] *= j < d ? TOL_C * ((double)count[v] + 2.0) * OT_U : 0.0;
    bounds_act(bound, want, VE, demb_type);
    check_close(what, got, want, bound, VE);
    free(bound);
    free(count);
  }

  to_device_act(d_emb, e0, VE, demb_type);
  o->embedding_backward(d_emb, demb_type, d_out, d_tok, scale, n, d, lde, d);
  float *again = host_from_act(d_emb, VE, demb_type);
  snprintf(what, sizeof what, "embedding_backward %s->%s n=%lld d=%d V=%d rerun", act_name(act),
           act_name(demb_type), (long long)n, d, V);
  check_bits(what, again, got, VE);

  txl_cuda_free(d_emb); txl_cuda_free(d_out); txl_cuda_free(d_tok);
  free(tok); free(dout); free(e0); free(want); free(got); free(again);
}

/* The cases, for a destination of type demb_type on the table of act. */
static void test_embedding_backward_cases(TxlDtype act, TxlDtype demb_type, int fused) {
  test_embedding_backward_case(act, demb_type, 1, 1, 1, 1, 0, fused);
  test_embedding_backward_case(act, demb_type, 7, 33, 33, 3, 0, fused);
  test_embedding_backward_case(act, demb_type, 1000, 67, 67, 50, 0, fused);
  test_embedding_backward_case(act, demb_type, 1000, 67, 72, 50, 0, fused);   /* padded rows, as a weight's */
  test_embedding_backward_case(act, demb_type, 1001, 300, 300, 1000, 1, fused); /* two column tiles, a long run */
  test_embedding_backward_case(act, demb_type, 12345, 33, 33, 300007, 0, fused); /* ids of 19 bits, mostly unique */
  test_embedding_backward_case(act, demb_type, 12345, 7, 7, 37, 1, fused);      /* runs of thousands */
  test_embedding_backward_case(act, demb_type, 1000, 67, 72, 50, 2, fused);     /* ids -1: padding */
}

static void test_embedding_backward(TxlDtype act) {
  const int fused = cpu_embedding_fuses();
  printf("embedding_backward: the CPU %s multiply-adds: %s\n", fused ? "fuses" : "does not fuse",
         fused ? "bits required" : "bounded");
  test_embedding_backward_cases(act, TXL_F32, fused); /* a parameter gradient */
  if (act != TXL_F32) test_embedding_backward_cases(act, act, fused); /* an activation */
}

/* ---- adaptive_group ----------------------------------------------------------------------- */

/* Integer work on both sides, the same slots by the op's definition (stable): bits. The cases
 * cross the kernel's runs of tokens per thread (n below, at and above its 256 threads, and many
 * times them), the input's grouping (0..3) and the tails' (1..3), caps with slack, exact and short
 * (tokens dropped), gaps between the clusters' slots (never written), ids of no cluster. */
static void test_adaptive_group_case(int64_t n, int first, int slack, int with_head) {
  const TxlOps *o = txl_ops_cuda(TXL_F32);
  TxlGroupSpec g = {0};
  g.first = first;
  g.last = 3;
  g.head_size = 100 + 3;
  const int32_t cut[5] = {0, 100, 300, 700, 1000};
  memcpy(g.cut, cut, sizeof cut);
  int32_t *tok = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  int32_t k[TXL_GROUP_MAX] = {0};
  for (int64_t t = 0; t < n; t++) {
    tok[t] = parity_urand() < 0.6 ? (int32_t)(parity_urand() * 100) : (int32_t)(parity_urand() * 1000);
    if (t % 89 == 7) tok[t] = 1003; /* in no cluster */
    for (int i = 0; i <= 3; i++) k[i] += tok[t] >= cut[i] && tok[t] < cut[i + 1];
  }
  int32_t slots = 0;
  for (int i = first; i <= 3; i++) {
    g.base[i] = slots;
    g.cap[i] = k[i] + slack < 0 ? 0 : k[i] + slack;
    slots += g.cap[i] + 3;
  }
  const int64_t S = slots ? slots : 1, N = n ? n : 1;
  int32_t *rows = malloc((size_t)S * 4), *ids = malloc((size_t)S * 4), *head = malloc((size_t)N * 4);
  int32_t count[TXL_GROUP_MAX] = {0}, dropped = 11;
  for (int64_t i = 0; i < S; i++) rows[i] = ids[i] = 0x5a5a5a5a;
  for (int64_t i = 0; i < N; i++) head[i] = 0x5a5a5a5a;
  int32_t *d_rows = dev_from(rows, (size_t)S * 4, "test: rows"), *d_ids = dev_from(ids, (size_t)S * 4, "test: ids");
  int32_t *d_head = dev_from(head, (size_t)N * 4, "test: head"), *d_tok = dev_from(tok, (size_t)N * 4, "test: tok");
  int32_t *d_count = dev_from(count, sizeof count, "test: count"), *d_dropped = dev_from(&dropped, 4, "test: dropped");
  txl_cpu_adaptive_group(rows, ids, with_head ? head : NULL, count, &dropped, tok, n, g);
  o->adaptive_group(d_rows, d_ids, with_head ? d_head : NULL, d_count, d_dropped, d_tok, n, g);
  int32_t *got_rows = malloc((size_t)S * 4), *got_ids = malloc((size_t)S * 4), *got_head = malloc((size_t)N * 4);
  int32_t got_count[TXL_GROUP_MAX], got_dropped;
  txl_cuda_to_host(got_rows, d_rows, (size_t)S * 4);
  txl_cuda_to_host(got_ids, d_ids, (size_t)S * 4);
  txl_cuda_to_host(got_head, d_head, (size_t)N * 4);
  txl_cuda_to_host(got_count, d_count, sizeof got_count);
  txl_cuda_to_host(&got_dropped, d_dropped, 4);
  char what[128];
  snprintf(what, sizeof what, "adaptive_group n=%lld clusters %d..3 caps %+d%s: rows", (long long)n, first, slack,
           with_head ? " head" : "");
  ot_check_same(what, got_rows, rows, (size_t)S * 4);
  ot_check_same("  ids", got_ids, ids, (size_t)S * 4);
  ot_check_same("  head targets (or untouched)", got_head, head, (size_t)N * 4);
  ot_check_same("  counts", got_count, count, sizeof count);
  ot_check_same("  dropped (+=)", &got_dropped, &dropped, 4);
  txl_cuda_free(d_rows); txl_cuda_free(d_ids); txl_cuda_free(d_head); txl_cuda_free(d_tok);
  txl_cuda_free(d_count); txl_cuda_free(d_dropped);
  free(tok); free(rows); free(ids); free(head); free(got_rows); free(got_ids); free(got_head);
}

static void test_adaptive_group(void) {
  test_adaptive_group_case(0, 1, 2, 1);
  test_adaptive_group_case(1, 0, 0, 0);
  test_adaptive_group_case(255, 0, 4, 1);
  test_adaptive_group_case(256, 1, 0, 1);
  test_adaptive_group_case(257, 1, -3, 0);
  test_adaptive_group_case(9001, 0, 17, 1);
  test_adaptive_group_case(9001, 1, -40, 1);
}

/* ---- posemb ------------------------------------------------------------------------------- */

/* Both sides compute sin / cos of pos f_i in double and round to float; the device's double pow,
 * sin and cos are within a few ulp of double of glibc's, i.e. about 2^-50 relative to a float
 * ulp of 2^-23, so the float results are the same except where the double value lies within that
 * of a float rounding boundary, and then one float ulp apart: bound = ulp(want). (Nearly all are
 * identical: the count of differing elements is printed.) bf16: that float rounded once more
 * (bounds_act). */
static void test_posemb_case(TxlDtype act, int K, int d, int clamp) {
  const TxlOps *o = txl_ops_cuda(act);
  const int64_t n = (int64_t)K * d;
  float *want = host_rand(n, -1.0, 1.0);
  txl_cpu_posemb_forward(want, K, d, d, clamp);
  void *dR = dev_poison_act(n, act, "test: R");
  o->posemb_forward(dR, K, d, d, clamp);
  float *got = host_from_act(dR, n, act);
  double *bound = ot_alloc_d(n);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; i++) {
    const float a = fabsf(want[i]);
    bound[i] = (double)nextafterf(a, INFINITY) - (double)a;
    differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
  }
  bounds_act(bound, want, n, act);
  char what[96];
  snprintf(what, sizeof what, "posemb %s K=%d d=%d clamp=%d (%lld not identical)", act_name(act), K, d, clamp,
           (long long)differ);
  check_close(what, got, want, bound, n);
  txl_cuda_free(dR);
  free(want); free(got); free(bound);
}

static void test_posemb(TxlDtype act) {
  test_posemb_case(act, 1, 2, 0);
  test_posemb_case(act, 37, 34, 0);
  test_posemb_case(act, 1001, 410, 0);
  test_posemb_case(act, 300, 64, 100); /* clamped positions */
  test_posemb_case(act, 7, 1026, 3);
}

/* ---- fused FFN hidden layer ----------------------------------------------------------------- */

/* The same float operations (add, ReLU, mask multiply) on both sides, with the dropout op's
 * masks: bits for a, ad and dx. With p = 0, ad must be left as it was.
 * bf16: a is the CPU's a rounded; ad is the dropout op's result on that rounded a (a copy of the
 * stored a, as the op's contract says), rounded; the backward reads the rounded a on both sides
 * and dx is the CPU's rounded. */
static void test_ffn_case(TxlDtype act, int rows, int cols, int feats, int col0, TxlDropout drop) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[128];
  const int64_t n = (int64_t)rows * cols * feats;
  float *a = host_rand_nz(n, -1.0, 1.0), *b = host_rand_nz(feats, -0.5, 0.5);
  float *ad = host_rand_nz(n, -1.0, 1.0);
  round_act(a, n, act);
  round_act(ad, n, act);
  float *ad0 = host_copy(ad, n);
  void *d_a = dev_act(a, n, act, "test: a");
  float *d_b = dev_copy_of(b, feats, "test: b");
  void *d_ad = drop.p > 0.0f ? dev_poison_act(n, act, "test: ad") : dev_act(ad, n, act, "test: ad");
  txl_cpu_bias_relu_dropout_forward(a, ad, b, rows, cols, feats, feats, col0, drop);
  o->bias_relu_dropout_forward(d_a, d_ad, d_b, rows, cols, feats, feats, col0, drop);
  float *ga = host_from_act(d_a, n, act), *gad = host_from_act(d_ad, n, act);
  if (act != TXL_F32) { /* a as stored, then ad from it */
    round_act(a, n, act);
    if (drop.p > 0.0f) {
      memcpy(ad, a, (size_t)n * sizeof(float));
      txl_cpu_dropout(ad, rows, cols, feats, feats, col0, drop);
      round_act(ad, n, act);
    }
  }
  snprintf(what, sizeof what, "bias_relu_dropout_forward %s %dx%dx%d col0=%d p=%g: a", act_name(act), rows,
           cols, feats, col0, (double)drop.p);
  check_bits(what, ga, a, n);
  snprintf(what, sizeof what, "bias_relu_dropout_forward %s %dx%dx%d col0=%d p=%g: ad%s", act_name(act), rows,
           cols, feats, col0, (double)drop.p, drop.p > 0.0f ? "" : " untouched");
  check_bits(what, gad, drop.p > 0.0f ? ad : ad0, n);

  /* backward from the forward's a (many exact zeros) */
  float *dx = host_rand_nz(n, -1.0, 1.0);
  round_act(dx, n, act);
  void *d_dx = dev_act(dx, n, act, "test: dx");
  txl_cpu_relu_dropout_backward(dx, a, rows, cols, feats, feats, col0, drop);
  round_act(dx, n, act);
  o->relu_dropout_backward(d_dx, d_a, rows, cols, feats, feats, col0, drop);
  float *gdx = host_from_act(d_dx, n, act);
  snprintf(what, sizeof what, "relu_dropout_backward %s %dx%dx%d col0=%d p=%g", act_name(act), rows, cols,
           feats, col0, (double)drop.p);
  check_bits(what, gdx, dx, n);

  txl_cuda_free(d_a); txl_cuda_free(d_b); txl_cuda_free(d_ad); txl_cuda_free(d_dx);
  free(a); free(b); free(ad); free(ad0); free(ga); free(gad); free(dx); free(gdx);
}

static void test_ffn(TxlDtype act) {
  TxlDropout d = {0.3f, 1234u, txl_layer_site(1, TXL_LSITE_FF_HIDDEN), 77u, NULL};
  test_ffn_case(act, 1, 1, 1, 0, d);
  test_ffn_case(act, 7, 5, 203, 3, d);   /* feats not a multiple of 4 */
  d.p = 0.1f;
  d.step = 5u;
  test_ffn_case(act, 3, 11, 4, 100, d);  /* one Philox group per (row, column) */
  d.p = 0.5f;
  test_ffn_case(act, 37, 3, 1025, 0, d);
  d.p = 0.0f;
  test_ffn_case(act, 2, 3, 9, 0, d);     /* no dropout: ad untouched */
}

/* ---- fused layer norm ----------------------------------------------------------------------- */

/* add_layernorm_forward: res = x + y is one float add on both sides (bits); mean, rstd and out
 * are those of layernorm_forward on res, bounded as in test_parity.c (k = d, a = 6):
 *   mean:  c (d + a) u mean|res|,   rstd:  c (d + a) u rstd,
 *   out:   c (d + a) u ((|res_i| + mean|res|) rstd |w_i| + |b_i|).
 * The GPU's add_layernorm_forward and its add + layernorm_forward run the same code: bits.
 * Also with res aliasing x (in place, as the model calls it).
 * bf16: res is the CPU's sum rounded (bits), and the device normalizes res as stored, so the
 * CPU reference of mean, rstd and out is its layernorm_forward on that rounded res; out adds its
 * one rounding (bounds_act). */
static void test_add_layernorm_case(TxlDtype act, int64_t n, int d) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[128];
  const float eps = 1e-5f;
  const double k_d = TOL_C * (d + 6) * OT_U;
  const char *an = act_name(act);
  float *x = host_rand_nz(n * d, -1.0, 1.0), *y = host_rand_nz(n * d, -1.0, 1.0);
  for (int64_t r = 0; r < n; r++) /* a per-row offset: exercises the mean subtraction */
    for (int j = 0; j < d; j++) x[r * d + j] += (float)(r % 7) - 3.0f;
  round_act(x, n * d, act);
  round_act(y, n * d, act);
  float *w = host_rand_nz(d, 0.5, 1.5), *b = host_rand_nz(d, -0.2, 0.2);
  float *res = host_rand(n * d, -1, 1), *out = host_rand(n * d, -1, 1);
  float *mean = host_rand(n, -1, 1), *rstd = host_rand(n, -1, 1);
  txl_cpu_add_layernorm_forward(res, out, mean, rstd, x, y, w, b, n, d, d, eps);
  if (act != TXL_F32) { /* res as stored, normalized */
    round_act(res, n * d, act);
    txl_cpu_layernorm_forward(out, mean, rstd, res, w, b, n, d, d, eps);
  }

  void *d_x = dev_act(x, n * d, act, "test: x"), *d_y = dev_act(y, n * d, act, "test: y");
  float *d_w = dev_copy_of(w, d, "test: w"), *d_b = dev_copy_of(b, d, "test: b");
  void *d_res = dev_poison_act(n * d, act, "test: res"), *d_out = dev_poison_act(n * d, act, "test: out");
  float *d_mean = dev_poison(n, "test: mean"), *d_rstd = dev_poison(n, "test: rstd");
  o->add_layernorm_forward(d_res, d_out, d_mean, d_rstd, d_x, d_y, d_w, d_b, n, d, d, eps);
  float *gres = host_from_act(d_res, n * d, act), *gout = host_from_act(d_out, n * d, act);
  float *gmean = host_from(d_mean, n), *grstd = host_from(d_rstd, n);

  double *bo = ot_alloc_d(n * d), *bm = ot_alloc_d(n), *br = ot_alloc_d(n);
  layernorm_forward_bounds(bo, bm, br, res, w, b, rstd, n, d, k_d);
  bounds_act(bo, out, n * d, act);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: res", an, (long long)n, d);
  check_bits(what, gres, res, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: out", an, (long long)n, d);
  check_close(what, gout, out, bo, n * d);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: mean", an, (long long)n, d);
  check_close(what, gmean, mean, bm, n);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: rstd", an, (long long)n, d);
  check_close(what, grstd, rstd, br, n);

  /* the unfused GPU ops: the same bits */
  void *u_res = dev_poison_act(n * d, act, "test: res2"), *u_out = dev_poison_act(n * d, act, "test: out2");
  float *u_mean = dev_poison(n, "test: mean2"), *u_rstd = dev_poison(n, "test: rstd2");
  o->add(u_res, d_x, d_y, n * d, act);
  o->layernorm_forward(u_out, u_mean, u_rstd, u_res, d_w, d_b, n, d, d, eps);
  float *h = host_from_act(u_out, n * d, act);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: = add + layernorm", an, (long long)n, d);
  check_bits(what, gout, h, n * d);
  free(h);
  h = host_from(u_rstd, n);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: rstd = unfused", an, (long long)n, d);
  check_bits(what, grstd, h, n);
  free(h);

  /* in place: res = x */
  o->add_layernorm_forward(d_x, d_out, d_mean, d_rstd, d_x, d_y, d_w, d_b, n, d, d, eps);
  h = host_from_act(d_x, n * d, act);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: res = x in place", an, (long long)n, d);
  check_bits(what, h, res, n * d);
  free(h);
  h = host_from_act(d_out, n * d, act);
  snprintf(what, sizeof what, "add_layernorm_forward %s n=%lld d=%d: out, in place", an, (long long)n, d);
  check_bits(what, h, gout, n * d);
  free(h);

  txl_cuda_free(d_x); txl_cuda_free(d_y); txl_cuda_free(d_w); txl_cuda_free(d_b);
  txl_cuda_free(d_res); txl_cuda_free(d_out); txl_cuda_free(d_mean); txl_cuda_free(d_rstd);
  txl_cuda_free(u_res); txl_cuda_free(u_out); txl_cuda_free(u_mean); txl_cuda_free(u_rstd);
  free(x); free(y); free(w); free(b); free(res); free(out); free(mean); free(rstd);
  free(gres); free(gout); free(gmean); free(grstd); free(bo); free(bm); free(br);
}

/* layernorm_backward_dropout from the same mean and rstd on both sides. dinp is OVERWRITTEN (it
 * starts as NaN); per row it is a sum of d terms, bounded as in test_parity.c with no
 * initial value:  c (d + a) u rstd (|g_i| + mean|g| + |xhat_i| mean|g xhat|),  g = dout w.
 * dbranch = dropout(dinp): bits against the CPU's dropout op applied to the GPU's own dinp (one
 * multiply by the mask; bf16: the dinp as stored, the product rounded once). dw, db (+=) are
 * sums of n = rows cols terms:
 *   dw: c (n + a) u (|dw0_j| + sum_r |dout xhat|),   db: the same with |dout|.
 * And layernorm_backward with dinp = NULL must give the same dw, db bits (same code).
 * bf16: x and dout rounded on the host; dinp adds its one rounding (bounds_act); dw, db fp32. */
static void test_ln_backward_dropout_case(TxlDtype act, int rows, int cols, int d, int col0, TxlDropout drop) {
  const TxlOps *o = txl_ops_cuda(act);
  char what[128];
  const int64_t n = (int64_t)rows * cols;
  const float eps = 1e-5f;
  const double k_d = TOL_C * (d + 6) * OT_U, k_n = TOL_C * ((double)n + 6) * OT_U;
  const char *an = act_name(act);
  float *x = host_rand_nz(n * d, -1.0, 1.0);
  for (int64_t r = 0; r < n; r++)
    for (int j = 0; j < d; j++) x[r * d + j] += (float)(r % 5) - 2.0f;
  round_act(x, n * d, act);
  float *w = host_rand_nz(d, 0.5, 1.5), *b = host_rand_nz(d, -0.2, 0.2);
  float *out = host_rand(n * d, -1, 1), *mean = host_rand(n, -1, 1), *rstd = host_rand(n, -1, 1);
  txl_cpu_layernorm_forward(out, mean, rstd, x, w, b, n, d, d, eps);
  float *dy = host_rand_nz(n * d, -1.0, 1.0);
  round_act(dy, n * d, act);
  float *dw0 = host_rand_nz(d, -1.0, 1.0), *db0 = host_rand_nz(d, -1.0, 1.0);
  float *dw = host_copy(dw0, d), *db = host_copy(db0, d);
  float *dinp = host_rand(n * d, -1, 1), *dbranch = host_rand(n * d, -1, 1);
  txl_cpu_layernorm_backward_dropout(dinp, dbranch, dw, db, dy, x, w, mean, rstd, rows, cols, d, d,
                                     col0, drop);

  void *d_x = dev_act(x, n * d, act, "test: x");
  float *d_w = dev_copy_of(w, d, "test: w");
  float *d_mean = dev_copy_of(mean, n, "test: mean"), *d_rstd = dev_copy_of(rstd, n, "test: rstd");
  void *d_dy = dev_act(dy, n * d, act, "test: dout");
  float *d_dw = dev_copy_of(dw0, d, "test: dw"), *d_db = dev_copy_of(db0, d, "test: db");
  void *d_dinp = dev_poison_act(n * d, act, "test: dinp"), *d_dbr = dev_poison_act(n * d, act, "test: dbranch");
  o->layernorm_backward_dropout(d_dinp, d_dbr, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd, rows, cols, d, d,
                                col0, drop);
  float *g_dinp = host_from_act(d_dinp, n * d, act), *g_dbr = host_from_act(d_dbr, n * d, act);
  float *g_dw = host_from(d_dw, d), *g_db = host_from(d_db, d);

  double *bdi = ot_alloc_d(n * d), *bdw = ot_alloc_d(d), *bdb = ot_alloc_d(d);
  layernorm_backward_bounds(bdi, bdw, bdb, dy, x, w, mean, rstd, NULL, dw0, db0, n, d, k_d, k_n);
  bounds_act(bdi, dinp, n * d, act);
  snprintf(what, sizeof what, "layernorm_backward_dropout %s %dx%dx%d p=%g: dinp (=)", an, rows, cols, d,
           (double)drop.p);
  check_close(what, g_dinp, dinp, bdi, n * d);
  float *want_br = host_copy(g_dinp, n * d);
  txl_cpu_dropout(want_br, rows, cols, d, d, col0, drop);
  round_act(want_br, n * d, act);
  snprintf(what, sizeof what, "layernorm_backward_dropout %s %dx%dx%d p=%g: dbranch", an, rows, cols, d,
           (double)drop.p);
  check_bits(what, g_dbr, want_br, n * d);
  snprintf(what, sizeof what, "layernorm_backward_dropout %s %dx%dx%d p=%g: dw (+=)", an, rows, cols, d,
           (double)drop.p);
  check_close(what, g_dw, dw, bdw, d);
  snprintf(what, sizeof what, "layernorm_backward_dropout %s %dx%dx%d p=%g: db (+=)", an, rows, cols, d,
           (double)drop.p);
  check_close(what, g_db, db, bdb, d);

  /* layernorm_backward without dinp: the same dw, db */
  txl_cuda_to_device(d_dw, dw0, (size_t)d * sizeof(float));
  txl_cuda_to_device(d_db, db0, (size_t)d * sizeof(float));
  o->layernorm_backward(NULL, d_dw, d_db, d_dy, d_x, d_w, d_mean, d_rstd, n, d, d);
  float *h = host_from(d_dw, d);
  snprintf(what, sizeof what, "layernorm_backward %s dinp=NULL n=%lld d=%d: dw", an, (long long)n, d);
  check_bits(what, h, g_dw, d);
  free(h);
  h = host_from(d_db, d);
  snprintf(what, sizeof what, "layernorm_backward %s dinp=NULL n=%lld d=%d: db", an, (long long)n, d);
  check_bits(what, h, g_db, d);
  free(h);

  txl_cuda_free(d_x); txl_cuda_free(d_w); txl_cuda_free(d_mean); txl_cuda_free(d_rstd);
  txl_cuda_free(d_dy); txl_cuda_free(d_dw); txl_cuda_free(d_db); txl_cuda_free(d_dinp);
  txl_cuda_free(d_dbr);
  free(x); free(w); free(b); free(out); free(mean); free(rstd); free(dy); free(dw0); free(db0);
  free(dw); free(db); free(dinp); free(dbranch); free(g_dinp); free(g_dbr); free(g_dw);
  free(g_db); free(bdi); free(bdw); free(bdb); free(want_br);
}

/* ---- padded rows --------------------------------------------------------------------------
 * The layer-norm and dropout families. An op given rows ld > d apart reads and writes the first d features of each row only, with the
 * same arithmetic: its results are the bits of the same op on the packed rows (which the cases
 * above check against the CPU), and the gaps keep what they held (a fill value). */

static void test_padded_rows(TxlDtype act) {
  const TxlOps *o = txl_ops_cuda(act);
  const int rows = 7, cols = 5, d = 67, ld = 72;
  const int64_t n = (int64_t)rows * cols;
  const float eps = 1e-5f;
  const TxlDropout drop = {0.3f, 5u, txl_layer_site(1, TXL_LSITE_FF_OUT), 2u, NULL};
  float *x = host_rand_nz(n * d, -1.0, 1.0), *y = host_rand_nz(n * d, -1.0, 1.0), *dy = host_rand_nz(n * d, -1.0, 1.0);
  round_act(x, n * d, act), round_act(y, n * d, act), round_act(dy, n * d, act);
  float *w = host_rand_nz(d, 0.5, 1.5), *b = host_rand_nz(d, -0.2, 0.2);
  float *xp = pad_rows(x, n, d, ld), *yp = pad_rows(y, n, d, ld), *dyp = pad_rows(dy, n, d, ld);
  float *d_w = dev_copy_of(w, d, "test: w"), *d_b = dev_copy_of(b, d, "test: b");
  /* packed (q) and padded (p) buffers: x, y, res, out, dinp, dbranch */
  void *qx = dev_act(x, n * d, act, "x"), *qy = dev_act(y, n * d, act, "y"), *qdy = dev_act(dy, n * d, act, "dy");
  void *px = dev_act(xp, n * ld, act, "x"), *py = dev_act(yp, n * ld, act, "y"), *pdy = dev_act(dyp, n * ld, act, "dy");
  void *qres = dev_act(y, n * d, act, "res"), *qout = dev_act(y, n * d, act, "out");
  void *pres = dev_act(yp, n * ld, act, "res"), *pout = dev_act(yp, n * ld, act, "out");
  float *qm = dev_poison(n, "mean"), *qr = dev_poison(n, "rstd"), *pm = dev_poison(n, "mean"), *pr = dev_poison(n, "rstd");

  o->add_layernorm_forward(qres, qout, qm, qr, qx, qy, d_w, d_b, n, d, d, eps);
  o->add_layernorm_forward(pres, pout, pm, pr, px, py, d_w, d_b, n, d, ld, eps);
  check_padded("add_layernorm_forward", "res", act, pres, qres, n, d, ld);
  check_padded("add_layernorm_forward", "out", act, pout, qout, n, d, ld);
  check_same_dev("add_layernorm_forward", "rstd", act, d, ld, pr, qr, n);

  o->layernorm_forward(qout, qm, qr, qx, d_w, d_b, n, d, d, eps);
  o->layernorm_forward(pout, pm, pr, px, d_w, d_b, n, d, ld, eps);
  check_padded("layernorm_forward", "out", act, pout, qout, n, d, ld);

  /* backward (+=) into dinp = y, the parameters' gradients from the same start */
  float *zero = calloc((size_t)d, sizeof(float));
  float *qdw = dev_copy_of(zero, d, "dw"), *qdb = dev_copy_of(zero, d, "db");
  float *pdw = dev_copy_of(zero, d, "dw"), *pdb = dev_copy_of(zero, d, "db");
  o->layernorm_backward(qy, qdw, qdb, qdy, qx, d_w, qm, qr, n, d, d);
  o->layernorm_backward(py, pdw, pdb, pdy, px, d_w, pm, pr, n, d, ld);
  check_padded("layernorm_backward", "dinp (+=)", act, py, qy, n, d, ld);
  check_same_dev("layernorm_backward", "dw", act, d, ld, pdw, qdw, d);

  o->layernorm_backward_dropout(qres, qout, qdw, qdb, qdy, qx, d_w, qm, qr, rows, cols, d, d, 4, drop);
  o->layernorm_backward_dropout(pres, pout, pdw, pdb, pdy, px, d_w, pm, pr, rows, cols, d, ld, 4, drop);
  check_padded("layernorm_backward_dropout", "dinp", act, pres, qres, n, d, ld);
  check_padded("layernorm_backward_dropout", "dbranch", act, pout, qout, n, d, ld);
  check_same_dev("layernorm_backward_dropout", "db", act, d, ld, pdb, qdb, d);

  /* the dropout family on the same buffers: x as the hidden layer, y its dropped copy, dy its gradient */
  float *bias = host_rand_nz(d, -0.5, 0.5);
  float *d_bias = dev_copy_of(bias, d, "test: bias");
  o->dropout(qdy, rows, cols, d, d, 1, drop);
  o->dropout(pdy, rows, cols, d, ld, 1, drop);
  check_padded("dropout", "x", act, pdy, qdy, n, d, ld);
  o->bias_relu_dropout_forward(qx, qy, d_bias, rows, cols, d, d, 1, drop);
  o->bias_relu_dropout_forward(px, py, d_bias, rows, cols, d, ld, 1, drop);
  check_padded("bias_relu_dropout_forward", "a", act, px, qx, n, d, ld);
  check_padded("bias_relu_dropout_forward", "ad", act, py, qy, n, d, ld);
  o->relu_dropout_backward(qdy, qx, rows, cols, d, d, 1, drop);
  o->relu_dropout_backward(pdy, px, rows, cols, d, ld, 1, drop);
  check_padded("relu_dropout_backward", "dx", act, pdy, qdy, n, d, ld);
  txl_cuda_free(d_bias);
  free(bias);

  /* xent over the d logits of each row: the losses and the gradient written over the logits */
  int32_t *tg = malloc((size_t)n * sizeof(int32_t));
  for (int64_t t = 0; t < n; t++) tg[t] = (int32_t)((t * 37) % d);
  int32_t *d_tg = dev_from(tg, (size_t)n * sizeof(int32_t), "test: targets");
  o->xent_forward_backward(qy, qm, d_tg, 0.25f, n, d, d);
  o->xent_forward_backward(py, pm, d_tg, 0.25f, n, d, ld);
  check_padded("xent_forward_backward", "gradient", act, py, qy, n, d, ld);
  check_same_dev("xent_forward_backward", "loss", act, d, ld, pm, qm, n);
  free(tg);
  txl_cuda_free(d_tg);

  /* the embedding gather into padded rows (the table x, packed), the scatter-add from padded rows
   * of dy into an fp32 gradient; the positions into padded rows (d must be even: d - 1) */
  int32_t *tok = malloc((size_t)n * sizeof(int32_t));
  for (int64_t t = 0; t < n; t++) tok[t] = (int32_t)((t * 7) % n);
  int32_t *d_tok = dev_from(tok, (size_t)n * sizeof(int32_t), "test: tokens");
  o->embedding_forward(qout, d_tok, qx, 1.5f, n, d, d, d);
  o->embedding_forward(pout, d_tok, qx, 1.5f, n, d, d, ld);
  check_padded("embedding_forward", "out", act, pout, qout, n, d, ld);
  float *zeros = calloc((size_t)(n * ld), sizeof(float));
  float *qg = dev_copy_of(zeros, n * d, "demb"), *pg = dev_copy_of(zeros, n * d, "demb");
  o->embedding_backward(qg, TXL_F32, qdy, d_tok, 0.5f, n, d, d, d);
  o->embedding_backward(pg, TXL_F32, pdy, d_tok, 0.5f, n, d, d, ld);
  check_same_dev("embedding_backward", "demb", act, d, ld, pg, qg, n * d);
  float *zp = pad_rows(zeros, n, d - 1, ld);
  void *qR = dev_act(zeros, n * (d - 1), act, "R"), *pR = dev_act(zp, n * ld, act, "R");
  o->posemb_forward(qR, (int)n, d - 1, d - 1, 0);
  o->posemb_forward(pR, (int)n, d - 1, ld, 0);
  check_padded("posemb_forward", "R", act, pR, qR, n, d - 1, ld);
  free(tok), free(zeros), free(zp);
  txl_cuda_free(d_tok), txl_cuda_free(qg), txl_cuda_free(pg), txl_cuda_free(qR), txl_cuda_free(pR);

  void *bufs[] = {qx, qy, qdy, px, py, pdy, qres, qout, pres, pout, qm, qr, pm, pr, qdw, qdb, pdw, pdb, d_w, d_b};
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++) txl_cuda_free(bufs[k]);
  free(x), free(y), free(dy), free(w), free(b), free(xp), free(yp), free(dyp), free(zero);
}

static void test_layernorm_fused(TxlDtype act) {
  /* d at each register capacity of the forward (4, 8, 16, 32 values per lane) and beyond */
  test_add_layernorm_case(act, 1, 5);
  test_add_layernorm_case(act, 37, 33);
  test_add_layernorm_case(act, 13, 128);
  test_add_layernorm_case(act, 19, 256);
  test_add_layernorm_case(act, 1001, 410);
  test_add_layernorm_case(act, 11, 1024);
  test_add_layernorm_case(act, 77, 1025);

  TxlDropout drop = {0.2f, 99u, txl_layer_site(0, TXL_LSITE_FF_OUT), 3u, NULL};
  test_ln_backward_dropout_case(act, 1, 1, 5, 0, drop);
  drop.p = 0.3f;
  test_ln_backward_dropout_case(act, 7, 5, 203, 3, drop);
  drop.site = txl_layer_site(2, TXL_LSITE_ATTN_OUT);
  test_ln_backward_dropout_case(act, 37, 3, 1025, 0, drop);
  drop.p = 0.5f;
  test_ln_backward_dropout_case(act, 3, 4, 33, 2, drop);
  drop.p = 0.0f;
  test_ln_backward_dropout_case(act, 13, 11, 64, 7, drop); /* no dropout: dbranch = dinp */
}

int main(void) {
  /* the tables need no device */
  const int table_bad = test_table(TXL_F32) + test_table(TXL_BF16) + test_table(TXL_F16);
  if (txl_cuda_device_count() == 0) {
    printf("SKIPPED: no CUDA device (the table checks above %s)\n", table_bad ? "FAILED" : "passed");
    return table_bad ? 1 : 77;
  }
  parity_begin("cuda parity (tables, upload, loss_sum, adaptive_group, to_act, elementwise, sumsq, digest, embedding_backward, posemb, ffn, fused layernorm)");
  if (table_bad) check_fail("txl_ops_cuda tables");
  txl_cuda_reserve(20011, 300007, 1025); /* the largest bias_backward rows and n, layer-norm d */
  test_sumsq();
  test_digest();
  test_upload();
  test_loss_sum();
  test_adaptive_group();
  TxlDtype acts[3];
  const int n_acts = parity_acts(acts, "the bf16 table");
  for (int a = 0; a < n_acts; a++) {
    test_to_act(acts[a]);
    test_bias(acts[a]);
    test_add(acts[a]);
    test_embedding_backward(acts[a]);
    test_posemb(acts[a]);
    test_ffn(acts[a]);
    test_layernorm_fused(acts[a]);
    test_padded_rows(acts[a]);
  }
  return parity_end();
}
