/* The corpus reader (data/corpus.h) against values computed independently: hand-made files
 * (tests/data/handmade.c, plain HDF5 calls) whose ids follow a formula, odd sizes and chunk
 * lengths, ids stored as uint8, uint16 and uint32.
 *   test_corpus_reader WORKDIR */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "tests/data/handmade.h"
#include <sys/stat.h>

static int failures = 0;
static long long checks = 0;

#define CHECK(cond, ...)                     \
  do {                                       \
    checks++;                                \
    if (!(cond)) {                           \
      failures++;                            \
      if (failures <= 20) {                  \
        printf("FAIL %s:%d: ", __FILE__, __LINE__); \
        printf(__VA_ARGS__);                 \
        printf("\n");                        \
      }                                      \
    }                                        \
  } while (0)

static const char *const SPLIT[3] = {"train", "valid", "test"};

static void check_file(const char *dir, const char *name, const int64_t len[3], int64_t vocab,
                       int id_bytes, int64_t chunk) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (handmade_corpus(path, len, vocab, id_bytes, chunk, -1) != 0) {
    printf("FAIL cannot write %s\n", path);
    failures++;
    return;
  }
  long long before = checks;
  int fail_before = failures;
  char err[1024];
  TxlCorpus *c = txl_corpus_open(path, err, sizeof err);
  if (!c) {
    printf("FAIL %s: %s\n", path, err);
    failures++;
    return;
  }
  CHECK(!strcmp(txl_corpus_mode(c), "word"), "mode");
  CHECK(!strcmp(txl_corpus_path(c), path), "path");
  CHECK(txl_corpus_vocab_size(c) == vocab, "vocab_size %lld", (long long)txl_corpus_vocab_size(c));
  CHECK(txl_corpus_eos_id(c) == 0 && txl_corpus_unk_id(c) == -1, "eos/unk ids");
  for (int k = 0; k < 3; k++)
    CHECK(txl_corpus_split_length(c, SPLIT[k]) == len[k], "%s length", SPLIT[k]);

  /* read_block: every column length / column range / row range combination of a grid */
  int64_t max_block = 0;
  for (int k = 0; k < 3; k++) max_block = len[k] > max_block ? len[k] : max_block;
  int32_t *out = malloc((size_t)max_block * sizeof *out), *scratch = malloc((size_t)max_block * 4);
  const int64_t col_lens[] = {1, 2, 7, 96, 97, 98, 100, 251};
  for (int k = 0; k < 3; k++) {
    for (size_t a = 0; a < sizeof col_lens / sizeof *col_lens; a++) {
      int64_t cl = col_lens[a], n_all = len[k] / cl;
      if (n_all < 1) continue;
      const int64_t firsts[] = {0, 1, n_all / 3, n_all - 1};
      for (size_t b = 0; b < 4; b++) {
        int64_t cf = firsts[b];
        if (cf < 0 || cf >= n_all) continue;
        for (int nc = 1; cf + nc <= n_all; nc = nc * 2 + 1) {
          const int64_t offs[] = {0, 1, cl / 2, cl - 1};
          for (size_t d = 0; d < 4; d++) {
            int64_t off = offs[d];
            for (int nr = 1; off + nr <= cl; nr = nr * 3 + 2) {
              int bad = txl_corpus_read_block(c, SPLIT[k], cl, cf, nc, off, nr, out,
                                              (nr & 1) ? scratch : NULL, err, sizeof err) != 0;
              for (int i = 0; i < nr; i++)
                for (int j = 0; j < nc; j++)
                  bad += out[i * nc + j] != handmade_id(k, (cf + j) * cl + off + i, vocab);
              CHECK(bad == 0, "%s: read_block(col_len %lld, col_first %lld, n_cols %d, offset %lld, "
                    "n_rows %d): %d wrong", SPLIT[k], (long long)cl, (long long)cf, nc,
                    (long long)off, nr, bad);
            }
          }
        }
      }
    }
    /* the whole split as one column, and the whole split as len columns of one row */
    int bad = txl_corpus_read_block(c, SPLIT[k], len[k], 0, 1, 0, (int)len[k], out, NULL, err, sizeof err) != 0;
    for (int64_t i = 0; i < len[k]; i++) bad += out[i] != handmade_id(k, i, vocab);
    CHECK(bad == 0, "%s: whole split as one column", SPLIT[k]);
    bad = txl_corpus_read_block(c, SPLIT[k], 1, 0, (int)len[k], 0, 1, out, scratch, err, sizeof err) != 0;
    for (int64_t i = 0; i < len[k]; i++) bad += out[i] != handmade_id(k, i, vocab);
    CHECK(bad == 0, "%s: whole split as columns of one row", SPLIT[k]);
    /* read_range */
    for (int64_t s = 0; s < len[k]; s += 37) {
      int64_t n = len[k] - s < 53 ? len[k] - s : 53;
      bad = txl_corpus_read_range(c, SPLIT[k], s, n, out, err, sizeof err) != 0;
      for (int64_t i = 0; i < n; i++) bad += out[i] != handmade_id(k, s + i, vocab);
      CHECK(bad == 0, "%s: read_range(%lld, %lld)", SPLIT[k], (long long)s, (long long)n);
    }
    /* unigram entropy against a direct computation */
    double *cnt = calloc((size_t)vocab, sizeof *cnt), h = 0.0;
    for (int64_t i = 0; i < len[k]; i++) cnt[handmade_id(k, i, vocab)] += 1.0;
    for (int64_t v = 0; v < vocab; v++)
      if (cnt[v] > 0) h -= cnt[v] / (double)len[k] * log2(cnt[v] / (double)len[k]);
    double got = -1.0;
    CHECK(txl_corpus_unigram_entropy_bits(c, SPLIT[k], &got, err, sizeof err) == 0, "%s: entropy: %s",
          SPLIT[k], err);
    CHECK(fabs(got - h) < 1e-9, "%s: entropy %.12f, expected %.12f", SPLIT[k], got, h);
    free(cnt);
  }
  free(out);
  free(scratch);

  /* the start-up check in parts: together the parts check every id once (their counts add up to
   * the three splits' lengths), for part counts below and above the number of chunks */
  const int64_t total = len[0] + len[1] + len[2];
  for (int parts = 1; parts <= 9; parts += 2) {
    int64_t sum = 0, t = 0;
    int rc = 0;
    for (int p = 0; p < parts; p++) {
      rc |= txl_corpus_check(c, p, parts, &t, err, sizeof err);
      sum += t;
    }
    CHECK(rc == 0 && sum == total, "check in %d parts: %lld of %lld ids (%s)", parts, (long long)sum,
          (long long)total, rc ? err : "no error");
  }

  /* vocabulary */
  CHECK(txl_corpus_load_vocab(c, err, sizeof err) == 0, "load_vocab: %s", err);
  CHECK(!strcmp(txl_corpus_token_string(c, 0), "<eos>"), "token 0");
  char want[32];
  int bad = 0;
  for (int64_t v = 1; v < vocab; v++) {
    snprintf(want, sizeof want, "t%lld", (long long)v);
    size_t n;
    const char *s = txl_corpus_token_bytes(c, v, &n);
    bad += strcmp(s, want) != 0 || n != strlen(want) || txl_corpus_token_id(c, want) != v;
  }
  CHECK(bad == 0, "vocabulary strings and ids: %d wrong", bad);
  CHECK(txl_corpus_token_id(c, "<eos>") == 0, "id of <eos>");
  CHECK(txl_corpus_token_id(c, "absent") == -1, "id of an absent token");
  CHECK(txl_corpus_token_id_n(c, "t12345", 2) == 1, "token_id_n");
  txl_corpus_close(c);
  printf("%s %s: ids uint%d, vocab %lld, lengths %lld/%lld/%lld, chunk %lld: %lld checks\n",
         failures == fail_before ? "ok  " : "FAIL", name, 8 * id_bytes, (long long)vocab,
         (long long)len[0], (long long)len[1], (long long)len[2], (long long)chunk,
         checks - before);
}

