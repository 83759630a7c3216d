/* A split of the corpus seen as B_global contiguous columns, walked down tgt_len rows at a time
 * (the original's ordered iterator). This rank holds columns [col0, col0 + B_local) and reads
 * only those, one segment at a time (one hyperslab per segment), so memory stays bounded. */
#ifndef TXL_TRAIN_STREAM_H
#define TXL_TRAIN_STREAM_H

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

/* Fails (collectively: every rank computes the same lengths) when a column would hold fewer
 * than min_rows + 1 tokens. collective: all ranks */
void txl_stream_open(TxlStream *s, TxlCorpus *c, const char *split, int B_global, int B_local, int col0,
                     int L_max, int min_rows);
void txl_stream_close(TxlStream *s);
/* The length check of txl_stream_open alone (to fail before allocating). collective: all ranks */
void txl_stream_check_length(TxlCorpus *c, const char *split, int B_global, int min_rows);
/* Reads the next segment: returns its row count n (<= L_max, 0 at the end of the split);
 * inputs and targets point into the stream's block ([n, B_local] each, time-major). */
int txl_stream_next(TxlStream *s, const int32_t **inputs, const int32_t **targets);
/* Back to the first row. */
void txl_stream_rewind(TxlStream *s);
/* Segments in the whole split. */
int64_t txl_stream_segments(const TxlStream *s);

#endif
