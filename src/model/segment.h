/* What the blocks of the model share (private to src/model): the shape of a segment, the dropout
 * of each site, a layer's activations and input, and the loss sum the output layers add to.
 * Below the blocks (layers.h, adaptive.h, memory.h, positions.h), which all use it. */
#ifndef TXL_MODEL_SEGMENT_H
#define TXL_MODEL_SEGMENT_H

#include "src/model/dropout_sites.h"
#include "src/model/model.h"

/* The shape of one segment (the last forward's, for the backward). */
typedef struct {
  int L, M, K;       /* query rows, memory rows before them, keys                      */
  int Mnew;          /* memory rows after the segment: min(K, mem_len)                 */
  int64_t LB, KB;    /* L * B, K * B                                                   */
  int R_kept;        /* R (and, in inference runs, R W_r) is the one the last forward made */
  int cached_kv;     /* the key/value cache holds the memory rows' keys and values     */
  TxlAttnShape as;   /* the relative attention's shape                                 */
} TxlSegment;

/* The segment of L rows after M memory rows (R_kept and cached_kv 0: the forward sets them). */
TxlSegment txl_segment(const TxlModel *m, const TxlRun *r, int L, int M);

/* The dropout at `site` with probability p, on when the last forward had dropout on. */
static inline TxlDropout txl_drop_at(const TxlModel *m, const TxlRun *r, uint32_t site, float p) {
  TxlDropout d = {r->last_dropout_on ? p : 0.0f, m->spec.seed, site, (uint32_t)r->last_step, r->step_dev};
  return d;
}
/* Dropout p of the model at layer l's site ls (a TXL_LSITE_*). */
static inline TxlDropout txl_layer_drop(const TxlModel *m, const TxlRun *r, int l, int ls) {
  return txl_drop_at(m, r, txl_layer_site(l, ls), m->spec.dropout);
}
/* The activations of layer l. */
static inline TxlLayerActs *txl_slot(TxlRun *r, int l) { return &r->acts[l % r->n_slots]; }
/* Layer l's input h [L, B, d]: the rows of its cat after the M memory rows. */
static inline void *txl_layer_input(const TxlModel *m, TxlRun *r, int l, int M) {
  return txl_act_at(m, txl_slot(r, l)->cat, (int64_t)M * r->B * txl_model_ld(m, m->spec.dims.d_model));
}

/* The n losses [n] (fp32, device) added in order to the forward's loss sum on the device (ops
 * loss_sum): to (add) or in place of (!add) what it holds; in r->loss_out[r->group] when set, else
 * r->loss_dev. */
void txl_loss_add(const TxlModel *m, TxlRun *r, const float *loss, int64_t n, int add);
/* The forward's loss sum read back to the host (one synchronisation), or 0 when r->loss_out is
 * set (the caller reads it later). */
double txl_loss_result(const TxlModel *m, TxlRun *r);

#endif
