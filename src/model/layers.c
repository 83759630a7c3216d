/* The Transformer-XL blocks, forward and backward: see layers.h. Every matrix product is a named
 * linear op (linear.h); the memory and the inference caches are memory.c's. */
#include "src/model/layers.h"

#include <math.h>

#include "src/model/adaptive.h"
#include "src/model/linear.h"
#include "src/model/memory.h"
#include "src/model/positions.h"

/* r_w_bias (u) and r_r_bias (v) of layer l: its own, or the model's shared pair (NULL for the
 * attention types without them: u for attn_type 0 and 1, vb for 0). */
static const float *bias_u(const TxlModel *m, int l) {
  return m->p.layers[l].r_w_bias ? m->p.layers[l].r_w_bias : m->p.r_w_bias;
}
static const float *bias_vb(const TxlModel *m, int l) {
  return m->p.layers[l].r_r_bias ? m->p.layers[l].r_r_bias : m->p.r_r_bias;
}

/* ---- embedding and output layer ------------------------------------------------------------ */

void txl_embed_forward(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *h) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const int d = dm->d_model, ldd = txl_model_ld(m, d); /* the table's rows and h's */
  if (txl_adaptive_input(dm))
    txl_adaptive_embed_forward(m, r, h, sg->LB, sqrtf((float)d));
  else
    o->embedding_forward(h, r->tokens, txl_model_w(m, m->p.word_emb), sqrtf((float)d), sg->LB, d, ldd, ldd);
  txl_pos_embed_add(m, r, sg, h); /* attn_type 2: + the absolute positions, dropped together */
  o->dropout(h, sg->L, r->B, d, ldd, r->col0, txl_drop_at(m, r, TXL_SITE_EMBED, m->spec.dropout));
}

void txl_embed_backward(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *dh, int rows_only) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const int d = dm->d_model, ldd = txl_model_ld(m, d);
  o->dropout(dh, sg->L, r->B, d, ldd, r->col0, txl_drop_at(m, r, TXL_SITE_EMBED, m->spec.dropout));
  if (rows_only) return;
  if (txl_adaptive_input(dm))
    txl_adaptive_embed_backward(m, r, dh, sg->LB, sqrtf((float)d));
  else
    o->embedding_backward(m->g.word_emb, TXL_F32, dh, r->tokens, sqrtf((float)d), sg->LB, d, ldd, ldd);
}

double txl_output_forward(TxlModel *m, TxlRun *r, const TxlSegment *sg, const int32_t *targets, float grad_scale) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p;
  const int d = dm->d_model, V = dm->n_token, ldV = txl_model_ld(m, V);
  o->dropout(r->hout, sg->L, r->B, d, txl_model_ld(m, d), r->col0, txl_drop_at(m, r, TXL_SITE_OUTPUT, m->spec.dropout));
  if (txl_adaptive_output(dm)) return txl_adaptive_output_forward(m, r, targets, sg->LB, grad_scale);
  const float *w_out = p->out_weight ? p->out_weight : p->word_emb; /* [V, d] */
  txl_linear_t_bias_forward(m, r->logits, ldV, r->hout, txl_model_w(m, w_out), txl_model_ld(m, d),
                            txl_model_w(m, p->out_bias), sg->LB, d, V);
  if (!targets) return 0.0;
  o->xent_forward_backward(r->logits, r->loss, r->targets, grad_scale, sg->LB, V, ldV);
  txl_loss_add(m, r, r->loss, sg->LB, 0);
  return txl_loss_result(m, r);
}

void txl_output_backward(TxlModel *m, TxlRun *r, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p, *g = &m->g;
  const int d = dm->d_model, V = dm->n_token, ldV = txl_model_ld(m, V);
  if (txl_adaptive_output(dm)) {
    txl_adaptive_output_backward(m, r, sg->LB);
  } else { /* logits holds d(loss)/d(logits) */
    const float *w_out = p->out_weight ? p->out_weight : p->word_emb;
    float *gw_out = g->out_weight ? g->out_weight : g->word_emb;
    txl_linear_t_bias_backward_w(m, gw_out, txl_model_ld(m, d), g->out_bias, r->logits, r->hout, sg->LB, d, V);
    txl_linear_t_backward_x(m, r->dh, 0.0f, 1.0f, r->logits, ldV, txl_model_w(m, w_out), txl_model_ld(m, d), sg->LB, d,
                            V);
  }
  o->dropout(r->dh, sg->L, r->B, d, txl_model_ld(m, d), r->col0, txl_drop_at(m, r, TXL_SITE_OUTPUT, m->spec.dropout));
}

/* ---- attention block ------------------------------------------------------------------------ */

