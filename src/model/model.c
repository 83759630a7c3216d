/* Transformer-XL forward and backward as lists of backend ops (see model.h and DESIGN.md).
 * Notation: L query rows, M memory rows, K = M + L, B columns on this rank, d = d_model,
 * H heads of dh, HD = H*dh, di = d_inner, V = vocabulary. Time-major [T, B, ...] throughout. */
#include "src/model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/bf16.h"
#include "src/base/error.h"
#include "src/model/adaptive.h"

/* ---- parameters -------------------------------------------------------------------------- */

void txl_model_create(TxlModel *m, const TxlOps *ops, const TxlModelSpec *spec) {
  memset(m, 0, sizeof *m);
  m->ops = ops;
  m->spec = *spec;
  txl_param_table_build(&m->table, &spec->dims);
  size_t bytes = (size_t)m->table.total * sizeof(float);
  m->param_buf = ops->alloc(bytes, "parameters");
  m->grad_buf = ops->alloc(bytes, "gradients");
  m->param_act = ops->act == TXL_F32 ? (void *)m->param_buf
                                     : ops->alloc((size_t)m->table.total * txl_dtype_size(ops->act), "weights (compute copy)");
  txl_params_bind(&m->p, m->param_buf, &spec->dims);
  txl_params_bind(&m->g, m->grad_buf, &spec->dims);
}

void txl_model_destroy(TxlModel *m) {
  if (m->param_act != m->param_buf) m->ops->free(m->param_act);
  m->ops->free(m->param_buf);
  m->ops->free(m->grad_buf);
  txl_params_unbind(&m->p);
  txl_params_unbind(&m->g);
  txl_param_table_free(&m->table);
}

void txl_model_init_params(TxlModel *m, float init_std, float proj_std, uint32_t seed) {
  float *host = txl_malloc((size_t)m->table.total * sizeof(float), "initial parameters");
  txl_params_init(host, &m->table, init_std, proj_std, seed);
  txl_model_set_params(m, host);
  free(host);
}

void txl_model_set_params(TxlModel *m, const float *host) {
  m->ops->to_device(m->param_buf, host, (size_t)m->table.total * sizeof(float));
  txl_model_params_changed(m);
}

void txl_model_params_changed(TxlModel *m) {
  if (m->param_act != m->param_buf) m->ops->to_act(m->param_act, m->param_buf, m->table.total);
}

/* Activation-type values between the device and fp32 on the host. bf16 travels as bf16 (half
 * the bytes) and is widened (exactly) on the host: in place, from the last element down, since
 * element i's 4 bytes cover bf16 elements 2i and 2i + 1, both >= i, so already read. */
void txl_act_to_host(const TxlModel *m, float *dst, const void *src, int64_t n) {
  if (m->ops->act == TXL_F32) {
    m->ops->to_host(dst, src, (size_t)n * sizeof(float));
    return;
  }
  m->ops->to_host(dst, src, (size_t)n * sizeof(txl_bf16));
  const unsigned char *raw = (const unsigned char *)dst;
  for (int64_t i = n - 1; i >= 0; i--) {
    txl_bf16 h;
    memcpy(&h, raw + (size_t)i * sizeof h, sizeof h);
    dst[i] = txl_bf16_to_float(h);
  }
}

void txl_act_to_device(const TxlModel *m, void *dst, const float *src, int64_t n) {
  if (m->ops->act == TXL_F32) {
    m->ops->to_device(dst, src, (size_t)n * sizeof(float));
    return;
  }
  txl_bf16 *tmp = txl_malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp, "bf16 staging");
  for (int64_t i = 0; i < n; i++) tmp[i] = txl_bf16_from_float(src[i]);
  m->ops->to_device(dst, tmp, (size_t)n * sizeof *tmp);
  free(tmp);
}

/* ---- run state ----------------------------------------------------------------------------- */

/* Every buffer of a run, with its size in bytes; one walk serves the size estimate and the
 * allocation, so the two cannot disagree. */
typedef struct {
  const TxlModel *m;
  const TxlRunShape *s;
  TxlRun *r;      /* NULL: only count */
  size_t bytes;
} Alloc;

/* Counts the bytes; when allocating, also records the buffer so txl_run_destroy frees exactly
 * what was taken (no second list to keep in step). */
