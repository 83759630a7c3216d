/* Adaptive input and softmax: see adaptive.h. Rows are grouped by cluster on the device (the op
 * adaptive_group, into the run's slots: model.h, TxlRun.ad_in / ad_tg), every product is a linear
 * op (linear.h), gathers and scatters are the embedding ops (a lookup by row index; a
 * deterministic scatter-add), which take the slots' padding (-1) as rows of zeros and add it
 * nowhere; the cross-entropy gives a padding row loss 0 and gradient 0. So where the products run
 * on the caps (r->ad_fixed) the padding changes no value the counts would give. */
#include "src/model/adaptive.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "src/base/error.h"
#include "src/model/segment.h"
#include "src/model/linear.h"

/* The tensors of cluster i in one parameter set (the parameters or their gradients). */
typedef struct {
  float *E;  /* [csize, d_emb] input embedding rows */
  float *W;  /* [csize, d_emb] output weight rows (E when tied) */
  float *Pe; /* [d, d_emb] input projection, NULL without projections */
  float *Po; /* [d, d_emb] output projection, NULL without */
} Cluster;

/* Table i (0: word_emb / out_weight) and projection i of a parameter set; out: the output side. */
static float *split_table(const TxlParams *p, int i, int out) {
  float *const t[2][TXL_MAX_CLUSTERS] = {{p->word_emb, p->emb_1, p->emb_2, p->emb_3},
                                         {p->out_weight, p->out_1, p->out_2, p->out_3}};
  return t[out][i];
}

static float *proj(const TxlParams *p, int i, int out) {
  float *const t[2][TXL_MAX_CLUSTERS] = {{p->emb_proj_0, p->emb_proj_1, p->emb_proj_2, p->emb_proj_3},
                                         {p->out_proj_0, p->out_proj_1, p->out_proj_2, p->out_proj_3}};
  return t[out][i];
}

static Cluster cluster(const TxlModel *m, const TxlParams *p, int i) {
  Cluster c;
  const TxlDims *dm = &m->spec.dims;
  const int split = txl_dims_split(dm);
  const int64_t off = split ? 0 : (int64_t)dm->cut[i] * txl_model_ld(m, dm->d_embed); /* rows of the one table */
  c.E = split ? split_table(p, i, 0) : p->word_emb + off;
  c.W = dm->tie_weight ? c.E : (split ? split_table(p, i, 1) : p->out_weight + off);
  c.Pe = c.Po = NULL;
  if (txl_dims_has_proj(dm)) {
    c.Pe = proj(p, split ? i : 0, 0);
    c.Po = i == 0 ? p->out_proj_0 : (dm->tie_projs ? c.Pe : proj(p, i, 1));
  }
  return c;
}

/* Groups tok [LB] (device) by g into rows, ids and head (NULL: not wanted), and sets n[i] to the
 * rows cluster i's products run on: its cap where fixed, else its count (read back: the CPU's
 * memory is the host's). `which`: the counts' half of r->ad_count (0 inputs, 1 targets). */
static void group(TxlModel *m, TxlRun *r, const TxlGroupSpec *g, int which, int32_t *rows, int32_t *ids,
                  int32_t *head, const int32_t *tok, int64_t LB, int *n) {
  int32_t *count = r->ad_count + which * TXL_GROUP_MAX;
  m->ops->adaptive_group(rows, ids, head, count, r->ad_dropped, tok, LB, *g);
  for (int i = 0; i < TXL_MAX_CLUSTERS; i++) n[i] = 0;
  if (r->ad_fixed) {
    for (int i = g->first; i <= g->last; i++) n[i] = g->cap[i];
    return;
  }
  int32_t c[TXL_GROUP_MAX];
  m->ops->to_host(c, count, sizeof c);
  for (int i = g->first; i <= g->last; i++) n[i] = c[i];
}

/* ---- input ------------------------------------------------------------------------------- */