void txl_attn_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *in) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, HD = m->spec.dims.n_head * m->spec.dims.d_head;
  const TxlLayerParams *lp = &m->p.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  /* q = in[M:] W_q; [k v] = in W_kv; r = R W_r */
  const void *in_new = txl_act_at(m, in, (int64_t)sg->M * r->B * txl_model_ld(m, d)); /* [L, B, d] the current rows */
  txl_linear_forward(m, a->q, in_new, txl_model_w(m, lp->w_qkv), sg->LB, d, HD, txl_model_ld_qkv(m));
  txl_memory_kv_forward(m, r, l, sg, in);
  /* the relative term's r: R W_r (attn_type 0), the clamped r_emb rows (1), none (2, 3) */
  const void *rl = NULL;
  if (txl_attn_projects_positions(m->spec.dims.attn_type)) rl = txl_memory_rw_forward(m, r, l, sg);
  if (txl_attn_key_bias(m->spec.dims.attn_type)) {
    txl_pos_rel_forward(m, r, l, sg);
    rl = a->r;
  }
  o->rel_attn_forward(a->vec, a->saved, a->q, a->kv, rl, bias_u(m, l), bias_vb(m, l), a->rb, sg->as,
                      txl_drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_PROB), m->spec.dropatt), r->attn_work);
  /* attention output W_o, dropout */
  txl_linear_forward(m, r->tmp, a->vec, txl_model_w(m, lp->w_o), sg->LB, HD, d, txl_model_ld(m, d));
  o->dropout(r->tmp, sg->L, r->B, d, txl_model_ld(m, d), r->col0, txl_layer_drop(m, r, l, TXL_LSITE_ATTN_OUT));
}

void txl_attn_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *dx, void *dmem, const void *datt,
                       const void *in) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, HD = m->spec.dims.n_head * m->spec.dims.d_head, M = sg->M, B = r->B;
  const TxlLayerParams *lp = &m->p.layers[l];
  const TxlLayerParams *gp = &m->g.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  float *gu = gp->r_w_bias ? gp->r_w_bias : m->g.r_w_bias;
  float *gvb = gp->r_r_bias ? gp->r_r_bias : m->g.r_r_bias;
  const int kv_col = txl_model_kv_col(m), ld_qkv = txl_model_ld_qkv(m), ld_o = txl_model_ld(m, d);
  const void *w_q = txl_model_w(m, lp->w_qkv), *w_kv = txl_model_w(m, lp->w_qkv + kv_col);
  /* W_o */
  txl_linear_backward_w(m, gp->w_o, a->vec, datt, sg->LB, HD, d, ld_o);
  txl_linear_backward_x(m, r->dvec, 0.0f, datt, txl_model_w(m, lp->w_o), sg->LB, HD, d, ld_o);
  const TxlAttnType at = m->spec.dims.attn_type;
  const int rel = txl_attn_relative(at);
  o->rel_attn_backward(r->dq, r->dkv, rel ? r->dr : NULL, gu, gvb, r->drb, r->dvec, a->vec, a->q, a->kv,
                       rel ? a->r : NULL, bias_u(m, l), bias_vb(m, l), a->rb, a->saved, sg->as,
                       txl_drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_PROB), m->spec.dropatt), r->attn_work);
  /* W_r (attn_type 0; 1: r_emb, r_bias), W_q, W_kv: the weights' gradients, then d(in) */
  if (txl_attn_projects_positions(at))
    txl_linear_backward_w(m, gp->w_r, r->R, r->dr, sg->K, d, HD, txl_model_ld(m, HD));
  if (txl_attn_key_bias(at)) txl_pos_rel_backward(m, r, l, sg);
  txl_linear_backward_w(m, gp->w_qkv, txl_act_at(m, in, (int64_t)M * B * txl_model_ld(m, d)), r->dq, sg->LB, d, HD,
                        ld_qkv);
  txl_linear_backward_w(m, gp->w_qkv + kv_col, in, r->dkv, sg->KB, d, 2 * HD, ld_qkv);
  txl_linear_backward_x(m, dx, 1.0f, r->dq, w_q, sg->LB, d, HD, ld_qkv);
  txl_linear_backward_x(m, dx, 1.0f, txl_act_at(m, r->dkv, (int64_t)M * B * txl_model_ld(m, 2 * HD)), w_kv, sg->LB, d,
                        2 * HD, ld_qkv);
  if (dmem && M) txl_linear_backward_x(m, dmem, 0.0f, r->dkv, w_kv, (int64_t)M * B, d, 2 * HD, ld_qkv);
}

/* ---- FFN block ------------------------------------------------------------------------------ */