static void *take(Alloc *a, size_t bytes, const char *what) {
  a->bytes += bytes;
  if (!a->r) return NULL;
  TxlRun *r = a->r;
  if (r->n_owned == r->cap_owned) {
    r->cap_owned = r->cap_owned ? 2 * r->cap_owned : 64;
    r->owned = realloc(r->owned, (size_t)r->cap_owned * sizeof *r->owned);
    ALLOC_CHECK(r->owned);
  }
  return r->owned[r->n_owned++] = a->m->ops->alloc(bytes, what);
}

static void walk_run(Alloc *a) {
  const TxlDims *dm = &a->m->spec.dims;
  const TxlRunShape *s = a->s;
  const size_t F = sizeof(float), A = txl_dtype_size(a->m->ops->act); /* fp32; an activation */
  const size_t L = (size_t)s->L_max, B = (size_t)s->B, K = (size_t)(s->L_max + s->mem_len);
  const size_t d = (size_t)dm->d_model, HD = (size_t)dm->n_head * dm->d_head, di = (size_t)dm->d_inner;
  const size_t V = (size_t)dm->n_token, H = (size_t)dm->n_head;
  const int pre = a->m->spec.pre_lnorm;
  TxlRun tmp;
  TxlRun *r = a->r ? a->r : &tmp;
  r->n_slots = s->training ? dm->n_layer : 1;
  r->tokens = take(a, L * B * sizeof(int32_t), "tokens");
  r->targets = take(a, L * B * sizeof(int32_t), "targets");
  r->mems = take(a, (size_t)dm->n_layer * (size_t)s->mem_len * B * d * A + F, "memory");
  r->R = take(a, K * d * A, "relative positions");
  if (a->r) r->acts = txl_calloc((size_t)r->n_slots, sizeof(TxlLayerActs), "activation slots");
  for (int l = 0; l < r->n_slots; l++) {
    TxlLayerActs dummy, *x = a->r ? &r->acts[l] : &dummy;
    x->cat = take(a, K * B * d * A, "cat");
    x->ln_cat = pre ? take(a, K * B * d * A, "ln_cat") : NULL;
    x->ln_cat_mean = pre ? take(a, K * B * F, "ln_cat mean") : NULL;
    x->ln_cat_rstd = pre ? take(a, K * B * F, "ln_cat rstd") : NULL;
    x->q = take(a, L * B * HD * A, "q");
    x->kv = take(a, K * B * 2 * HD * A, "kv");
    x->r = take(a, K * HD * A, "r");
    x->saved = take(a, a->m->ops->rel_attn_saved_floats((int)L, (int)K, (int)B, (int)H) * F, "attention (saved)");
    x->vec = take(a, L * B * HD * A, "attention vectors");
    x->res1 = take(a, L * B * d * A, "res1");
    x->h1 = take(a, L * B * d * A, "h1");
    x->ln1_mean = take(a, L * B * F, "ln1 mean");
    x->ln1_rstd = take(a, L * B * F, "ln1 rstd");
    x->ff_a = take(a, L * B * di * A, "ffn hidden");
    x->res2 = pre ? NULL : take(a, L * B * d * A, "res2");
    x->ln2_mean = take(a, L * B * F, "ln2 mean");
    x->ln2_rstd = take(a, L * B * F, "ln2 rstd");
  }
  r->hout = take(a, L * B * d * A, "output");
  const int ad_in = txl_adaptive_input(dm), ad_out = txl_adaptive_output(dm);
  r->logits = take(a, L * B * (ad_out ? (size_t)txl_adaptive_head_size(dm) : V) * A, "logits");
  if (ad_in || ad_out) {
    const size_t de = (size_t)dm->d_embed;
    size_t cmax = 1;
    for (int i = 1; i <= dm->n_clusters; i++) cmax = (size_t)txl_dims_csize(dm, i) > cmax ? (size_t)txl_dims_csize(dm, i) : cmax;
    r->ad_rows = take(a, 2 * L * B * sizeof(int32_t), "adaptive rows");
    r->ad_ids = take(a, 2 * L * B * sizeof(int32_t), "adaptive ids");
    r->ad_head_tg = take(a, L * B * sizeof(int32_t), "head targets");
    r->ad_emb = take(a, L * B * de * A, "adaptive embeddings");
    r->ad_hp0 = take(a, L * B * de * A, "head projection");
    r->ad_hc = take(a, L * B * d * A, "tail hidden rows");
    r->ad_hp = take(a, L * B * de * A, "tail projections");
    r->ad_tail = take(a, L * B * cmax * A, "tail logits");
    r->ad_tloss = take(a, L * B * F, "tail losses");
    r->ad_bias = take(a, (size_t)txl_adaptive_head_size(dm) * F, "head bias");
    if (s->training) {
      r->ad_dbias = take(a, (size_t)txl_adaptive_head_size(dm) * F, "head bias gradient");
      r->ad_dhp = take(a, L * B * de * A, "adaptive scratch");
      r->ad_dhc = take(a, L * B * d * A, "adaptive scratch");
    }
  }
  r->loss = take(a, L * B * F, "loss");
  r->ff_drop = take(a, L * B * di * A, "ffn dropout scratch");
  r->tmp = take(a, L * B * d * A, "scratch");
  r->attn_work = take(a, a->m->ops->rel_attn_workspace((int)L, (int)K, (int)B, (int)H, dm->d_head, s->training),
                      "attention workspace");
  if (!s->training) {
    r->kv_cache = take(a, (size_t)dm->n_layer * (size_t)s->mem_len * B * 2 * HD * A + F, "key/value cache");
    r->r_cache = take(a, (size_t)dm->n_layer * K * HD * A, "R W_r cache");
  }
  if (s->training) {
    r->dh = take(a, L * B * d * A, "dh");
    r->dres = take(a, L * B * d * A, "dres");
    r->dtmp = take(a, L * B * d * A, "dtmp");
    r->dff = take(a, L * B * di * A, "dff");
    r->dq = take(a, L * B * HD * A, "dq");
    r->dkv = take(a, K * B * 2 * HD * A, "dkv");
    r->dr = take(a, K * HD * A, "dr");
    r->dvec = take(a, L * B * HD * A, "dvec");
    r->dmem = pre ? take(a, (size_t)s->mem_len * B * d * A + F, "dmem") : NULL;
  }
}

