/* The row-sparse reduction of the word embedding's input-side gradient. With a tied word
 * embedding looked up as plain rows (txl_model_has_embed_rows), its gradient has two parts: the
 * output layer's, dense [V, d] and final right after the output layer's backward, and the
 * input embedding's, one row per token of the segment. The dense part is all-reduced with the
 * rest of the gradient, announced first so that it overlaps the whole backward pass
 * (txl_model_backward_rows); the rows are not reduced densely: every rank's rows and tokens are
 * gathered (L x B_rank rows of d_model each, instead of the V x d_model table), and every rank adds
 * them all, rank 0's first, in position order, into the reduced table (embedding_backward). Same
 * data, same order on every rank: the replicas stay bit-identical, and repeats are bit for bit.
 * With one rank there is nothing to gather: the model adds its rows itself (not created). */
#ifndef TXL_TRAIN_EMBED_GATHER_H
#define TXL_TRAIN_EMBED_GATHER_H

#include "dist/reduce.h"
#include "src/model/model.h"

typedef struct TxlEmbedGather TxlEmbedGather;

/* Whether gathering the rows moves fewer bytes per step than the table's slice of the all-reduce
 * (P ranks, each rank receiving P blocks of its widest segment, against word_emb's floats): what
 * dist.embed_rows = auto decides by. */
int txl_embed_gather_pays(const TxlModel *m, int L_max, int64_t cols, int world);
/* The gather for training run r of model m over `reducer` (the gradient's) when dist.embed_rows
 * (`mode`, a TXL_EMBED_ROWS_* of config.h) asks for it; NULL when it does not, when the model
 * leaves no rows, or when reducer is NULL (one rank). Allocates its device buffers once: a send block of
 * the largest rank's rows and tokens, and one block per rank to receive. collective: all ranks */
TxlEmbedGather *txl_embed_gather_create(const TxlModel *m, const TxlRun *r, TxlReducer *reducer, int mode);
/* After txl_reducer_finish: gathers every rank's rows (this rank's in *rows, from
 * txl_model_backward_rows over L rows of the run's last column group) and adds them into
 * word_emb's gradient. collective: all ranks */
void txl_embed_gather_add(TxlEmbedGather *g, TxlModel *m, const TxlEmbedRows *rows, int L);
/* Bytes of the send block (one rank's share of each gather, at the largest segment); 0 for NULL. */
int64_t txl_embed_gather_block_bytes(const TxlEmbedGather *g);
/* The same for a model m whose widest rank has `cols` columns in its last group, segments of at
 * most L_max rows (what the count of tests/cuda prints without ranks). */
int64_t txl_embed_gather_block_for(const TxlModel *m, int L_max, int64_t cols);
void txl_embed_gather_destroy(TxlEmbedGather *g, const TxlModel *m);

#endif
