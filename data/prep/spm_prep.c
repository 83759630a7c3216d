/* txl-prep --mode spm: see spm_prep.h. */
#include "data/prep/spm_prep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "data/prep/spm_train.h"
#include "src/base/error.h"

/* The pieces' count, eos and unk once the model is there; a model without an end-of-sentence
 * piece cannot end txl's lines. */
static void adopt(SpmPrep *s) {
  s->size = txl_spm_size(s->spm);
  s->eos = txl_spm_eos_id(s->spm);
  s->unk = txl_spm_unk_id(s->spm);
  if (s->eos < 0)
    txl_fatal("%s: the SentencePiece model has no end-of-sentence piece (eos_id = -1); txl ends every "
              "line with it", s->source);
  if (s->unk < 0 || s->unk >= s->size)
    txl_fatal("%s: the SentencePiece model has no unknown piece", s->source);
  s->count = txl_calloc((size_t)s->size, sizeof *s->count, "piece counts");
}

/* ---- training ---------------------------------------------------------------------------- */

typedef struct {
  LineReader r;
  int lower;
} TrainLines;

static int next_line(void *ctx, const char **line, size_t *len) {
  TrainLines *t = ctx;
  unsigned char *l;
  size_t clen, tlen;
  if (!lr_next(&t->r, &l, &clen, &tlen)) return 0;
  if (t->lower) lower_ascii(l, clen);
  lr_check_utf8(&t->r, l, clen);
  *line = (const char *)l;
  *len = clen;
  return 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void spm_prep_train(SpmPrep *s, const char *type, int64_t vocab, const char *train_path, int lower,
                    char sha[65]) {
  memset(s, 0, sizeof *s);
  s->source = train_path;
  TrainLines t = {.lower = lower};
  lr_open(&t.r, train_path, "train file");
  char err[1024];
  const double t0 = now_s();
  if (txl_spm_train(type, (int)vocab, next_line, &t, &s->model, &s->model_len, err, sizeof err) != 0) {
    /* SentencePiece's "Vocabulary size is smaller than required_chars. 50 vs 67. ... decrease
     * character_coverage ...": in txl-prep's terms (the coverage is fixed at 1.0 here) */
    const char *rc = strstr(err, "required_chars. ");
    long long have, need;
    if (rc && sscanf(rc + 16, "%lld vs %lld", &have, &need) == 2)
      txl_fatal("%s: --spm-vocab %lld is too small: the training split needs %lld pieces (every character "
                "it holds, and <unk>, <s>, </s>)", train_path, (long long)vocab, need);
    txl_fatal("%s: training a %s SentencePiece model of %lld pieces failed: %s", train_path, type,
              (long long)vocab, err);
  }
  s->train_s = now_s() - t0;
  lr_close(&t.r, sha);
  s->spm = txl_spm_load(s->model, s->model_len, err, sizeof err);
  if (!s->spm) txl_fatal("%s: the trained SentencePiece model does not load: %s", train_path, err);
  adopt(s);
}

/* ---- a given model ----------------------------------------------------------------------- */

void spm_prep_load(SpmPrep *s, const char *model_path) {
  memset(s, 0, sizeof *s);
  s->source = model_path;
  struct stat st;
  if (stat(model_path, &st) == 0 && S_ISDIR(st.st_mode))
    txl_fatal("%s: cannot read the SentencePiece model: it is a directory", model_path);
  FILE *f = fopen(model_path, "rb");
  if (!f) txl_fatal("%s: cannot open the SentencePiece model: %s", model_path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = txl_malloc(cap, "SentencePiece model");
  for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
      ALLOC_CHECK(buf);
    }
  }
  const int bad = ferror(f);
  fclose(f);
  if (bad) txl_fatal("%s: error reading the SentencePiece model", model_path);
  if (n == 0) txl_fatal("%s: not a SentencePiece model: the file is empty", model_path);
  char err[1024];
  s->spm = txl_spm_load(buf, n, err, sizeof err);
  if (!s->spm) txl_fatal("%s: not a SentencePiece model: %s", model_path, err);
  s->model = buf;
  s->model_len = n;
  adopt(s);
}

/* ---- encoding and numbering -------------------------------------------------------------- */

size_t spm_prep_encode(SpmPrep *s, const LineReader *r, const unsigned char *line, size_t len,
                       const int **ids) {
  char err[1024];
  size_t n = 0;
  if (txl_spm_encode(s->spm, (const char *)line, len, &s->ids, &s->ids_cap, &n, err, sizeof err) != 0)
    txl_fatal("%s:%lld: SentencePiece could not encode the line: %s", r->path, (long long)r->line_no, err);
  *ids = s->ids;
  return n;
}

static const SpmPrep *g_order; /* qsort has no context argument */
static int by_count_then_id(const void *a, const void *b) {
  const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (g_order->count[x] != g_order->count[y]) return g_order->count[x] > g_order->count[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

void spm_prep_order(SpmPrep *s) {
  s->spm_id = txl_malloc((size_t)s->size * sizeof *s->spm_id, "piece order");
  s->txl_id = txl_malloc((size_t)s->size * sizeof *s->txl_id, "piece order");
  for (int i = 0; i < s->size; i++) s->spm_id[i] = i;
  g_order = s;
  qsort(s->spm_id, (size_t)s->size, sizeof *s->spm_id, by_count_then_id);
  for (int i = 0; i < s->size; i++) s->txl_id[s->spm_id[i]] = i;
}

const char *spm_prep_piece(const SpmPrep *s, int64_t id, size_t *len) {
  return txl_spm_piece(s->spm, s->spm_id[id], len);
}

void spm_prep_free(SpmPrep *s) {
  txl_spm_free(s->spm);
  free(s->model);
  free(s->count);
  free(s->txl_id);
  free(s->spm_id);
  free(s->ids);
  memset(s, 0, sizeof *s);
}