size_t txl_run_bytes(const TxlModel *m, const TxlRunShape *shape) {
  Alloc a = {m, shape, NULL, 0};
  walk_run(&a);
  return a.bytes;
}

void txl_run_create(TxlRun *r, const TxlModel *m, const TxlRunShape *shape) {
  memset(r, 0, sizeof *r);
  r->L_max = shape->L_max;
  r->B = shape->B;
  r->col0 = shape->col0;
  r->mem_len = shape->mem_len;
  r->clamp_len = shape->clamp_len;
  r->same_length = shape->same_length;
  r->training = shape->training;
  r->R_rows = -1;
  Alloc a = {m, shape, r, 0};
  walk_run(&a);
  r->loss_host = txl_malloc((size_t)shape->L_max * shape->B * sizeof(float), "loss (host)");
  if (r->ad_rows) r->ad_host = txl_malloc(5 * (size_t)shape->L_max * shape->B * sizeof(int32_t), "adaptive grouping");
}

void txl_run_destroy(TxlRun *r, const TxlModel *m) {
  for (int i = 0; i < r->n_owned; i++) m->ops->free(r->owned[i]);
  free(r->owned);
  free(r->acts);
  free(r->loss_host);
  free(r->ad_host);
  memset(r, 0, sizeof *r);
}

void txl_run_reset_memory(TxlRun *r) {
  r->mem_rows = 0;
  r->kv_valid = 0;
}

/* ---- helpers ------------------------------------------------------------------------------- */

static TxlDropout drop_at(const TxlModel *m, const TxlRun *r, uint32_t site, float p) {
  TxlDropout d = {r->last_dropout_on ? p : 0.0f, m->spec.seed, site, (uint32_t)r->last_step};
  return d;
}

static TxlLayerActs *slot(TxlRun *r, int l) { return &r->acts[l % r->n_slots]; }

static const float *bias_u(const TxlModel *m, int l) {
  return m->p.layers[l].r_w_bias ? m->p.layers[l].r_w_bias : m->p.r_w_bias;
}
static const float *bias_vb(const TxlModel *m, int l) {
  return m->p.layers[l].r_r_bias ? m->p.layers[l].r_r_bias : m->p.r_r_bias;
}

static TxlAttnShape attn_shape(const TxlModel *m, const TxlRun *r, int L, int M) {
  const TxlDims *dm = &m->spec.dims;
  const int K = M + L;
  TxlAttnShape s;
  s.L = L;
  s.M = M;
  s.B = r->B;
  s.H = dm->n_head;
  s.dh = dm->d_head;
  s.col0 = r->col0;
  s.same_length = r->same_length;
  /* the original's tril(ones, -s): s = L - (K - mem_len) when K > mem_len, else L */
  s.same_shift = K > r->mem_len ? L - (K - r->mem_len) : L;
  s.scale = (float)(1.0 / sqrt((double)dm->d_head));
  return s;
}

