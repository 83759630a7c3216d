/* data/window_count.c: the most ids of each class in any window of consecutive rows of a column
 * group, against a brute force that counts every window from scratch: random columns of odd
 * lengths, fed in random pieces; windows shorter than, equal to and longer than the columns;
 * groups of one column, several and the last one short; classes that no id falls in (an empty
 * range, and a range no drawn id reaches) and ids outside every class. Then the same over a
 * hand-made corpus through txl_window_count_split (the target rows 1 .. col_len - 1 of a rank's
 * columns, read in blocks), against the brute force over the ids the corpus was made from. The
 * counts are integers: every check is exact. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/window_count.h"
#include "tests/data/handmade.h"

static int failures = 0, checks = 0;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static int rnd(int n) { /* splitmix64, uniform enough in [0, n) for n << 2^32 */
  uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (int)((z ^ (z >> 31)) % (uint64_t)n);
}

/* most[k] by brute force: every window [p, min(p + W, rows)) of every group, counted afresh. */
static void brute(const int32_t *tok, int rows, int cols, int W, int group_cols, int nk, const int32_t *cut,
                  int64_t *most) {
  for (int k = 0; k < nk; k++) most[k] = 0;
  for (int g0 = 0; g0 < cols; g0 += group_cols)
    for (int p = 0; p < rows; p++)
      for (int k = 0; k < nk; k++) {
        int64_t n = 0;
        for (int r = p; r < p + W && r < rows; r++)
          for (int j = g0; j < g0 + group_cols && j < cols; j++) {
            const int32_t t = tok[(size_t)r * cols + j];
            n += t >= cut[k] && t < cut[k + 1];
          }
        most[k] = n > most[k] ? n : most[k];
      }
}

static void expect(const char *what, const int64_t *got, const int64_t *want, int nk) {
  checks++;
  int ok = 1;
  for (int k = 0; k < nk; k++) ok &= got[k] == want[k];
  printf("%s %s:", ok ? "ok  " : "FAIL", what);
  for (int k = 0; k < nk; k++) printf(" %lld/%lld", (long long)got[k], (long long)want[k]);
  printf("\n");
  failures += !ok;
}

/* One random case: rows x cols ids in [0, V), classes cut, window W, groups of group_cols. */
static void random_case(int rows, int cols, int W, int group_cols, int V, int nk, const int32_t *cut) {
  int32_t *tok = malloc((size_t)rows * cols * sizeof *tok);
  for (int i = 0; i < rows * cols; i++) tok[i] = rnd(V);
  int64_t want[TXL_WINDOW_MAX_CLASSES], got[TXL_WINDOW_MAX_CLASSES];
  brute(tok, rows, cols, W, group_cols, nk, cut, want);
  TxlWindowCount w;
  txl_window_count_init(&w, W, cols, group_cols, nk, cut);
  for (int r = 0; r < rows;) { /* random pieces, one row to all that are left */
    const int n = 1 + rnd(rows - r);
    txl_window_count_rows(&w, tok + (size_t)r * cols, n);
    r += n;
  }
  txl_window_count_most(&w, got);
  txl_window_count_free(&w);
  char what[160];
  snprintf(what, sizeof what, "%d rows x %d columns, window %d, groups of %d, ids < %d, %d classes", rows, cols, W,
           group_cols, V, nk);
  expect(what, got, want, nk);
  free(tok);
}

int main(int argc, char **argv) {
  /* classes: [3, 9), [9, 9) (empty), [9, 40), [40, 1000) (ids < 60 reach only its start); ids 0..2
   * and those >= 1000 count nowhere */
  const int32_t cut[5] = {3, 9, 9, 40, 1000};
  const int shapes[][4] = {
      /* rows cols window group_cols */
      {1, 1, 1, 1},     {1, 5, 3, 2},    {7, 3, 3, 3},   {13, 5, 4, 2},  {13, 5, 13, 5}, {13, 5, 14, 1},
      {13, 5, 50, 3},   {37, 7, 5, 3},   {37, 7, 1, 7},  {101, 4, 9, 4}, {101, 9, 16, 4}, {250, 3, 31, 2},
      {255, 11, 17, 5}, {64, 6, 64, 6}, {63, 6, 64, 4},
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    random_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 60, 4, cut);
    random_case(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], 12, 4, cut); /* skewed: class 3 empty */
  }
  /* no classes: nothing counted, nothing to return */
  TxlWindowCount w;
  txl_window_count_init(&w, 3, 2, 1, 0, cut);
  const int32_t two[4] = {1, 2, 3, 4};
  txl_window_count_rows(&w, two, 2);
  checks++;
  failures += w.rows != 2;
  printf("%s no classes: rows pushed %lld\n", w.rows == 2 ? "ok  " : "FAIL", (long long)w.rows);
  txl_window_count_free(&w);

  /* a corpus (tests/data/handmade.h) through the reader: split cut into B_global columns, rank's
   * columns [col0, col0 + B_local), target rows 1 .. col_len - 1 */
  if (argc < 2) {
    fprintf(stderr, "usage: test_window_count WORK_DIR\n");
    return 2;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s", argv[1]);
  for (char *p = path + 1;; p++) /* mkdir -p WORK_DIR */
    if (*p == '/' || *p == '\0') {
      const char was = *p;
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        return 2;
      }
      *p = was;
      if (!was) break;
    }
  snprintf(path, sizeof path, "%s/zipf.h5", argv[1]);
  const int64_t len[3] = {20011, 3001, 2999};
  const int64_t V = 300;
  if (handmade_zipf_corpus(path, len, V, 7u) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  char err[1024];
  TxlCorpus *c = txl_corpus_open(path, err, sizeof err);
  if (!c) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  int32_t *all = malloc((size_t)len[0] * sizeof *all);
  if (txl_corpus_read_range(c, "train", 0, len[0], all, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  const int32_t tcut[4] = {20, 60, 150, 300}; /* the tail clusters of cutoffs 20, 60, 150 */
  const int runs[][5] = {
      /* B_global col0 B_local window group_cols */
      {7, 0, 7, 64, 7}, {7, 2, 3, 64, 2}, {7, 6, 1, 5000, 1}, {16, 4, 4, 33, 3}, {3, 1, 2, 1, 2},
  };
  for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
    const int Bg = runs[k][0], col0 = runs[k][1], Bl = runs[k][2], W = runs[k][3], gc = runs[k][4];
    const int64_t col_len = len[0] / Bg;
    const int rows = (int)col_len - 1;
    int32_t *tok = malloc((size_t)rows * Bl * sizeof *tok); /* [rows, Bl]: row r is position r + 1 */
    for (int r = 0; r < rows; r++)
      for (int j = 0; j < Bl; j++) tok[(size_t)r * Bl + j] = all[(col0 + j) * col_len + r + 1];
    int64_t want[3], got[3] = {-1, -1, -1};
    brute(tok, rows, Bl, W, gc, 3, tcut, want);
    if (txl_window_count_split(c, "train", Bg, col0, Bl, W, gc, 3, tcut, got, err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    char what[160];
    snprintf(what, sizeof what, "corpus: train in %d columns, columns %d..%d, window %d, groups of %d", Bg, col0,
             col0 + Bl - 1, W, gc);
    expect(what, got, want, 3);
    free(tok);
  }
  free(all);
  txl_corpus_close(c);
  printf("test_window_count: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
