#include "data/stream.h"

#include <stdio.h>
#include <stdlib.h>

#include "src/base/error.h"
#include "src/base/timer.h"

TxlCorpus *txl_stream_corpus_open(const char *path) {
  char err[1024] = "";
  TxlCorpus *c = txl_corpus_open(path, err, sizeof err);
  txl_fatal_if_any(c == NULL, "%s", err);
  return c;
}

void txl_stream_corpus_check(TxlCorpus *c, int rank, int world, int splits) {
  char err[1024] = "";
  const double t0 = txl_now_s();
  int64_t tokens = 0;
  const int rc = splits ? txl_corpus_check(c, rank, world, &tokens, err, sizeof err)
                        : txl_corpus_load_vocab(c, err, sizeof err);
  txl_fatal_if_any(rc != 0, "%s", err); /* also waits for the slowest rank: the time is the job's */
  if (splits && rank == 0) {
    const long long all = (long long)(txl_corpus_split_length(c, "train") + txl_corpus_split_length(c, "valid") +
                                      txl_corpus_split_length(c, "test"));
    printf("corpus check: train, valid, test (%lld tokens) and the vocabulary are intact; %.3f s on %d rank%s\n",
           all, txl_now_s() - t0, world, world > 1 ? "s" : "");
    fflush(stdout);
  }
}

void txl_stream_open(TxlStream *s, TxlCorpus *c, const char *split, int B_global, int B_local, int col0,
                     int L_max, int min_rows) {
  s->corpus = c;
  s->split = split;
  s->B_global = B_global;
  s->B_local = B_local;
  s->col0 = col0;
  s->L_max = L_max;
  s->pos = 0;
  txl_stream_check_length(c, split, B_global, min_rows);
  s->col_len = txl_corpus_split_length(c, split) / B_global;
  s->block = txl_malloc((size_t)(L_max + 1) * B_local * sizeof(int32_t), "token block");
  s->scratch = txl_malloc((size_t)(L_max + 1) * B_local * sizeof(int32_t), "token block scratch");
}

void txl_stream_check_length(TxlCorpus *c, const char *split, int B_global, int min_rows) {
  int64_t len = txl_corpus_split_length(c, split);
  if (len / B_global < (int64_t)min_rows + 1)
    txl_fatal_all("%s: the %s split (%lld tokens) is too short for %d columns of %d+1 tokens",
                  txl_corpus_path(c), split, (long long)len, B_global, min_rows);
}

void txl_stream_close(TxlStream *s) {
  free(s->block);
  free(s->scratch);
  s->block = s->scratch = NULL;
}

int txl_stream_next(TxlStream *s, const int32_t **inputs, const int32_t **targets) {
  return txl_stream_next_rows(s, s->L_max, inputs, targets);
}

int txl_stream_next_rows(TxlStream *s, int rows, const int32_t **inputs, const int32_t **targets) {
  if (rows < 1 || rows > s->L_max) txl_fatal("internal: a segment of %d rows from a stream of at most %d", rows, s->L_max);
  int64_t left = s->col_len - 1 - s->pos; /* rows that still have a target */
  if (left <= 0) return 0;
  int n = left < rows ? (int)left : rows;
  char err[1024] = "";
  const int rc = txl_corpus_read_block(s->corpus, s->split, s->col_len, s->col0, s->B_local, s->pos, n + 1,
                                       s->block, s->scratch, err, sizeof err);
  txl_fatal_if_any(rc != 0, "%s", err);
  *inputs = s->block;
  *targets = s->block + s->B_local;
  s->pos += n;
  return n;
}

void txl_stream_rewind(TxlStream *s) { s->pos = 0; }

int64_t txl_stream_segments(const TxlStream *s) { return (s->col_len - 1 + s->L_max - 1) / s->L_max; }
