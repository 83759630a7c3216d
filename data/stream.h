/* A split of the corpus seen as B_global contiguous columns, walked down tgt_len rows at a time
 * (the original's ordered iterator). This rank holds columns [col0, col0 + B_local) and reads
 * only those, one segment at a time (one hyperslab per segment), so memory stays bounded.
 *
 * The corpus's errors reach the user here as on every rank: the ranks agree on them
 * (txl_fatal_if_any), the lowest failing rank prints its one line, and every rank exits with
 * status 1. */
#ifndef TXL_DATA_STREAM_H
#define TXL_DATA_STREAM_H

#include <stdint.h>

#include "data/corpus.h"

typedef struct {
  TxlCorpus *corpus;
  const char *split;
  int64_t col_len;   /* tokens per column: split length / B_global (the tail is dropped) */
  int B_global, B_local, col0;
  int L_max;
  int64_t pos;       /* row of the next segment's first input */
  int32_t *block;    /* [(L_max + 1), B_local]: inputs are rows 0..n-1, targets rows 1..n */
  int32_t *scratch;  /* read_block scratch */
} TxlStream;

/* Opens the corpus on every rank; a file that some rank cannot open or that is no valid corpus
 * ends the job as described above. collective: all ranks */
TxlCorpus *txl_stream_corpus_open(const char *path);
/* Checks the corpus before any work: the vocabulary on every rank and, with splits, every chunk
 * of train, valid and test (checksums, ids < vocab_size), rank r of `world` reading its share
 * (txl_corpus_check); rank 0 prints how long the splits' check took. A damage ends the job as
 * described above. collective: all ranks */
void txl_stream_corpus_check(TxlCorpus *c, int rank, int world, int splits);

/* Fails (collectively: every rank computes the same lengths) when a column would hold fewer
 * than min_rows + 1 tokens. collective: all ranks */
void txl_stream_open(TxlStream *s, TxlCorpus *c, const char *split, int B_global, int B_local, int col0,
                     int L_max, int min_rows);
void txl_stream_close(TxlStream *s);
/* The length check of txl_stream_open alone (to fail before allocating). collective: all ranks */
void txl_stream_check_length(TxlCorpus *c, const char *split, int B_global, int min_rows);
/* Reads the next segment: returns its row count n (<= L_max, 0 at the end of the split);
 * inputs and targets point into the stream's block ([n, B_local] each, time-major). Each rank
 * reads its own columns, so a damaged chunk may fail on one rank alone: the ranks agree on the
 * read (one all-reduce of one int per segment) and a failure ends the job as described above.
 * collective: all ranks (each walks the same rows, so all reach it equally often) */
int txl_stream_next(TxlStream *s, const int32_t **inputs, const int32_t **targets);
/* The same with at most `rows` rows (<= L_max): variable segment lengths. */
int txl_stream_next_rows(TxlStream *s, int rows, const int32_t **inputs, const int32_t **targets);
/* Back to the first row. */
void txl_stream_rewind(TxlStream *s);
/* Segments in the whole split. */
int64_t txl_stream_segments(const TxlStream *s);

#endif