/* ---- forward ------------------------------------------------------------------------------- */

double txl_model_forward(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets,
                         int L, int step, int dropout_on, float grad_scale) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p;
  if (L < 1 || L > r->L_max) txl_fatal("internal: segment of %d rows, capacity %d", L, r->L_max);
  const int B = r->B, d = dm->d_model, HD = dm->n_head * dm->d_head, di = dm->d_inner, V = dm->n_token;
  const int M = r->mem_rows, K = M + L;
  const int64_t LB = (int64_t)L * B, KB = (int64_t)K * B;
  const size_t AS = txl_dtype_size(o->act); /* bytes of an activation */
  const TxlDtype act = o->act;
  const float pd = m->spec.dropout;
  r->last_L = L;
  r->last_M = M;
  r->last_step = step;
  r->last_dropout_on = dropout_on;

  o->to_device(r->tokens, tokens, (size_t)LB * sizeof(int32_t));
  if (targets) o->to_device(r->targets, targets, (size_t)LB * sizeof(int32_t));

  /* word embedding * sqrt(d), dropout: layer 0's input, written after its memory rows */
  void *h = txl_act_at(m, slot(r, 0)->cat, (int64_t)M * B * d); /* [L, B, d] */
  if (txl_adaptive_input(dm))
    txl_adaptive_embed_forward(m, r, tokens, h, LB, sqrtf((float)d));
  else
    o->embedding_forward(h, r->tokens, txl_model_w(m, p->word_emb), sqrtf((float)d), LB, d);
  o->dropout(h, L, B, d, r->col0, drop_at(m, r, TXL_SITE_EMBED, pd));
  /* relative positions K-1 .. 0, dropout (one mask for every column); the same K without dropout
   * gives the same R, kept (generation: every token) */
  const TxlDropout dpos = drop_at(m, r, TXL_SITE_POS, pd);
  const int R_kept = dpos.p == 0.0f && r->R_rows == K; /* R (and in inference runs R W_r) as last time */
  if (!R_kept) {
    o->posemb_forward(r->R, K, d, r->clamp_len);
    o->dropout(r->R, K, 1, d, 0, dpos);
    r->R_rows = dpos.p > 0.0f ? -1 : K; /* a dropped R is not reused */
  }

  const TxlAttnShape as = attn_shape(m, r, L, M);
  const int Mnew = K < r->mem_len ? K : r->mem_len;
  /* Inference runs keep each layer's keys and values of the memory rows and R W_r: those rows'
   * keys and values were computed when they were new, from the same parameters. */
  const int cached_kv = r->kv_cache && r->kv_valid && !dropout_on;
  for (int l = 0; l < dm->n_layer; l++) {
    const TxlLayerParams *lp = &p->layers[l];
    TxlLayerActs *a = slot(r, l);
    void *mem = txl_act_at(m, r->mems, (int64_t)l * r->mem_len * B * d); /* [mem_len, B, d] */
    h = txl_act_at(m, a->cat, (int64_t)M * B * d);
    /* cat = [memory; h]; the new memory is the last mem_len rows of cat (no gradient) */
    if (M) o->copy(a->cat, mem, (size_t)M * B * d * AS);
    if (Mnew) o->copy(mem, txl_act_at(m, a->cat, (int64_t)(K - Mnew) * B * d), (size_t)Mnew * B * d * AS);
    const void *in = a->cat; /* [K, B, d] what q, k, v are computed from */
    if (m->spec.pre_lnorm) {
      o->layernorm_forward(a->ln_cat, a->ln_cat_mean, a->ln_cat_rstd, a->cat, lp->ln1_w, lp->ln1_b, KB, d, 1e-5f);
      in = a->ln_cat;
    }
    /* q = in[M:] W_q; [k v] = in W_kv; r = R W_r */
    const void *in_new = txl_act_at(m, in, (int64_t)M * B * d); /* [L, B, d] the current rows */
    const void *w_q = txl_model_w(m, lp->w_qkv), *w_kv = txl_model_w(m, lp->w_qkv + HD);
    o->gemm(0, 0, (int)LB, HD, d, 1.0f, in_new, d, w_q, 3 * HD, 0.0f, a->q, HD, act);
    const int64_t kv_row = (int64_t)B * 2 * HD;
    void *kv_cache = r->kv_cache ? txl_act_at(m, r->kv_cache, (int64_t)l * r->mem_len * kv_row) : NULL;
    if (cached_kv) { /* the memory rows' from the cache, the new rows' computed */
      if (M) o->copy(a->kv, kv_cache, (size_t)(M * kv_row) * AS);
      o->gemm(0, 0, (int)LB, 2 * HD, d, 1.0f, in_new, d, w_kv, 3 * HD, 0.0f, txl_act_at(m, a->kv, M * kv_row), 2 * HD,
              act);
    } else {
      o->gemm(0, 0, (int)KB, 2 * HD, d, 1.0f, in, d, w_kv, 3 * HD, 0.0f, a->kv, 2 * HD, act);
    }
    if (kv_cache && Mnew) o->copy(kv_cache, txl_act_at(m, a->kv, (K - Mnew) * kv_row), (size_t)(Mnew * kv_row) * AS);
    void *rl = a->r;
    if (r->r_cache) { /* R W_r of this layer, kept while K stays */
      rl = txl_act_at(m, r->r_cache, (int64_t)l * (r->L_max + r->mem_len) * HD);
      if (!R_kept) o->gemm(0, 0, K, HD, d, 1.0f, r->R, d, txl_model_w(m, lp->w_r), HD, 0.0f, rl, HD, act);
    } else {
      o->gemm(0, 0, K, HD, d, 1.0f, r->R, d, txl_model_w(m, lp->w_r), HD, 0.0f, a->r, HD, act);
    }
    o->rel_attn_forward(a->vec, a->saved, a->q, a->kv, rl, bias_u(m, l), bias_vb(m, l), as,
                        drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_PROB), m->spec.dropatt), r->attn_work);
    /* attention output W_o, dropout, residual */
    o->gemm(0, 0, (int)LB, d, HD, 1.0f, a->vec, HD, txl_model_w(m, lp->w_o), d, 0.0f, r->tmp, d, act);
    o->dropout(r->tmp, L, B, d, r->col0, drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_OUT), pd));
    /* res1 = h + that; h1 = LayerNorm(res1) (post-norm: LayerNorm 1; pre-norm: LayerNorm 2, the FFN's) */
    if (m->spec.pre_lnorm)
      o->add_layernorm_forward(a->res1, a->h1, a->ln2_mean, a->ln2_rstd, h, r->tmp, lp->ln2_w, lp->ln2_b, LB, d,
                               1e-5f);
    else
      o->add_layernorm_forward(a->res1, a->h1, a->ln1_mean, a->ln1_rstd, h, r->tmp, lp->ln1_w, lp->ln1_b, LB, d,
                               1e-5f);
    const void *ffn_in = a->h1; /* [L, B, d] */
    /* FFN: ReLU(x W1 + b1), dropout, W2 + b2, dropout */
    const TxlDropout dhid = drop_at(m, r, txl_layer_site(l, TXL_LSITE_FF_HIDDEN), pd);
    o->gemm(0, 0, (int)LB, di, d, 1.0f, ffn_in, d, txl_model_w(m, lp->w_ff1), di, 0.0f, a->ff_a, di, act);
    o->bias_relu_dropout_forward(a->ff_a, r->ff_drop, lp->b_ff1, L, B, di, r->col0, dhid);
    const void *ffd = dhid.p > 0.0f ? r->ff_drop : a->ff_a;
    o->bias_fill(r->tmp, lp->b_ff2, LB, d);
    o->gemm(0, 0, (int)LB, d, di, 1.0f, ffd, di, txl_model_w(m, lp->w_ff2), d, 1.0f, r->tmp, d, act);
    o->dropout(r->tmp, L, B, d, r->col0, drop_at(m, r, txl_layer_site(l, TXL_LSITE_FF_OUT), pd));
    /* the layer's output is the next layer's input (after its memory rows) */
    void *out = l + 1 < dm->n_layer ? txl_act_at(m, slot(r, l + 1)->cat, (int64_t)M * B * d) : r->hout;
    if (m->spec.pre_lnorm) {
      o->add(out, a->res1, r->tmp, LB * d, act);
    } else {
      o->add_layernorm_forward(a->res2, out, a->ln2_mean, a->ln2_rstd, a->h1, r->tmp, lp->ln2_w, lp->ln2_b, LB, d,
                               1e-5f);
    }
  }
  r->mem_rows = Mnew;
  if (r->kv_cache) r->kv_valid = !dropout_on; /* holds exactly the new memory rows' keys and values */

  /* output: dropout, logits = h E^T + b, cross-entropy */
  o->dropout(r->hout, L, B, d, r->col0, drop_at(m, r, TXL_SITE_OUTPUT, pd));
  if (txl_adaptive_output(dm)) return txl_adaptive_output_forward(m, r, targets, LB, grad_scale);
  const float *w_out = p->out_weight ? p->out_weight : p->word_emb; /* [V, d] */
  o->bias_fill(r->logits, p->out_bias, LB, V);
  o->gemm(0, 1, (int)LB, V, d, 1.0f, r->hout, d, txl_model_w(m, w_out), d, 1.0f, r->logits, V, act);
  if (!targets) return 0.0;
  o->xent_forward_backward(r->logits, r->loss, r->targets, grad_scale, LB, V);
  o->to_host(r->loss_host, r->loss, (size_t)LB * sizeof(float));
  double sum = 0.0;
  for (int64_t t = 0; t < LB; t++) sum += r->loss_host[t];
  return sum;
}

