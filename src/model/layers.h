/* The blocks of the Transformer-XL as forward / backward pairs of free functions over backend
 * ops (private to src/model; model.c lists them): the attention block (q, k, v, R projections,
 * relative attention, output projection), the FFN block, the residual + LayerNorm joints of
 * post- and pre-norm layers, the embedding and the output layer. Each reads its parameters from
 * m->p, adds its parameters' gradients into m->g, and its activations from r->acts[l].
 * Notation: L query rows, M memory rows, K = M + L, B columns on this rank, d = d_model,
 * HD = H*dh, di = d_inner, V = vocabulary. Time-major [T, B, ...] throughout; an activation of f
 * features lies in rows txl_model_ld(m, f) apart (model.h). */
#ifndef TXL_MODEL_LAYERS_H
#define TXL_MODEL_LAYERS_H

#include "src/model/segment.h"

/* ---- embedding and output layer ------------------------------------------------------------ */
/* h [L, B, d] = dropout(E[tokens] * sqrt(d)); the tokens [L, B] in r->tokens (on the device). */
void txl_embed_forward(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *h);
/* The embedding's gradients from dh [L, B, d] = d(h) (dropout undone in place); with
 * rows_only, only the dropout: dh then holds the rows of word_emb's gradient over sqrt(d)
 * (txl_model_backward_rows). */
void txl_embed_backward(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *dh, int rows_only);
/* hout = dropout(hout); logits = hout E^T + b (or the adaptive softmax); with targets (host,
 * already in r->targets) the cross-entropy: returns the sum of the L*B losses, and leaves
 * d(loss)/d(logits) * grad_scale in the logits when grad_scale != 0. */
double txl_output_forward(TxlModel *m, TxlRun *r, const TxlSegment *sg, const int32_t *targets, float grad_scale);
/* The output layer's gradients; r->dh = d(loss)/d(hout before its dropout). */
void txl_output_backward(TxlModel *m, TxlRun *r, const TxlSegment *sg);

/* ---- attention block ------------------------------------------------------------------------ */
/* r->tmp [L, B, d] = dropout(RelAttn(q, k, v, R W_r) W_o) with q = in[M:] W_q, [k v] = in W_kv:
 * in [K, B, d] is a->cat, or pre-norm LayerNorm1(cat) (a->ln_cat). */
void txl_attn_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *in);
/* Backward of the block up to its output's dropout: datt [L, B, d] = d(attention output after
 * W_o); in as in the forward. dx [L, B, d] += d(in[M:]); when dmem is not NULL it gets
 * d(in[:M]) ([M, B, d], for the parameters of a pre-norm LayerNorm: the memory takes no
 * gradient). */
void txl_attn_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *dx, void *dmem, const void *datt,
                       const void *in);

/* ---- FFN block ------------------------------------------------------------------------------ */
/* r->tmp [L, B, d] = dropout(dropout(ReLU(x W1 + b1)) W2 + b2), x = a->h1 [L, B, d]. */
void txl_ffn_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);
/* dout [L, B, d] = d(FFN output) after its dropout's backward; x the FFN input.
 * dx [L, B, d] += d(x) (residual stream). */
void txl_ffn_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *dx, const void *dout,
                      const void *x);

/* ---- layers --------------------------------------------------------------------------------- */
/* Layer l over the segment: its input h is in a->cat after the memory rows (already there);
 * writes its output into out [L, B, d].
 *   post-norm: h1 = LN1(h + Attn(cat)),        out = LN2(h1 + FFN(h1))
 *   pre-norm:  out1 = h + Attn(LN1(cat)),      out = out1 + FFN(LN2(out1)) */
void txl_layer_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *out);
/* Its mirror: r->dh holds d(out) on entry, d(h) on exit; the layer's gradients added. */
void txl_layer_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg);

#endif
