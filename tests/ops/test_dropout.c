/* Philox4x32-10 known answers, and dropout: the mask is txl_dropout_keep element by element,
 * the kept fraction is within a binomial bound, kept values are scaled, p = 0 is the identity
 * (touching nothing), and a mask depends on the global column only, not on how columns split. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/dropout.h"
#include "src/model/dropout_sites.h"
#include "src/base/philox.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void test_philox(void) {
  const TxlPhilox4 a = txl_philox4x32_10(0, 0, 0, 0, 0, 0);
  const uint32_t wa[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
  ot_check_true("philox counter 0 key 0", memcmp(a.v, wa, sizeof wa) == 0, "%08x %08x %08x %08x",
                a.v[0], a.v[1], a.v[2], a.v[3]);
  const TxlPhilox4 b = txl_philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                                         0xa4093822u, 0x299f31d0u);
  const uint32_t wb[4] = {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
  ot_check_true("philox counter pi key pi", memcmp(b.v, wb, sizeof wb) == 0, "%08x %08x %08x %08x",
                b.v[0], b.v[1], b.v[2], b.v[3]);
}

/* Every element against txl_dropout_keep (the definition), bit for bit: x *= keep * scale. */
static void test_mask(int rows, int cols, int feats, int col0, TxlDropout d, OtRng *rng) {
  char name[128];
  const int64_t n = (int64_t)rows * cols * feats;
  float *x = ot_alloc(n), *want = ot_alloc(n);
  ot_fill(x, n, -2.0f, 2.0f, rng);
  const float scale = txl_dropout_scale(d.p);
  for (int i = 0; i < rows; i++)
    for (int c = 0; c < cols; c++)
      for (int f = 0; f < feats; f++) {
        const int64_t k = ((int64_t)i * cols + c) * feats + f;
        /* as torch: x * (mask * scale), so a dropped negative value becomes -0 */
        want[k] = x[k] * (txl_dropout_keep(d, (uint32_t)i, (uint32_t)(col0 + c), (uint32_t)f) ? scale : 0.0f);
      }
  txl_cpu_dropout(x, rows, cols, feats, feats, col0, d);
  snprintf(name, sizeof name, "dropout mask p=%.2f [%d,%d,%d] col0=%d", (double)d.p, rows, cols,
           feats, col0);
  ot_check_same(name, x, want, (size_t)n * sizeof(float));
  free(x), free(want);
}

/* The kept fraction of N elements is Binomial(N, q) / N with q = 1 - floor(p 2^24) / 2^24;
 * accept within 6 standard deviations (a false failure has probability ~2e-9). Kept values
 * must be exactly 1 * scale (with scale = (float)(1 / (1 - p))). */
static void test_fraction(float p) {
  char name[96];
  const int rows = 64, cols = 8, feats = 1030;
  const int64_t n = (int64_t)rows * cols * feats;
  float *x = ot_alloc(n);
  for (int64_t i = 0; i < n; i++) x[i] = 1.0f;
  TxlDropout d = {p, 1234u, TXL_SITE_EMBED, 7u, NULL};
  txl_cpu_dropout(x, rows, cols, feats, feats, 0, d);
  const float scale = txl_dropout_scale(p);
  int64_t kept = 0, bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (x[i] == scale) kept++;
    else if (x[i] != 0.0f) bad++;
  }
  const double q = 1.0 - txl_dropout_threshold(p) / 16777216.0;
  const double sd = sqrt(n * q * (1.0 - q));
  snprintf(name, sizeof name, "dropout kept fraction p=%.2f", (double)p);
  ot_check_true(name, fabs(kept - n * q) <= 6.0 * sd, "kept %.6f expected %.6f (6 sd = %.6f)",
                (double)kept / n, q, 6.0 * sd / n);
  snprintf(name, sizeof name, "dropout values in {0, scale} p=%.2f", (double)p);
  ot_check_true(name, bad == 0, "scale %.9g, %lld other values", (double)scale, (long long)bad);
  free(x);
}

/* step_at (the step in the backend's memory, as a replayed CUDA graph reads it): the masks of
 * the step it points at, not of the `step` field; and another step's masks differ. */
static void test_step_at(void) {
  const int rows = 5, cols = 3, feats = 70;
  const int64_t n = (int64_t)rows * cols * feats;
  float *a = ot_alloc_filled(n, 1.0f), *b = ot_alloc_filled(n, 1.0f), *c = ot_alloc_filled(n, 1.0f);
  const uint32_t at = 9u;
  const TxlDropout by_value = {0.3f, 77u, TXL_SITE_OUTPUT, 9u, NULL};
  const TxlDropout by_pointer = {0.3f, 77u, TXL_SITE_OUTPUT, 2u, &at}; /* field 2 ignored */
  const TxlDropout other = {0.3f, 77u, TXL_SITE_OUTPUT, 2u, NULL};
  txl_cpu_dropout(a, rows, cols, feats, feats, 0, by_value);
  txl_cpu_dropout(b, rows, cols, feats, feats, 0, by_pointer);
  txl_cpu_dropout(c, rows, cols, feats, feats, 0, other);
  ot_check_same("dropout step_at: the masks of the step it points at", a, b, (size_t)n * sizeof(float));
  ot_check_true("dropout step_at: not the step field's masks", memcmp(b, c, (size_t)n * sizeof(float)) != 0,
                "the masks of steps 9 and 2 are the same");
  free(a), free(b), free(c);
}

