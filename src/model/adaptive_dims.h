/* What the adaptive input and softmax (adaptive.h) make of the model's dimensions: whether each
 * applies and the head's width. Apart from adaptive.h, so that what only sizes the model (the
 * run state's layout, model.c; the step's checks) need not see the blocks. */
#ifndef TXL_MODEL_ADAPTIVE_DIMS_H
#define TXL_MODEL_ADAPTIVE_DIMS_H

#include "src/model/params.h"

/* Whether the input embedding is projected (else the plain lookup), and whether the output is
 * the adaptive softmax (else logits over the whole vocabulary). */
static inline int txl_adaptive_input(const TxlDims *m) { return txl_dims_has_proj(m); }
static inline int txl_adaptive_output(const TxlDims *m) { return m->n_clusters > 0 || txl_dims_has_proj(m); }
/* Columns of the head: cluster 0's tokens and one per tail cluster. */
static inline int txl_adaptive_head_size(const TxlDims *m) { return m->cut[1] + m->n_clusters; }

#endif