/* ---- backward ------------------------------------------------------------------------------ */

/* FFN backward: dout [L,B,d] is d(FFN output) after its dropout's backward; x the FFN input.
 * Adds d(x) into dx (residual stream). */
static void ffn_backward(TxlModel *m, TxlRun *r, int l, void *dx, void *dout, const void *x) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlLayerParams *lp = &m->p.layers[l];
  const TxlLayerParams *gp = &m->g.layers[l];
  TxlLayerActs *a = slot(r, l);
  const int d = dm->d_model, di = dm->d_inner, L = r->last_L, B = r->B;
  const int64_t LB = (int64_t)L * B;
  const float pd = m->spec.dropout;
  TxlDropout dhid = drop_at(m, r, txl_layer_site(l, TXL_LSITE_FF_HIDDEN), pd);
  o->bias_backward(gp->b_ff2, dout, LB, d);
  const TxlDtype act = o->act;
  const void *ffd = a->ff_a;
  if (dhid.p > 0.0f) { /* recompute the dropped hidden layer from its mask */
    o->copy(r->ff_drop, a->ff_a, (size_t)LB * di * txl_dtype_size(act));
    o->dropout(r->ff_drop, L, B, di, r->col0, dhid);
    ffd = r->ff_drop;
  }
  o->gemm(1, 0, di, d, (int)LB, 1.0f, ffd, di, dout, d, 1.0f, gp->w_ff2, d, TXL_F32);
  o->gemm(0, 1, (int)LB, di, d, 1.0f, dout, d, txl_model_w(m, lp->w_ff2), d, 0.0f, r->dff, di, act);
  o->relu_dropout_backward(r->dff, a->ff_a, L, B, di, r->col0, dhid);
  o->bias_backward(gp->b_ff1, r->dff, LB, di);
  o->gemm(1, 0, d, di, (int)LB, 1.0f, x, d, r->dff, di, 1.0f, gp->w_ff1, di, TXL_F32);
  o->gemm(0, 1, (int)LB, d, di, 1.0f, r->dff, di, txl_model_w(m, lp->w_ff1), di, 1.0f, dx, d, act);
}