void txl_ffn_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, di = m->spec.dims.d_inner;
  const TxlLayerParams *lp = &m->p.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  /* ReLU(x W1 + b1), dropout: a->ff_a before the dropout, r->ff_drop after. Without dropout the
   * bias and ReLU are the GEMM's epilogue; with it they share the dropout's pass. */
  const TxlDropout dhid = txl_layer_drop(m, r, l, TXL_LSITE_FF_HIDDEN);
  if (dhid.p > 0.0f) {
    txl_linear_forward(m, a->ff_a, a->h1, txl_model_w(m, lp->w_ff1), sg->LB, d, di, txl_model_ld(m, di));
    o->bias_relu_dropout_forward(a->ff_a, r->ff_drop, lp->b_ff1, sg->L, r->B, di, txl_model_ld(m, di), r->col0, dhid);
  } else {
    txl_linear_bias_forward(m, a->ff_a, a->h1, txl_model_w(m, lp->w_ff1), txl_model_ld(m, di),
                            txl_model_w(m, lp->b_ff1), 1, sg->LB, d, di);
  }
  const void *ffd = dhid.p > 0.0f ? r->ff_drop : a->ff_a;
  /* W2 + b2, dropout */
  txl_linear_bias_forward(m, r->tmp, ffd, txl_model_w(m, lp->w_ff2), txl_model_ld(m, d), txl_model_w(m, lp->b_ff2), 0,
                          sg->LB, di, d);
  o->dropout(r->tmp, sg->L, r->B, d, txl_model_ld(m, d), r->col0, txl_layer_drop(m, r, l, TXL_LSITE_FF_OUT));
}

void txl_ffn_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *dx, const void *dout,
                      const void *x) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, di = m->spec.dims.d_inner;
  const TxlLayerParams *lp = &m->p.layers[l];
  const TxlLayerParams *gp = &m->g.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  const TxlDropout dhid = txl_layer_drop(m, r, l, TXL_LSITE_FF_HIDDEN);
  /* W2 + b2 */
  const void *ffd = a->ff_a;
  if (dhid.p > 0.0f) { /* recompute the dropped hidden layer from its mask */
    o->copy(r->ff_drop, a->ff_a, (size_t)sg->LB * txl_model_ld(m, di) * txl_dtype_size(o->act));
    o->dropout(r->ff_drop, sg->L, r->B, di, txl_model_ld(m, di), r->col0, dhid);
    ffd = r->ff_drop;
  }
  txl_linear_bias_backward_w(m, gp->w_ff2, txl_model_ld(m, d), gp->b_ff2, ffd, dout, sg->LB, di, d);
  txl_linear_backward_x(m, r->dff, 0.0f, dout, txl_model_w(m, lp->w_ff2), sg->LB, di, d, txl_model_ld(m, d));
  /* dropout, ReLU, W1 + b1 */
  o->relu_dropout_backward(r->dff, a->ff_a, sg->L, r->B, di, txl_model_ld(m, di), r->col0, dhid);
  txl_linear_bias_backward_w(m, gp->w_ff1, txl_model_ld(m, di), gp->b_ff1, x, r->dff, sg->LB, d, di);
  txl_linear_backward_x(m, dx, 1.0f, r->dff, txl_model_w(m, lp->w_ff1), sg->LB, d, di, txl_model_ld(m, di));
}

/* ---- layers --------------------------------------------------------------------------------- */

void txl_layer_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, void *out) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d);
  const float eps = m->spec.ln_eps;
  const TxlLayerParams *lp = &m->p.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  const void *h = txl_layer_input(m, r, l, sg->M); /* [L, B, d] */
  txl_memory_concat(m, r, l, sg);
  if (m->spec.pre_lnorm) {
    /* out1 = h + Attn(LN1(cat)) (a->res1), h1 = LN2(out1), out = out1 + FFN(h1) */
    o->layernorm_forward(a->ln_cat, a->ln_cat_mean, a->ln_cat_rstd, a->cat, lp->ln1_w, lp->ln1_b, sg->KB, d, ldd,
                         eps);
    txl_attn_forward(m, r, l, sg, a->ln_cat);
    o->add_layernorm_forward(a->res1, a->h1, a->ln2_mean, a->ln2_rstd, h, r->tmp, lp->ln2_w, lp->ln2_b, sg->LB, d,
                             ldd, eps);
    txl_ffn_forward(m, r, l, sg);
    o->add(out, a->res1, r->tmp, sg->LB * ldd, o->act); /* the gaps too: zeros */
  } else {
    /* h1 = LN1(h + Attn(cat)) (res1 its input), out = LN2(h1 + FFN(h1)) (res2 its input) */
    txl_attn_forward(m, r, l, sg, a->cat);
    o->add_layernorm_forward(a->res1, a->h1, a->ln1_mean, a->ln1_rstd, h, r->tmp, lp->ln1_w, lp->ln1_b, sg->LB, d,
                             ldd, eps);
    txl_ffn_forward(m, r, l, sg);
    o->add_layernorm_forward(a->res2, out, a->ln2_mean, a->ln2_rstd, a->h1, r->tmp, lp->ln2_w, lp->ln2_b, sg->LB, d,
                             ldd, eps);
  }
}

