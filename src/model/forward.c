/* The forward and backward passes (model.h) as lists of the blocks of layers.c, above them all:
 * model.c, which sizes and holds the model and its run state, knows none of the blocks. Notation
 * as in model.c. */
#include "src/model/model.h"

#include <math.h>

#include "src/base/error.h"
#include "src/model/adaptive_dims.h"
#include "src/model/layers.h"
#include "src/model/memory.h"
#include "src/model/positions.h"

/* ---- forward and backward ------------------------------------------------------------------ */

static void upload_inputs(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets, int L, int step) {
  const TxlOps *o = m->ops;
  const size_t bytes = (size_t)L * (size_t)r->B * sizeof(int32_t);
  const uint32_t s = (uint32_t)step;
  o->upload(r->tokens, tokens, bytes); /* no host synchronisation (ops.def) */
  if (targets) o->upload(r->targets, targets, bytes);
  o->upload(r->step_dev, &s, sizeof s);
}

void txl_run_upload(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets, int L, int step) {
  upload_inputs(m, r, tokens, targets, L, step);
  r->inputs_ready++;
}

double txl_model_forward(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets,
                         int L, int step, int dropout_on, float grad_scale) {
  const int n_layer = m->spec.dims.n_layer;
  if (L < 1 || L > r->L_max) txl_fatal("internal: segment of %d rows, capacity %d", L, r->L_max);
  TxlSegment sg = txl_segment(m, r, L, r->mem_rows);
  r->last_L = L;
  r->last_M = sg.M;
  r->last_step = step;
  r->last_dropout_on = dropout_on;
  if (r->inputs_ready > 0) r->inputs_ready--;
  else upload_inputs(m, r, tokens, targets, L, step);

  /* R = dropout(positions) (attn_type 0; the other types' positions, positions.h);
   * h0 = dropout(E[x] sqrt(d)): layer 0's input, after its memory rows */
  txl_pos_prepare(m, r, &sg);
  txl_embed_forward(m, r, &sg, txl_layer_input(m, r, 0, sg.M));
  /* Inference runs keep each layer's keys and values of the memory rows: those were computed
   * when the rows were new, from the same parameters (not with attn_type 2 and 3, whose
   * positions change the memory rows in place every segment). */
  sg.cached_kv = r->kv_cache && r->kv_valid && !dropout_on && txl_attn_relative(m->spec.dims.attn_type);
  /* h_{l+1} = Layer_l([memory_l; h_l]); the last layer's output goes to hout */
  for (int l = 0; l < n_layer; l++)
    txl_layer_forward(m, r, l, &sg, l + 1 < n_layer ? txl_layer_input(m, r, l + 1, sg.M) : r->hout);
  txl_memory_advance(r, &sg, dropout_on);
  /* logits = dropout(hout) E^T + b, cross-entropy */
  return txl_output_forward(m, r, &sg, targets, grad_scale);
}

int txl_model_has_embed_rows(const TxlModel *m) {
  const TxlDims *dm = &m->spec.dims;
  return dm->tie_weight && !txl_adaptive_input(dm);
}

int64_t txl_model_word_emb_end(const TxlModel *m) {
  const TxlParamTable *t = &m->table;
  const int64_t begin = m->p.word_emb - m->param_buf;
  int64_t end = t->total;
  for (int i = 0; i < t->n_tensors; i++)
    if (t->tensors[i].offset > begin && t->tensors[i].offset < end) end = t->tensors[i].offset;
  if (begin != 0 || end > t->layer_begin) txl_fatal("internal: word_emb at [%lld, %lld) of the gradient buffer",
                                                    (long long)begin, (long long)end);
  return end;
}

void txl_model_backward_rows(TxlModel *m, TxlRun *r, TxlGradReady ready, void *ctx, TxlEmbedRows *rows) {
  const TxlParamTable *t = &m->table;
  if (!r->training) txl_fatal("internal: backward on a forward-only run state");
  const TxlSegment sg = txl_segment(m, r, r->last_L, r->last_M);
  const int as_rows = rows && txl_model_has_embed_rows(m);
  const int64_t head = as_rows ? txl_model_word_emb_end(m) : 0; /* announced already: [0, head) */
  if (rows) rows->n = 0;
  /* r->dh = d(hout) */
  txl_output_backward(m, r, &sg);
  if (ready && head) ready(ctx, 0, head); /* word_emb: its output-layer part is all it will get */
  /* layers in reverse; r->dh holds d(layer output) on entry, d(layer input) on exit */
  for (int l = m->spec.dims.n_layer - 1; l >= 0; l--) {
    txl_layer_backward(m, r, l, &sg);
    if (ready) ready(ctx, t->layer_begin + (int64_t)l * t->layer_size, t->layer_begin + (int64_t)(l + 1) * t->layer_size);
  }
  txl_embed_backward(m, r, &sg, r->dh, as_rows);
  if (as_rows) {
    const int d = m->spec.dims.d_model;
    const TxlEmbedRows left = {r->dh, r->tokens, sg.LB, d, txl_model_ld(m, d), sqrtf((float)d)};
    *rows = left;
  }
  if (ready) { /* the tensors outside the layers: the tail (output bias, ...), then the head */
    ready(ctx, t->layer_end, t->total);
    ready(ctx, head, t->layer_begin);
  }
}

void txl_model_backward(TxlModel *m, TxlRun *r, TxlGradReady ready, void *ctx) {
  txl_model_backward_rows(m, r, ready, ctx, NULL);
}
