/* The positional encodings (private to src/model): attn_type 0's R (its R W_r is memory.c's), and
 * those of attn_type 1, 2 and 3. Each follows the original's mem_transformer.py, quirks included:
 *   1 (Shaw et al.): per layer r_emb [max_klen, H*dh] and r_bias [max_klen, H]; with clamp_len > 0
 *     only the last clamp_len rows; of those the last K, or all of them preceded by copies of
 *     their first row when K is larger. They are the attention's r and rb (no W_r, no vb).
 *   2 (absolute sinusoids): R [K, d] of positions K-1 .. 0 (clamped to clamp_len), no dropout;
 *     R[M:] is added to the word embeddings before their dropout, and at layer 0 R[:M] to the
 *     memory rows, in place: the memory kept for the next segment holds the sum.
 *   3 (Al-Rfou et al.): per layer r_emb [max_klen, d]; layer l's input rows get r_emb[l]'s last
 *     L rows and its memory rows the M rows before those (row 0 repeated in front when fewer),
 *     in place before the memory advances, so the memory holds them; the memory rows' share of
 *     the gradient reaches r_emb (the original's in-place add onto the detached memory).
 * One table row per key row: position p of K maps to row max(lo, max_klen - K + p). */
#ifndef TXL_MODEL_POSITIONS_H
#define TXL_MODEL_POSITIONS_H

#include "src/model/segment.h"

/* r->R [K, d] = dropout(relative positions K-1 .. 0) (one mask for every column; attn_type 2: no
 * dropout). A dropout-free
 * R of the same K is the one already there and is kept (generation: every token): sets
 * sg->R_kept. */
void txl_positions_forward(TxlModel *m, TxlRun *r, TxlSegment *sg);

/* Once per forward, before the embedding: attn_type 0: R (txl_positions_forward); 1, 3: the
 * table rows of the segment's keys (r->pos_idx); 2: R without dropout and r->pos_rows
 * [K, B, d] = R broadcast over the columns. */
void txl_pos_prepare(TxlModel *m, TxlRun *r, TxlSegment *sg);
/* attn_type 2: h [L, B, d] += R[M:] (the embedding, before its dropout); others: nothing. */
void txl_pos_embed_add(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *h);
/* Inside txl_memory_concat, after the memory rows were copied into a->cat and before the new
 * memory is taken from it: attn_type 2 at layer 0: cat[:M] += R[:M]; 3: cat += layer l's
 * positions; others: nothing. */
void txl_pos_layer_add(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);
/* attn_type 3 only (whether the layers must compute d(memory rows) for it). */
int txl_pos_mem_grad(const TxlModel *m);
/* attn_type 3, at the end of layer l's backward: r_emb[l]'s gradient += the column sums of
 * dmem [M, B, d] (d(cat[:M])) and of r->dh [L, B, d] (d(layer input)). */
void txl_pos_layer_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *dmem);
/* attn_type 1: a->r [K, H*dh] and a->rb [K, H] = layer l's clamped r_emb and r_bias rows. */
void txl_pos_rel_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);
/* attn_type 1: their gradients r->dr [K, H*dh] and r->drb [K, H] into r_emb[l] and r_bias[l]. */
void txl_pos_rel_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);

#endif