/* Post-norm: out = LN2(res2), res2 = h1 + drop(FFN(h1)); h1 = LN1(res1), res1 = h + drop(Attn(cat)). */
static void post_norm_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d);
  const TxlLayerParams *lp = &m->p.layers[l], *gp = &m->g.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  o->layernorm_backward_dropout(r->dres, r->dtmp, gp->ln2_w, gp->ln2_b, r->dh, a->res2, lp->ln2_w, a->ln2_mean,
                                a->ln2_rstd, sg->L, r->B, d, ldd, r->col0, txl_layer_drop(m, r, l, TXL_LSITE_FF_OUT));
  txl_ffn_backward(m, r, l, sg, r->dres, r->dtmp, a->h1); /* dres = d h1 */
  o->layernorm_backward_dropout(r->dh, r->dtmp, gp->ln1_w, gp->ln1_b, r->dres, a->res1, lp->ln1_w, a->ln1_mean,
                                a->ln1_rstd, sg->L, r->B, d, ldd, r->col0, txl_layer_drop(m, r, l, TXL_LSITE_ATTN_OUT));
  /* attn_type 3 also needs d(memory rows): their positions take a gradient */
  void *dmem = txl_pos_mem_grad(m) ? r->dmem : NULL;
  txl_attn_backward(m, r, l, sg, r->dh, dmem, r->dtmp, a->cat);
  txl_pos_layer_backward(m, r, l, sg, dmem);
}

/* Pre-norm: out = out1 + drop(FFN(LN2(out1))); out1 = h + drop(Attn(LN1([mem; h]))). */
static void pre_norm_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d), M = sg->M, B = r->B;
  const size_t act_bytes = (size_t)sg->LB * ldd * txl_dtype_size(o->act); /* one [L, B, d] activation */
  const TxlLayerParams *lp = &m->p.layers[l], *gp = &m->g.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  o->copy(r->dtmp, r->dh, act_bytes);
  o->dropout(r->dtmp, sg->L, B, d, ldd, r->col0, txl_layer_drop(m, r, l, TXL_LSITE_FF_OUT));
  o->zero(r->dres, act_bytes);
  txl_ffn_backward(m, r, l, sg, r->dres, r->dtmp, a->h1); /* dres = d LN2(out1) */
  o->layernorm_backward(r->dh, gp->ln2_w, gp->ln2_b, r->dres, a->res1, lp->ln2_w, a->ln2_mean, a->ln2_rstd, sg->LB,
                        d, ldd);
  o->copy(r->dtmp, r->dh, act_bytes);
  o->dropout(r->dtmp, sg->L, B, d, ldd, r->col0, txl_layer_drop(m, r, l, TXL_LSITE_ATTN_OUT));
  o->zero(r->dres, act_bytes);
  txl_attn_backward(m, r, l, sg, r->dres, r->dmem, r->dtmp, a->ln_cat); /* d LN1(cat): dmem rows, then dres */
  /* the memory rows: LayerNorm parameters only, the memory takes no gradient; with attn_type 3
   * their positions do: d(memory rows) into r->pos_rows (free in the backward) */
  void *dmem_in = NULL;
  if (M && txl_pos_mem_grad(m)) {
    dmem_in = r->pos_rows;
    o->zero(dmem_in, (size_t)M * B * ldd * txl_dtype_size(o->act));
  }
  if (M)
    o->layernorm_backward(dmem_in, gp->ln1_w, gp->ln1_b, r->dmem, a->cat, lp->ln1_w, a->ln_cat_mean, a->ln_cat_rstd,
                          (int64_t)M * B, d, ldd);
  o->layernorm_backward(r->dh, gp->ln1_w, gp->ln1_b, r->dres, txl_layer_input(m, r, l, M), lp->ln1_w,
                        a->ln_cat_mean + (size_t)M * B, a->ln_cat_rstd + (size_t)M * B, sg->LB, d, ldd);
  txl_pos_layer_backward(m, r, l, sg, dmem_in);
}

void txl_layer_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  if (m->spec.pre_lnorm)
    pre_norm_backward(m, r, l, sg);
  else
    post_norm_backward(m, r, l, sg);
}