/* Attention backward: datt [L,B,d] is d(attention output) after its dropout's backward;
 * in [K,B,d] what q, k, v were computed from. Adds d(in[M:]) into dx; when dmem is not NULL
 * writes d(in[:M]) there ([M,B,d], needed for the parameters of a pre-norm LayerNorm: the
 * memory itself takes no gradient). */
static void attn_backward(TxlModel *m, TxlRun *r, int l, void *dx, void *dmem, void *datt, const void *in) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlLayerParams *lp = &m->p.layers[l];
  const TxlLayerParams *gp = &m->g.layers[l];
  TxlLayerActs *a = slot(r, l);
  const int d = dm->d_model, HD = dm->n_head * dm->d_head, L = r->last_L, M = r->last_M, B = r->B;
  const int K = M + L;
  const int64_t LB = (int64_t)L * B, KB = (int64_t)K * B;
  float *gu = gp->r_w_bias ? gp->r_w_bias : m->g.r_w_bias;
  float *gvb = gp->r_r_bias ? gp->r_r_bias : m->g.r_r_bias;
  const TxlDtype act = o->act;
  const void *w_q = txl_model_w(m, lp->w_qkv), *w_kv = txl_model_w(m, lp->w_qkv + HD);
  o->gemm(1, 0, HD, d, (int)LB, 1.0f, a->vec, HD, datt, d, 1.0f, gp->w_o, d, TXL_F32);
  o->gemm(0, 1, (int)LB, HD, d, 1.0f, datt, d, txl_model_w(m, lp->w_o), d, 0.0f, r->dvec, HD, act);
  o->rel_attn_backward(r->dq, r->dkv, r->dr, gu, gvb, r->dvec, a->vec, a->q, a->kv, a->r, bias_u(m, l),
                       bias_vb(m, l), a->saved, attn_shape(m, r, L, M),
                       drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_PROB), m->spec.dropatt), r->attn_work);
  o->gemm(1, 0, d, HD, K, 1.0f, r->R, d, r->dr, HD, 1.0f, gp->w_r, HD, TXL_F32);
  o->gemm(1, 0, d, HD, (int)LB, 1.0f, txl_act_at(m, in, (int64_t)M * B * d), d, r->dq, HD, 1.0f, gp->w_qkv, 3 * HD,
          TXL_F32);
  o->gemm(1, 0, d, 2 * HD, (int)KB, 1.0f, in, d, r->dkv, 2 * HD, 1.0f, gp->w_qkv + HD, 3 * HD, TXL_F32);
  o->gemm(0, 1, (int)LB, d, HD, 1.0f, r->dq, HD, w_q, 3 * HD, 1.0f, dx, d, act);
  o->gemm(0, 1, (int)LB, d, 2 * HD, 1.0f, txl_act_at(m, r->dkv, (int64_t)M * B * 2 * HD), 2 * HD, w_kv, 3 * HD, 1.0f,
          dx, d, act);
  if (dmem && M) o->gemm(0, 1, M * B, d, 2 * HD, 1.0f, r->dkv, 2 * HD, w_kv, 3 * HD, 0.0f, dmem, d, act);
}