void txl_adaptive_embed_forward(TxlModel *m, TxlRun *r, void *h, int64_t LB, float scale) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const int d = dm->d_model, split = txl_dims_split(dm);
  if (split) {
    group(m, r, &r->ad_in, 0, r->ad_rows, r->ad_ids, NULL, r->tokens, LB, r->ad_in_n);
  } else { /* one table: every row in order, ids the tokens themselves (no grouping) */
    for (int i = 0; i < TXL_MAX_CLUSTERS; i++) r->ad_in_n[i] = 0;
    r->ad_in_n[0] = (int)LB;
  }
  const TxlDtype act = o->act;
  const int ldd = txl_model_ld(m, d); /* h's rows; e's are ldw, as E's */
  if (split) o->zero(h, (size_t)LB * ldd * txl_dtype_size(act));
  int64_t offe = 0;
  for (int i = 0; i <= (split ? dm->n_clusters : 0); i++) {
    const int n = r->ad_in_n[i], de = txl_dims_demb(dm, i);
    if (!n) continue;
    const Cluster c = cluster(m, &m->p, i);
    const int ldw = txl_model_ld(m, de); /* E [csize, de] and Pe [d, de] */
    void *e = txl_act_at(m, r->ad_emb, offe);
    const int32_t *ids = split ? r->ad_ids + r->ad_in.base[i] : r->tokens; /* one table: i = 0, global ids */
    o->embedding_forward(e, ids, txl_model_w(m, c.E), 1.0f, n, de, ldw, ldw);
    /* one table: the rows are every row in order, so the product lands in h directly */
    void *y = split ? r->tmp : h;
    txl_linear_t_forward(m, y, ldd, 0.0f, scale, e, txl_model_w(m, c.Pe), ldw, n, de, d); /* y = s e Pe^T */
    if (split) /* h rows = y (h was 0) */
      o->embedding_backward(h, act, y, r->ad_rows + r->ad_in.base[i], 1.0f, n, d, ldd, ldd);
    offe += (int64_t)n * ldw;
  }
}

void txl_adaptive_embed_backward(TxlModel *m, TxlRun *r, const void *dh, int64_t LB, float scale) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const int d = dm->d_model, ldd = txl_model_ld(m, d), split = txl_dims_split(dm);
  (void)LB;
  int64_t offe = 0;
  for (int i = 0; i <= (split ? dm->n_clusters : 0); i++) {
    const int n = r->ad_in_n[i], de = txl_dims_demb(dm, i);
    if (!n) continue;
    const Cluster c = cluster(m, &m->p, i), g = cluster(m, &m->g, i);
    const int ldw = txl_model_ld(m, de);
    const void *dy = dh;
    const int32_t *ids = split ? r->ad_ids + r->ad_in.base[i] : r->tokens;
    if (split) { /* this cluster's rows of dh */
      o->embedding_forward(r->dtmp, r->ad_rows + r->ad_in.base[i], dh, 1.0f, n, d, ldd, ldd);
      dy = r->dtmp;
    }
    txl_linear_t_backward_w(m, g.Pe, ldw, scale, dy, ldd, txl_act_at(m, r->ad_emb, offe), n, de,
                            d); /* dP += s dy^T e */
    txl_linear_t_backward_x(m, r->ad_dhp, 0.0f, scale, dy, ldd, txl_model_w(m, c.Pe), ldw, n, de, d); /* de = s dy P */
    o->embedding_backward(g.E, TXL_F32, r->ad_dhp, ids, 1.0f, n, de, ldw, ldw);
    offe += (int64_t)n * ldw;
  }
}

/* ---- output ------------------------------------------------------------------------------ */

/* Tail cluster i's logits of n hidden rows: tail [n, csize] = (hc Po) W^T + b (hc W^T + b without
 * projections), hc [n, d]; hp [n, d_emb] receives hc Po. (Rows padded, as every activation.) */
static void tail_forward(const TxlModel *m, int i, void *tail, void *hp, const void *hc, int64_t n) {
  const TxlDims *dm = &m->spec.dims;
  const int d = dm->d_model, de = txl_dims_demb(dm, i), cs = txl_dims_csize(dm, i);
  const Cluster c = cluster(m, &m->p, i);
  const int ldw = txl_model_ld(m, de); /* Po [d, de], W [cs, de] */
  const void *x = hc;
  if (c.Po) {
    txl_linear_forward(m, hp, hc, txl_model_w(m, c.Po), n, d, de, ldw);
    x = hp;
  }
  txl_linear_t_bias_forward(m, tail, txl_model_ld(m, cs), x, txl_model_w(m, c.W), ldw,
                            txl_model_w(m, m->p.out_bias + dm->cut[i]), n, de, cs);
}

