/* The most tokens of each class (a range of ids) that any `window` consecutive rows of a split
 * hold, counted over a group of columns together: the bound that sizes the adaptive softmax's
 * tail buffers (src/train/tail_cap.h). A segment of at most `window` rows, starting at any row,
 * lies inside one such window in every column of its group (the columns of a rank walk down
 * together), so whatever cuts the segments (train.varlen, an evaluation length, a resumed data
 * position) none holds more. */
#ifndef TXL_DATA_WINDOW_COUNT_H
#define TXL_DATA_WINDOW_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"

#define TXL_WINDOW_MAX_CLASSES 8

/* Rows pushed in order, [rows, cols] time-major; the columns form groups of group_cols in order
 * (the last may hold fewer). Class k holds ids [cut[k], cut[k + 1]); other ids count nowhere. */
typedef struct {
  int window, cols, group_cols, n_groups, n_classes;
  int32_t cut[TXL_WINDOW_MAX_CLASSES + 1];
  int32_t *ring;  /* [window, n_groups, n_classes] the counts of the last `window` rows, row r at r % window */
  int64_t *sum;   /* [n_groups, n_classes] the counts of the rows in the current window */
  int64_t *most;  /* [n_groups, n_classes] the largest window count so far */
  int64_t rows;   /* rows pushed */
} TxlWindowCount;

/* window >= 1, cols >= 1, 1 <= group_cols, 0 <= n_classes <= TXL_WINDOW_MAX_CLASSES, cut
 * non-decreasing: anything else is the caller's error (txl_fatal). */
void txl_window_count_init(TxlWindowCount *w, int window, int cols, int group_cols, int n_classes,
                           const int32_t *cut);
void txl_window_count_free(TxlWindowCount *w);
/* Pushes n_rows rows: tok [n_rows, cols]. */
void txl_window_count_rows(TxlWindowCount *w, const int32_t *tok, int64_t n_rows);
/* most[k]: the largest count of class k in the rows of any window (the last `window` rows ending
 * at any row pushed, fewer at the start) of any group. Zeros before any row. */
void txl_window_count_most(const TxlWindowCount *w, int64_t *most);

/* The same over a split of corpus c cut into B_global columns (as data/stream.h walks it), for
 * the target rows (1 .. col_len - 1: what a segment predicts) of columns [col0, col0 + B_local),
 * read in blocks. Returns 0, or -1 with the reader's message in err. */
int txl_window_count_split(TxlCorpus *c, const char *split, int B_global, int col0, int B_local, int window,
                           int group_cols, int n_classes, const int32_t *cut, int64_t *most, char *err, size_t cap);

#endif