void txl_model_backward(TxlModel *m, TxlRun *r, TxlGradReady ready, void *ctx) {
  const TxlOps *o = m->ops;
  const TxlDims *dm = &m->spec.dims;
  const TxlParams *p = &m->p;
  const TxlParams *g = &m->g;
  if (!r->training) txl_fatal("internal: backward on a forward-only run state");
  const int B = r->B, d = dm->d_model, V = dm->n_token, L = r->last_L, M = r->last_M;
  const int64_t LB = (int64_t)L * B;
  const size_t act_bytes = (size_t)LB * d * txl_dtype_size(o->act); /* one [L, B, d] activation */
  const float pd = m->spec.dropout;

  /* output layer: logits holds d(loss)/d(logits) */
  if (txl_adaptive_output(dm)) {
    txl_adaptive_output_backward(m, r, LB);
  } else {
    const float *w_out = p->out_weight ? p->out_weight : p->word_emb;
    float *gw_out = g->out_weight ? g->out_weight : g->word_emb;
    o->bias_backward(g->out_bias, r->logits, LB, V);
    o->gemm(1, 0, V, d, (int)LB, 1.0f, r->logits, V, r->hout, d, 1.0f, gw_out, d, TXL_F32);
    o->gemm(0, 0, (int)LB, d, V, 1.0f, r->logits, V, txl_model_w(m, w_out), d, 0.0f, r->dh, d, o->act);
  }
  o->dropout(r->dh, L, B, d, r->col0, drop_at(m, r, TXL_SITE_OUTPUT, pd));

  /* layers in reverse; r->dh holds d(layer output) on entry, d(layer input) on exit */
  for (int l = dm->n_layer - 1; l >= 0; l--) {
    const TxlLayerParams *lp = &p->layers[l];
    const TxlLayerParams *gp = &g->layers[l];
    TxlLayerActs *a = slot(r, l);
    TxlDropout d_ff_out = drop_at(m, r, txl_layer_site(l, TXL_LSITE_FF_OUT), pd);
    TxlDropout d_attn_out = drop_at(m, r, txl_layer_site(l, TXL_LSITE_ATTN_OUT), pd);
    if (!m->spec.pre_lnorm) {
      /* out = LN2(res2), res2 = h1 + drop(ffn(h1)) */
      o->layernorm_backward_dropout(r->dres, r->dtmp, gp->ln2_w, gp->ln2_b, r->dh, a->res2, lp->ln2_w,
                                    a->ln2_mean, a->ln2_rstd, L, B, d, r->col0, d_ff_out);
      ffn_backward(m, r, l, r->dres, r->dtmp, a->h1); /* dres = d h1 */
      /* h1 = LN1(res1), res1 = h + drop(attn(h)) */
      o->layernorm_backward_dropout(r->dh, r->dtmp, gp->ln1_w, gp->ln1_b, r->dres, a->res1, lp->ln1_w,
                                    a->ln1_mean, a->ln1_rstd, L, B, d, r->col0, d_attn_out);
      attn_backward(m, r, l, r->dh, NULL, r->dtmp, a->cat);
    } else {
      /* out = out1 + drop(ffn(LN2(out1))) */
      o->copy(r->dtmp, r->dh, act_bytes);
      o->dropout(r->dtmp, L, B, d, r->col0, d_ff_out);
      o->zero(r->dres, act_bytes);
      ffn_backward(m, r, l, r->dres, r->dtmp, a->h1); /* dres = d LN2(out1) */
      o->layernorm_backward(r->dh, gp->ln2_w, gp->ln2_b, r->dres, a->res1, lp->ln2_w, a->ln2_mean, a->ln2_rstd,
                            LB, d);
      /* out1 = h + drop(attn(LN1([mem; h]))) */
      o->copy(r->dtmp, r->dh, act_bytes);
      o->dropout(r->dtmp, L, B, d, r->col0, d_attn_out);
      o->zero(r->dres, act_bytes);
      attn_backward(m, r, l, r->dres, r->dmem, r->dtmp, a->ln_cat); /* d LN1(cat): dmem rows, then dres */
      if (M) /* the memory rows: LayerNorm parameters only, the memory takes no gradient */
        o->layernorm_backward(NULL, gp->ln1_w, gp->ln1_b, r->dmem, a->cat, lp->ln1_w, a->ln_cat_mean,
                              a->ln_cat_rstd, (int64_t)M * B, d);
      o->layernorm_backward(r->dh, gp->ln1_w, gp->ln1_b, r->dres, txl_act_at(m, a->cat, (int64_t)M * B * d), lp->ln1_w,
                            a->ln_cat_mean + (size_t)M * B, a->ln_cat_rstd + (size_t)M * B, LB, d);
    }
    if (ready) {
      const TxlParamTable *t = &m->table;
      ready(ctx, t->layer_begin + (int64_t)l * t->layer_size, t->layer_begin + (int64_t)(l + 1) * t->layer_size);
    }
  }

  /* embedding: h0 = drop(E[x] * sqrt(d)) */
  o->dropout(r->dh, L, B, d, r->col0, drop_at(m, r, TXL_SITE_EMBED, pd));
  if (txl_adaptive_input(dm))
    txl_adaptive_embed_backward(m, r, r->dh, LB, sqrtf((float)d));
  else
    o->embedding_backward(g->word_emb, TXL_F32, r->dh, r->tokens, sqrtf((float)d), LB, d);
  if (ready) { /* the tensors outside the layers: the tail (output bias, ...), then the head */
    ready(ctx, m->table.layer_end, m->table.total);
    ready(ctx, 0, m->table.layer_begin);
  }
}