/* The head's logits: r->logits [LB, hs] = [h P_0] [W_0; cluster_weight]^T + [b_0; cluster_bias],
 * h = r->hout [LB, d] (h P_0 in r->ad_hp0). */
static void head_forward(TxlModel *m, TxlRun *r, int64_t LB) {
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p;
  const int d = dm->d_model, nc = dm->n_clusters, c1 = dm->cut[1], lds = txl_model_ld(m, txl_adaptive_head_size(dm));
  const int de0 = txl_dims_demb(dm, 0), ldw = txl_model_ld(m, de0); /* P_0, W_0, cluster_weight */
  const Cluster c0 = cluster(m, p, 0);
  const void *hp0 = r->hout;
  if (c0.Po) {
    txl_linear_forward(m, r->ad_hp0, r->hout, txl_model_w(m, c0.Po), LB, d, de0, ldw);
    hp0 = r->ad_hp0;
  }
  txl_linear_t_bias_forward(m, r->logits, lds, hp0, txl_model_w(m, c0.W), ldw, txl_model_w(m, p->out_bias), LB, de0,
                            c1);
  if (nc)
    txl_linear_t_bias_forward(m, txl_act_at(m, r->logits, c1), lds, hp0, txl_model_w(m, p->cluster_weight), ldw,
                              txl_model_w(m, p->cluster_bias), LB, de0, nc);
}

/* The targets: checked on the host (targets [LB]), grouped on the device (r->targets): the
 * head's target of each row (the token, or column hs - i for tail cluster i) in r->ad_head_tg (the
 * targets themselves without tails), the tails' rows and ids in their slots. */
static void group_targets(TxlModel *m, TxlRun *r, const int32_t *targets, int64_t LB) {
  const TxlDims *dm = &m->spec.dims;
  for (int64_t t = 0; t < LB; t++)
    if (targets[t] < 0 || targets[t] >= dm->n_token)
      txl_fatal("output layer: target %d of row %lld is outside the vocabulary [0, %d)", (int)targets[t],
                (long long)t, dm->n_token);
  for (int i = 0; i < TXL_MAX_CLUSTERS; i++) r->ad_tg_n[i] = 0;
  if (!dm->n_clusters) return;
  group(m, r, &r->ad_tg, 1, r->ad_rows + r->ad_tg_slot0, r->ad_ids + r->ad_tg_slot0, r->ad_head_tg, r->targets, LB,
        r->ad_tg_n);
  if (r->ad_fixed) return; /* a target beyond its cap: counted in r->ad_dropped (txl_run_check_dropped) */
  /* the tail buffers hold cap[i] rows of cluster i (model.c): more would overflow them */
  for (int i = 1; i <= dm->n_clusters; i++)
    if (r->ad_tg_n[i] > r->ad_tg.cap[i])
      txl_fatal("output layer: this segment (%lld targets) holds %d targets of tail cluster %d (ids %d to %d), "
                "more than the %d the run's tail buffers were sized for (the most any segment of the corpus "
                "held, counted at start)", (long long)LB, r->ad_tg_n[i], i, dm->cut[i], dm->cut[i + 1] - 1,
                r->ad_tg.cap[i]);
}

void txl_run_check_dropped(const TxlModel *m, const TxlRun *r) {
  if (!r->ad_dropped || !r->ad_fixed) return; /* the CPU stops at the segment itself (group_targets) */
  int32_t lost = 0;
  m->ops->to_host(&lost, r->ad_dropped, sizeof lost);
  if (lost) {
    char caps[160] = "";
    size_t k = 0;
    for (int i = 1; i <= m->spec.dims.n_clusters && k < sizeof caps; i++)
      k += (size_t)snprintf(caps + k, sizeof caps - k, "%s%d", i > 1 ? ", " : "", r->ad_tg.cap[i]);
    txl_fatal("internal: output layer: %d targets found no slot in the tail buffers (caps %s per segment, the "
              "most any segment of the corpus held, counted at start): their losses are missing", (int)lost, caps);
  }
}

