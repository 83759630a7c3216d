/* The positional encodings: see positions.h. Every table row is moved
 * by the gather / scatter-add of the embedding ops, indexed by r->pos_idx. */
#include "src/model/positions.h"

#include "src/base/error.h"

void txl_positions_forward(TxlModel *m, TxlRun *r, TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int K = sg->K;
  /* attn_type 2 adds R to the embeddings undropped (the sum is dropped with them) */
  const TxlDropout dpos = txl_drop_at(m, r, TXL_SITE_POS, txl_attn_projects_positions(m->spec.dims.attn_type) ? m->spec.dropout : 0.0f);
  sg->R_kept = dpos.p == 0.0f && r->R_rows == K; /* R (and in inference runs R W_r) as last time */
  if (sg->R_kept) return;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d);
  o->posemb_forward(r->R, K, d, ldd, r->clamp_len);
  o->dropout(r->R, K, 1, d, ldd, 0, dpos);
  r->R_rows = dpos.p > 0.0f ? -1 : K; /* a dropped R is not reused */
}

/* Table row of key p of K: max(lo, T - K + p) (see positions.h). */
static int table_row(int T, int lo, int K, int p) {
  const int row = T - K + p;
  return row > lo ? row : lo;
}

/* r->pos_idx[t * per + c] for t < rows, c < per, from r->pos_host. */
static void put_index(const TxlModel *m, TxlRun *r, int rows, int per, int T, int lo, int K, int direct) {
  for (int t = 0; t < rows; t++)
    for (int c = 0; c < per; c++) r->pos_host[(int64_t)t * per + c] = direct ? t : table_row(T, lo, K, t);
  m->ops->upload(r->pos_idx, r->pos_host, (size_t)rows * per * sizeof(int32_t));
}

void txl_pos_prepare(TxlModel *m, TxlRun *r, TxlSegment *sg) {
  const TxlDims *dm = &m->spec.dims;
  const int T = dm->max_klen, K = sg->K, B = r->B, d = dm->d_model;
  switch (dm->attn_type) {
  case TXL_ATTN_REL: txl_positions_forward(m, r, sg); break;
  case TXL_ATTN_SHAW: { /* one index per key: the clamped table's rows */
    const int avail = r->clamp_len > 0 && r->clamp_len < T ? r->clamp_len : T;
    put_index(m, r, K, 1, T, T - avail, K, 0);
    break;
  }
  case TXL_ATTN_ABS_SIN: /* R without dropout, one row per (key, column) */
    txl_positions_forward(m, r, sg);
    put_index(m, r, K, B, T, 0, K, 1);
    m->ops->embedding_forward(r->pos_rows, r->pos_idx, r->R, 1.0f, (int64_t)K * B, d, txl_model_ld(m, d),
                              txl_model_ld(m, d));
    break;
  case TXL_ATTN_ABS_LEARNED: put_index(m, r, K, B, T, 0, K, 0); break;
  default: txl_fatal("internal: attn_type %d", (int)dm->attn_type);
  }
}

void txl_pos_embed_add(TxlModel *m, TxlRun *r, const TxlSegment *sg, void *h) {
  const int d = m->spec.dims.d_model;
  if (!txl_attn_adds_at_input(m->spec.dims.attn_type)) return;
  const int64_t ldd = txl_model_ld(m, d); /* flat over the padded rows: the gaps add zeros */
  m->ops->add(h, h, txl_act_at(m, r->pos_rows, sg->M * r->B * ldd), sg->LB * ldd, m->ops->act);
}

void txl_pos_layer_add(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d);
  TxlLayerActs *a = txl_slot(r, l);
  if (txl_attn_adds_at_input(m->spec.dims.attn_type) && l == 0 && sg->M)
    o->add(a->cat, a->cat, r->pos_rows, (int64_t)sg->M * r->B * ldd, o->act);
  if (txl_attn_adds_every_layer(m->spec.dims.attn_type)) {
    /* r_emb is FLAT (params.def): its rows packed */
    o->embedding_forward(r->pos_rows, r->pos_idx, txl_model_w(m, m->p.layers[l].r_emb), 1.0f, sg->KB, d, d, ldd);
    o->add(a->cat, a->cat, r->pos_rows, sg->KB * ldd, o->act);
  }
}

int txl_pos_mem_grad(const TxlModel *m) { return txl_attn_adds_every_layer(m->spec.dims.attn_type); }

void txl_pos_layer_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *dmem) {
  const TxlOps *o = m->ops;
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d);
  if (!txl_attn_adds_every_layer(m->spec.dims.attn_type)) return;
  float *g = m->g.layers[l].r_emb; /* [max_klen, d] */
  const int64_t MB = (int64_t)sg->M * r->B;
  if (MB) o->embedding_backward(g, TXL_F32, dmem, r->pos_idx, 1.0f, MB, d, d, ldd);
  o->embedding_backward(g, TXL_F32, r->dh, r->pos_idx + MB, 1.0f, sg->LB, d, d, ldd);
}

/* a->rb and r->drb are fp32 while the gathers move activations: fp32 tables only (config.c
 * refuses attn_type 1 with run.precision = bf16). */
static void need_f32(const TxlModel *m) {
  if (m->ops->act != TXL_F32) txl_fatal("internal: attn_type 1 with activations other than fp32");
}

void txl_pos_rel_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlLayerParams *lp = &m->p.layers[l];
  TxlLayerActs *a = txl_slot(r, l);
  need_f32(m);
  /* the tables r_emb and r_bias are FLAT (params.def): their rows packed; a->r in padded rows,
   * as every activation; a->rb [K, H] fp32, packed (the attention op reads it so) */
  const int HD = dm->n_head * dm->d_head;
  o->embedding_forward(a->r, r->pos_idx, txl_model_w(m, lp->r_emb), 1.0f, sg->K, HD, HD, txl_model_ld(m, HD));
  o->embedding_forward(a->rb, r->pos_idx, txl_model_w(m, lp->r_bias), 1.0f, sg->K, dm->n_head, dm->n_head, dm->n_head);
}

void txl_pos_rel_backward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlLayerParams *gp = &m->g.layers[l];
  need_f32(m);
  const int HD = dm->n_head * dm->d_head;
  o->embedding_backward(gp->r_emb, TXL_F32, r->dr, r->pos_idx, 1.0f, sg->K, HD, HD, txl_model_ld(m, HD));
  o->embedding_backward(gp->r_bias, TXL_F32, r->drb, r->pos_idx, 1.0f, sg->K, dm->n_head, dm->n_head, dm->n_head);
}
