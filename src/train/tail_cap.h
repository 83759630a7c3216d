/* The adaptive softmax's tail buffers sized by the data: per tail cluster, the most targets of
 * that cluster any segment of a run can hold, counted in the corpus at start (data/window_count.h:
 * the largest count in any L_max consecutive rows of a column group's columns together). The
 * count covers every way the segments are cut (train.varlen, the evaluation length, a resume at
 * any data position): each segment lies inside one such window. */
#ifndef TXL_TRAIN_TAIL_CAP_H
#define TXL_TRAIN_TAIL_CAP_H

#include <stddef.h>

#include "data/corpus.h"
#include "src/config/config.h"
#include "src/model/model.h"

/* The bound of a run of shape s (its L_max rows, its columns [col0, col0 + B) of the split cut
 * into B_global, its column groups) over `split`. A model without tail clusters reads nothing.
 * A read failure ends every rank (one line). collective: all ranks */
void txl_tail_cap_measure(TxlTailCap *cap, TxlCorpus *c, const TxlDims *dm, const char *split, int B_global,
                          const TxlRunShape *s);

/* The runs a config makes on rank `rank` of `world` (rank < 0: every rank's in turn, the largest
 * per cluster, as --check estimates one process for all): the training run over train
 * (*train; NULL: not counted) and the evaluation run over valid and test (*eval, the larger of the
 * two per cluster). collective: all ranks when rank >= 0 */
void txl_tail_caps_of_config(const TxlConfig *c, TxlCorpus *corpus, const TxlDims *dm, int world, int rank,
                             TxlTailCap *train, TxlTailCap *eval);

/* Adds one segment of synthetic tokens to a count made from them (*cap known, its inputs the
 * count's too, before the first): tok [(L + 1), B] (inputs rows 0..L-1, targets rows 1..L), the
 * columns in groups of group_cols as a run takes them (txl_run_groups); cap->n[i] becomes the
 * larger of itself and the most targets of tail cluster i in one group of this segment. */
void txl_tail_cap_add_segment(TxlTailCap *cap, const TxlDims *dm, const int32_t *tok, int L, int B, int group_cols);

/* a = the larger of a and b per cluster (not known unless both are). */
void txl_tail_cap_max(TxlTailCap *a, const TxlTailCap *b);

/* "2310, 812, 95" (one count per tail cluster), or "not counted". */
void txl_tail_cap_format(const TxlTailCap *cap, const TxlDims *dm, char *out, size_t n);

#endif