double txl_adaptive_output_forward(TxlModel *m, TxlRun *r, const int32_t *targets, int64_t LB, float grad_scale) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const int ldd = txl_model_ld(m, dm->d_model), nc = dm->n_clusters, hs = txl_adaptive_head_size(dm);
  head_forward(m, r, LB);
  if (!targets) return 0.0;
  group_targets(m, r, targets, LB);
  o->xent_forward_backward(r->logits, r->loss, nc ? r->ad_head_tg : r->targets, grad_scale, LB, hs,
                           txl_model_ld(m, hs));
  txl_loss_add(m, r, r->loss, LB, 0); /* the head's losses, then the tails' after them */

  int64_t off = 0, offe = 0, offt = 0;
  for (int i = 1; i <= nc; i++) {
    const int n = r->ad_tg_n[i], de = txl_dims_demb(dm, i), cs = txl_dims_csize(dm, i);
    if (!n) continue;
    void *hc = txl_act_at(m, r->ad_hc, off * ldd), *tail = txl_act_at(m, r->ad_tail, offt);
    const int64_t slot = r->ad_tg_slot0 + r->ad_tg.base[i];
    o->embedding_forward(hc, r->ad_rows + slot, r->hout, 1.0f, n, dm->d_model, ldd, ldd); /* this cluster's rows */
    tail_forward(m, i, tail, txl_act_at(m, r->ad_hp, offe), hc, n);
    o->xent_forward_backward(tail, r->ad_tloss + off, r->ad_ids + slot, grad_scale, n, cs, txl_model_ld(m, cs));
    off += n;
    offe += (int64_t)n * txl_model_ld(m, de);
    offt += (int64_t)n * txl_model_ld(m, cs);
  }
  if (off) txl_loss_add(m, r, r->ad_tloss, off, 1);
  return txl_loss_result(m, r);
}

/* The head's backward from d(logits) (r->logits [LB, hs]): the biases', W_0's, cluster_weight's
 * and P_0's gradients, and r->dh [LB, d] = d(loss of the head)/d(hout). */
static void head_backward(TxlModel *m, TxlRun *r, int64_t LB) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p, *g = &m->g;
  const int d = dm->d_model, nc = dm->n_clusters, c1 = dm->cut[1], hs = txl_adaptive_head_size(dm);
  const int lds = txl_model_ld(m, hs), de0 = txl_dims_demb(dm, 0), ldw = txl_model_ld(m, de0);
  const Cluster c0 = cluster(m, p, 0), g0 = cluster(m, g, 0);
  const void *hp0 = c0.Po ? r->ad_hp0 : r->hout;
  const void *dclus = txl_act_at(m, r->logits, c1); /* [LB, nc] (rows lds apart) the cluster columns' gradient */
  o->zero(r->ad_dbias, (size_t)hs * sizeof(float));
  o->bias_backward(r->ad_dbias, r->logits, LB, hs, lds);
  o->add(g->out_bias, g->out_bias, r->ad_dbias, c1, TXL_F32);
  if (nc) o->add(g->cluster_bias, g->cluster_bias, r->ad_dbias + c1, nc, TXL_F32);
  txl_linear_t_backward_w(m, g0.W, ldw, 1.0f, r->logits, lds, hp0, LB, de0, c1);
  if (nc) txl_linear_t_backward_w(m, g->cluster_weight, ldw, 1.0f, dclus, lds, hp0, LB, de0, nc);
  void *dhp0 = c0.Po ? r->ad_dhp : r->dh;
  txl_linear_t_backward_x(m, dhp0, 0.0f, 1.0f, r->logits, lds, txl_model_w(m, c0.W), ldw, LB, de0, c1);
  if (nc)
    txl_linear_t_backward_x(m, dhp0, 1.0f, 1.0f, dclus, lds, txl_model_w(m, p->cluster_weight), ldw, LB, de0, nc);
  if (c0.Po) {
    txl_linear_backward_w(m, g0.Po, r->hout, dhp0, LB, d, de0, ldw);
    txl_linear_backward_x(m, r->dh, 0.0f, dhp0, txl_model_w(m, c0.Po), LB, d, de0, ldw);
  }
}