/* ---- cost ---------------------------------------------------------------------------------- */

double txl_model_flops_per_token(const TxlModel *m, int L, int mem_len) {
  /* The estimate of the reference notes: forward = 2 x non-embedding parameters
   * + 2 d V (output layer) + per layer 3 x 2 x K x H x dh (AC, BD, P v) + 2 K d H dh / L (R W_r);
   * backward about twice the forward. */
  const TxlDims *dm = &m->spec.dims;
  const double d = dm->d_model, HD = (double)dm->n_head * dm->d_head, V = dm->n_token;
  const double K = (double)L + mem_len;
  double out = 2.0 * d * V; /* the output layer */
  if (txl_adaptive_output(dm) || txl_adaptive_input(dm)) {
    /* adaptive: the input projection, the head, and each tail weighted by its share of the
     * vocabulary (uniform tokens, as --bench draws them; real text reaches the tails less) */
    const int proj = txl_dims_has_proj(dm);
    const double de0 = txl_dims_demb(dm, 0);
    out = 2.0 * (proj ? d * de0 : 0.0) + 2.0 * de0 * txl_adaptive_head_size(dm);
    double in = proj ? 2.0 * d * de0 : 0.0;
    for (int i = 1; i <= dm->n_clusters; i++) {
      const double share = (double)txl_dims_csize(dm, i) / V, de = txl_dims_demb(dm, i);
      out += share * (2.0 * (proj ? d * de : 0.0) + 2.0 * de * txl_dims_csize(dm, i));
      if (txl_dims_split(dm)) in += share * 2.0 * d * (de - de0);
    }
    out += in;
  }
  double fwd = 2.0 * (double)txl_param_count_non_embedding(&m->table) + out +
               dm->n_layer * (6.0 * K * HD + 2.0 * K * d * HD / L);
  return 3.0 * fwd;
}