/* The errors come back to the caller, who may go on: NULL or -1 with one line naming the file,
 * and the corpus still reads after a failed read. */
static void check_errors_returned(const char *dir) {
  char path[4096], err[1024] = "";
  snprintf(path, sizeof path, "%s/absent.h5", dir);
  CHECK(txl_corpus_open(path, err, sizeof err) == NULL && strstr(err, path) &&
        strstr(err, "cannot open corpus file") && !strchr(err, '\n'),
        "open of a missing file: '%s'", err);
  snprintf(path, sizeof path, "%s/errors.h5", dir);
  const int64_t len[3] = {1000, 300, 200};
  if (handmade_corpus(path, len, 50, 2, 97, 777) != 0) {
    printf("FAIL cannot write %s\n", path);
    failures++;
    return;
  }
  TxlCorpus *c = txl_corpus_open(path, err, sizeof err);
  CHECK(c != NULL, "open: %s", err);
  if (!c) return;
  int32_t out[100];
  err[0] = '\0';
  CHECK(txl_corpus_read_range(c, "train", 770, 10, out, err, sizeof err) == -1 && strstr(err, path) &&
        strstr(err, "position 777") && strstr(err, ">= vocab_size 50"), "the bad id: '%s'", err);
  err[0] = '\0';
  CHECK(txl_corpus_read_block(c, "train", 100, 9, 2, 0, 10, out, NULL, err, sizeof err) == -1 &&
        strstr(err, "out of range"), "columns beyond the split: '%s'", err);
  err[0] = '\0';
  CHECK(txl_corpus_read_range(c, "dev", 0, 1, out, err, sizeof err) == -1 && strstr(err, "unknown split 'dev'"),
        "unknown split: '%s'", err);
  int64_t tokens = 0;
  err[0] = '\0';
  CHECK(txl_corpus_check(c, 0, 1, &tokens, err, sizeof err) == -1 && strstr(err, "position 777"),
        "the check finds the bad id: '%s'", err);
  int bad = txl_corpus_read_range(c, "train", 0, 100, out, err, sizeof err) != 0;
  for (int i = 0; i < 100; i++) bad += out[i] != handmade_id(0, i, 50);
  CHECK(bad == 0, "a good read after the failed ones: %d wrong", bad);
  txl_corpus_close(c);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_corpus_reader WORKDIR\n");
    return 2;
  }
  /* mkdir -p WORKDIR */
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", argv[1]);
  for (char *p = dir + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char was = *p;
      *p = '\0';
      if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 2;
      }
      *p = was;
      if (!was) break;
    }
  }
  const int64_t a[3] = {1009, 503, 338}, b[3] = {2000, 1, 97}, d[3] = {4099, 1031, 7};
  check_file(argv[1], "u16.h5", a, 300, 2, 97);
  check_file(argv[1], "u8.h5", b, 256, 1, 64);
  check_file(argv[1], "u32.h5", d, 70001, 4, 1000);
  check_file(argv[1], "u16-bigchunk.h5", a, 65536, 2, 1 << 20);
  check_errors_returned(argv[1]);
  printf("%s (%lld checks, %d failed)\n", failures ? "FAILED" : "PASSED", checks, failures);
  return failures ? 1 : 0;
}