void txl_adaptive_output_backward(TxlModel *m, TxlRun *r, int64_t LB) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p, *g = &m->g;
  const int d = dm->d_model, ldd = txl_model_ld(m, d), nc = dm->n_clusters;
  head_backward(m, r, LB);
  /* tails: their rows of dh gain d(tail loss)/dh */
  int64_t off = 0, offe = 0, offt = 0;
  for (int i = 1; i <= nc; i++) {
    const int n = r->ad_tg_n[i], de = txl_dims_demb(dm, i), cs = txl_dims_csize(dm, i);
    if (!n) continue;
    const Cluster c = cluster(m, p, i), gc = cluster(m, g, i);
    const int ldw = txl_model_ld(m, de);
    const void *hc = txl_act_at(m, r->ad_hc, off * ldd), *hp = c.Po ? txl_act_at(m, r->ad_hp, offe) : hc;
    const void *tail = txl_act_at(m, r->ad_tail, offt);
    txl_linear_t_bias_backward_w(m, gc.W, ldw, g->out_bias + dm->cut[i], tail, hp, n, de, cs);
    void *dhp = c.Po ? r->ad_dhp : r->ad_dhc;
    txl_linear_t_backward_x(m, dhp, 0.0f, 1.0f, tail, txl_model_ld(m, cs), txl_model_w(m, c.W), ldw, n, de, cs);
    if (c.Po) {
      txl_linear_backward_w(m, gc.Po, hc, dhp, n, d, de, ldw);
      txl_linear_backward_x(m, r->ad_dhc, 0.0f, dhp, txl_model_w(m, c.Po), n, d, de, ldw);
    }
    o->embedding_backward(r->dh, o->act, r->ad_dhc, r->ad_rows + r->ad_tg_slot0 + r->ad_tg.base[i], 1.0f, n, d, ldd,
                          ldd); /* scatter-add */
    off += n;
    offe += (int64_t)n * ldw;
    offt += (int64_t)n * txl_model_ld(m, cs);
  }
}

/* log_softmax of x[0..n) in double, written to out (may alias x). */
static void log_softmax(const float *x, int n, float *out) {
  double mx = -INFINITY, s = 0.0;
  for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  for (int j = 0; j < n; j++) s += exp((double)x[j] - mx);
  const double lse = mx + log(s);
  for (int j = 0; j < n; j++) out[j] = (float)((double)x[j] - lse);
}

void txl_adaptive_logprobs(TxlModel *m, TxlRun *r, int row, float *out) {
  const TxlDims *dm = &m->spec.dims;
  const int nc = dm->n_clusters, c1 = dm->cut[1], hs = txl_adaptive_head_size(dm);
  float *head = txl_malloc((size_t)hs * sizeof(float), "head log-probabilities");
  txl_act_to_host(m, head, txl_act_at(m, r->logits, (int64_t)row * txl_model_ld(m, hs)), hs);
  log_softmax(head, hs, head);
  for (int j = 0; j < c1; j++) out[j] = head[j];
  const void *h = txl_act_at(m, r->hout, (int64_t)row * txl_model_ld(m, dm->d_model));
  for (int i = 1; i <= nc; i++) {
    const int cs = txl_dims_csize(dm, i);
    tail_forward(m, i, r->ad_tail, r->ad_hp, h, 1);
    float *ti = out + dm->cut[i];
    txl_act_to_host(m, ti, r->ad_tail, cs);
    log_softmax(ti, cs, ti);
    for (int j = 0; j < cs; j++) ti[j] += head[hs - i];
  }
  free(head);
}

void txl_model_logprobs(TxlModel *m, TxlRun *r, int row, float *out) {
  const TxlDims *dm = &m->spec.dims;
  if (row < 0 || row >= r->last_L * r->B) txl_fatal("internal: log-probabilities of row %d of %d", row, r->last_L * r->B);
  if (txl_adaptive_output(dm)) {
    txl_adaptive_logprobs(m, r, row, out);
    return;
  }
  txl_act_to_host(m, out, txl_act_at(m, r->logits, (int64_t)row * txl_model_ld(m, dm->n_token)), dm->n_token);
  log_softmax(out, dm->n_token, out);
}
