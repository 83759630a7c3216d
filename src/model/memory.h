/* The Transformer-XL memory and the inference caches (private to src/model): how each layer's
 * memory rows join its input, how the memory advances after a segment, and the keys / values
 * and R W_r that inference runs keep instead of recomputing them. */
#ifndef TXL_MODEL_MEMORY_H
#define TXL_MODEL_MEMORY_H

#include "src/model/segment.h"

/* cat = [memory; h] for layer l (a->cat [K, B, d]: the M memory rows copied in front of h, which
 * is already there), attn_type 2 and 3's positions added to it (txl_pos_layer_add), then the
 * layer's memory = the last Mnew rows of cat (no gradient). */
void txl_memory_concat(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);

/* a->kv [K, B, 2, H, dh] = in W_kv, in [K, B, d]. When sg->cached_kv the memory rows' keys and
 * values come from the cache and only the L new rows' are computed; an inference run's cache
 * then keeps the last Mnew rows'. */
void txl_memory_kv_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *in);

/* R W_r [K, H*dh] of layer l: a->r, or in an inference run the layer's cached copy (made again
 * only when R changed). Returns where it is. */
const void *txl_memory_rw_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);

/* After the segment: the memory holds sg->Mnew rows, and an inference run's key/value cache
 * holds exactly their keys and values unless dropout was on. */
void txl_memory_advance(TxlRun *r, const TxlSegment *sg, int dropout_on);

#endif