/* Same (row, global column, feature) -> same mask, however the columns are split. */
static void test_col_split(OtRng *rng) {
  const int rows = 5, feats = 71;
  TxlDropout d = {0.3f, 99u, txl_layer_site(2, TXL_LSITE_FF_HIDDEN), 11u, NULL};
  float *full = ot_alloc((int64_t)rows * 6 * feats), *part = ot_alloc((int64_t)rows * 3 * feats);
  ot_fill(full, (int64_t)rows * 6 * feats, -1.0f, 1.0f, rng);
  for (int i = 0; i < rows; i++)
    memcpy(part + (int64_t)i * 3 * feats, full + ((int64_t)i * 6 + 3) * feats, 3 * feats * sizeof(float));
  txl_cpu_dropout(full, rows, 6, feats, feats, 0, d);
  txl_cpu_dropout(part, rows, 3, feats, feats, 3, d);
  int same = 1;
  for (int i = 0; i < rows; i++)
    if (memcmp(part + (int64_t)i * 3 * feats, full + ((int64_t)i * 6 + 3) * feats, 3 * feats * sizeof(float)))
      same = 0;
  ot_check_true("dropout cols [3,6) col0=3 == [0,6) col0=0", same, NULL);
  free(full), free(part);
}

/* Different steps, seeds and sites must give different masks. */
static void test_keys_differ(void) {
  const int n = 512;
  float *a = ot_alloc(n), *b = ot_alloc(n);
  TxlDropout base = {0.5f, 1u, TXL_SITE_EMBED, 0u, NULL};
  TxlDropout other[3] = {base, base, base};
  other[0].step = 1, other[1].seed = 2, other[2].site = TXL_SITE_POS;
  const char *what[3] = {"step", "seed", "site"};
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < n; i++) a[i] = b[i] = 1.0f;
    txl_cpu_dropout(a, 1, 1, n, n, 0, base);
    txl_cpu_dropout(b, 1, 1, n, n, 0, other[k]);
    int differ = 0;
    for (int i = 0; i < n; i++) differ += a[i] != b[i];
    char name[64];
    snprintf(name, sizeof name, "dropout mask changes with %s", what[k]);
    ot_check_true(name, differ > n / 4, "%d of %d elements differ", differ, n);
  }
  free(a), free(b);
}

int main(void) {
  OtRng rng = ot_rng(4);
  printf("philox\n");
  test_philox();
  printf("dropout\n");
  TxlDropout d1 = {0.1f, 42u, TXL_SITE_EMBED, 3u, NULL};
  TxlDropout d5 = {0.5f, 7u, txl_layer_site(1, TXL_LSITE_ATTN_OUT), 0u, NULL};
  test_mask(3, 4, 13, 5, d1, &rng);
  test_mask(2, 3, 200, 0, d5, &rng); /* 3 full batches of 64 features + a tail of 8 */
  test_mask(1, 1, 1, 0, d5, &rng);
  test_mask(7, 5, 67, 1000, d1, &rng);
  test_mask(97, 9, 130, 2, d5, &rng); /* parallel path */
  /* rows narrower than 64 features: lanes across rows (blocks of 1024 groups, in parallel) */
  test_mask(300, 8, 32, 3, d1, &rng);
  test_mask(41, 7, 17, 11, d5, &rng); /* odd width: groups of four end inside a row */
  test_mask(5, 3, 63, 0, d1, &rng);
  test_fraction(0.1f);
  test_fraction(0.5f);
  test_col_split(&rng);
  test_keys_differ();
  test_step_at();

  /* p = 0: identity, and no memory is touched (a NULL tensor would crash otherwise) */
  TxlDropout d0 = {0.0f, 1u, 0u, 0u, NULL};
  txl_cpu_dropout(NULL, 1000, 1000, 1000, 1000, 0, d0);
  float x[5] = {1.0f, -2.0f, 3.0f, 0.5f, -0.25f}, x0[5];
  memcpy(x0, x, sizeof x);
  txl_cpu_dropout(x, 1, 1, 5, 5, 0, d0);
  ot_check_same("dropout p=0 identity (NULL untouched)", x, x0, sizeof x);
  return ot_finish("test_op_dropout");
}
