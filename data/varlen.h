/* Variable segment lengths for training (train.varlen, the original's --varlen): the rows of
 * each step drawn around tgt_len by the original's rule (LMOrderedIterator.get_varlen_iter):
 *   bptt = tgt_len with probability 0.95, else tgt_len / 2;
 *   rows = min(tgt_len + 15, max(5, int(normal(bptt, std 5))))   (int() truncates toward zero)
 * from a counter-based stream keyed by (seed, step), so every rank draws the same length and a
 * resumed run the lengths of the uninterrupted one. */
#ifndef TXL_DATA_VARLEN_H
#define TXL_DATA_VARLEN_H

#include <stdint.h>

#define TXL_VARLEN_STD 5         /* the normal's standard deviation                     */
#define TXL_VARLEN_MIN 5         /* fewest rows                                         */
#define TXL_VARLEN_DEVIATIONS 3  /* most rows: tgt_len + TXL_VARLEN_DEVIATIONS * std    */

/* The most rows a step can have: tgt_len + 15 with varlen, tgt_len without. */
static inline int txl_varlen_max_rows(int tgt_len, int varlen) {
  return varlen ? tgt_len + TXL_VARLEN_DEVIATIONS * TXL_VARLEN_STD : tgt_len;
}
/* The rows of update `step` (0-based) under seed. */
int txl_varlen_rows(uint32_t seed, int step, int tgt_len);

#endif
