/* data/varlen.c: the rows of each training step under train.varlen, against the original's rule
 * (bptt = tgt_len with probability 0.95, else tgt_len / 2; rows = clamp(int(normal(bptt, 5)),
 * 5, tgt_len + 15)) over N = 200,000 steps, and its determinism.
 *
 * Tolerances, for tgt_len 150: a "half" draw has rows near 75 (|rows - 75| > 37 needs |z| > 7.4)
 * and a full one rows near 150, so rows < 112 tells them apart (a wrong side needs |z| > 7.4,
 * probability ~1e-13). The share of half draws is binomial, p = 0.05: standard deviation
 * sqrt(p (1 - p) / N) = 4.9e-4; allowed 5 of them, 2.5e-3. The full draws' rows are
 * floor(150 + 5 z) (int() truncates; the values are positive), mean 149.5 (flooring a smooth
 * variable takes 0.5 on average) less at most 0.01 from the clamp at 165 (P(z > 3) = 0.00135,
 * times the part above, < 5); their standard deviation is sqrt(25 + 1/12) = 5.008, so the mean of
 * ~190,000 of them is within 5 x 5.008 / sqrt(190000) = 0.058 of 149.5 (allowed: 0.07), and the
 * sample's standard deviation within 2% of 5.008 (its own relative error is ~1 / sqrt(2 n) = 0.16%;
 * the clamp moves it by < 0.5%). */
#include <math.h>
#include <stdio.h>

#include "data/varlen.h"

static int failures = 0;

static void check(int ok, const char *what, double got, double want) {
  printf("%s %s: %.6g (expected %.6g)\n", ok ? "ok  " : "FAIL", what, got, want);
  if (!ok) failures++;
}

int main(void) {
  enum { N = 200000 };
  const int T = 150, most = txl_varlen_max_rows(T, 1);
  check(most == 165 && txl_varlen_max_rows(T, 0) == T, "most rows with varlen (without: tgt_len)", most, 165);
  int out_of_range = 0, at_most = 0, half = 0, repeat_differs = 0, seed_same = 0;
  double sum = 0.0, sum2 = 0.0;
  int full = 0;
  for (int step = 0; step < N; step++) {
    const int rows = txl_varlen_rows(1111u, step, T);
    out_of_range += rows < TXL_VARLEN_MIN || rows > most;
    at_most += rows == most;
    repeat_differs += rows != txl_varlen_rows(1111u, step, T);
    seed_same += rows == txl_varlen_rows(2222u, step, T);
    if (rows < 112) {
      half++;
    } else {
      full++;
      sum += rows;
      sum2 += (double)rows * rows;
    }
  }
  check(out_of_range == 0, "rows outside [5, tgt_len + 15]", out_of_range, 0);
  check(repeat_differs == 0, "the same (seed, step) gives the same rows", repeat_differs, 0);
  check(seed_same < N / 4, "another seed gives other rows (steps with the same rows)", seed_same, 0.06 * N);
  check(at_most > 0, "draws clamped to tgt_len + 15", at_most, 0.00135 * 0.95 * N);
  const double share = (double)half / N;
  check(fabs(share - 0.05) <= 2.5e-3, "share of half-length draws", share, 0.05);
  const double mean = sum / full, sd = sqrt(sum2 / full - mean * mean);
  check(fabs(mean - 149.5) <= 0.07, "mean rows of the full draws", mean, 149.5);
  check(fabs(sd / 5.008 - 1.0) <= 0.02, "standard deviation of the full draws", sd, 5.008);
  /* a short tgt_len: half draws around 5 are clamped up to 5 */
  int at_least = 0;
  for (int step = 0; step < N; step++) at_least += txl_varlen_rows(7u, step, 10) == TXL_VARLEN_MIN;
  check(at_least > 0, "draws clamped up to 5 rows (tgt_len 10)", at_least, 0);
  printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
