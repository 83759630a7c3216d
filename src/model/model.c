/* Transformer-XL: parameters and run state (see model.h and DESIGN.md); the forward and backward
 * passes are forward.c's. Notation: L query rows, M memory rows,
 * K = M + L, B columns on this rank, d = d_model, H heads of dh, HD = H*dh, di = d_inner,
 * V = vocabulary. Time-major [T, B, ...] throughout. */
#include "src/model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "src/base/error.h"
#include "src/model/adaptive_dims.h"

/* ---- parameters -------------------------------------------------------------------------- */

void txl_model_create(TxlModel *m, const TxlOps *ops, const TxlModelSpec *spec) {
  memset(m, 0, sizeof *m);
  if (!(spec->ln_eps > 0.0f)) txl_fatal("internal: LayerNorm epsilon %g", (double)spec->ln_eps);
  m->ops = ops;
  m->spec = *spec;
  txl_param_table_build(&m->table, &spec->dims, txl_model_row_align(ops, spec));
  size_t bytes = (size_t)m->table.total * sizeof(float);
  m->param_buf = ops->alloc(bytes, "parameters");
  m->grad_buf = ops->alloc(bytes, "gradients");
  m->param_act = ops->act == TXL_F32 ? (void *)m->param_buf
                                     : ops->alloc((size_t)m->table.total * txl_dtype_size(ops->act), "weights (compute copy)");
  txl_params_bind(&m->p, m->param_buf, &m->table);
  txl_params_bind(&m->g, m->grad_buf, &m->table);
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

/* Activation-type values between the device and fp32 on the host. bf16 and fp16 travel as they
 * are (half the bytes) and are widened (exactly) on the host: in place, from the last element
 * down, since element i's 4 bytes cover 16-bit elements 2i and 2i + 1, both >= i, so already
 * read. */
void txl_act_to_host(const TxlModel *m, float *dst, const void *src, int64_t n) {
  if (m->ops->act == TXL_F32) {
    m->ops->to_host(dst, src, (size_t)n * sizeof(float));
    return;
  }
  m->ops->to_host(dst, src, (size_t)n * sizeof(uint16_t));
  const unsigned char *raw = (const unsigned char *)dst;
  const int fp16 = m->ops->act == TXL_F16;
  for (int64_t i = n - 1; i >= 0; i--) {
    uint16_t h;
    memcpy(&h, raw + (size_t)i * sizeof h, sizeof h);
    dst[i] = fp16 ? txl_fp16_to_float(txl_fp16_from_bits(h)) : txl_bf16_to_float(h);
  }
}

void txl_act_to_device(const TxlModel *m, void *dst, const float *src, int64_t n) {
  if (m->ops->act == TXL_F32) {
    m->ops->to_device(dst, src, (size_t)n * sizeof(float));
    return;
  }
  uint16_t *tmp = txl_malloc((size_t)(n > 0 ? n : 1) * sizeof *tmp, "bf16 / fp16 staging");
  const int fp16 = m->ops->act == TXL_F16;
  for (int64_t i = 0; i < n; i++) tmp[i] = fp16 ? txl_fp16_from_float(src[i]).bits : txl_bf16_from_float(src[i]);
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
  int cols;       /* columns every activation buffer holds: one column group's (txl_run_groups) */
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

/* One layer's activation slot x. */
static void walk_layer(Alloc *a, TxlLayerActs *x) {
  const TxlDims *dm = &a->m->spec.dims;
  const TxlRunShape *s = a->s;
  const size_t F = sizeof(float), A = txl_dtype_size(a->m->ops->act); /* fp32; an activation */
  const size_t L = (size_t)s->L_max, B = (size_t)a->cols, K = (size_t)(s->L_max + s->mem_len);
  const TxlModel *m = a->m; /* every activation in padded rows: d, HD, 2 HD, di features */
  const size_t HD0 = (size_t)dm->n_head * dm->d_head;
  const size_t d = (size_t)txl_model_ld(m, dm->d_model), HD = (size_t)txl_model_ld(m, (int64_t)HD0);
  const size_t HD2 = (size_t)txl_model_ld(m, 2 * (int64_t)HD0), di = (size_t)txl_model_ld(m, dm->d_inner);
  const size_t H = (size_t)dm->n_head;
  const int pre = a->m->spec.pre_lnorm;
  x->cat = take(a, K * B * d * A, "cat");
  x->ln_cat = pre ? take(a, K * B * d * A, "ln_cat") : NULL;
  x->ln_cat_mean = pre ? take(a, K * B * F, "ln_cat mean") : NULL;
  x->ln_cat_rstd = pre ? take(a, K * B * F, "ln_cat rstd") : NULL;
  x->q = take(a, L * B * HD * A, "q");
  x->kv = take(a, K * B * HD2 * A, "kv");
  x->r = txl_attn_relative(a->m->spec.dims.attn_type) ? take(a, K * HD * A, "r") : NULL;
  x->rb = txl_attn_key_bias(a->m->spec.dims.attn_type) ? take(a, K * H * F, "r_bias rows") : NULL;
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

/* The most targets of tail cluster i (1 .. n_clusters) one segment of a run of shape s, cols
 * columns at once, may hold: the measured bound, and never more than the segment's targets. */
static void tail_caps(const TxlDims *dm, const TxlRunShape *s, int cols, int *cap) {
  const int64_t LB = (int64_t)s->L_max * cols;
  for (int i = 0; i < TXL_MAX_CLUSTERS; i++) cap[i] = 0;
  for (int i = 1; i <= dm->n_clusters; i++) {
    const int64_t n = s->tail.known ? s->tail.n[i] : LB;
    cap[i] = (int)(n < 0 ? 0 : n < LB ? n : LB);
  }
}

/* The groupings of a run (TxlRun: ad_in, ad_tg; the op adaptive_group): slots of each cluster
 * after the previous one's. The targets' tail clusters: their measured caps. The inputs' clusters
 * (split tables only; else the inputs need no grouping): the head may take every row; a tail
 * cluster, where products run on the caps (fixed), its targets' cap plus one row per column when
 * the counted split is the run's input too (TxlTailCap.inputs), else every row; on the CPU every
 * row (only the slots: its products run on the counts). */
static void group_specs(const TxlModel *m, const TxlRunShape *s, int cols, int fixed, TxlGroupSpec *in,
                        TxlGroupSpec *tg) {
  const TxlDims *dm = &m->spec.dims;
  const int nc = dm->n_clusters;
  const int64_t LB = (int64_t)s->L_max * cols;
  int cap[TXL_MAX_CLUSTERS];
  tail_caps(dm, s, cols, cap);
  memset(in, 0, sizeof *in);
  memset(tg, 0, sizeof *tg);
  for (int i = 0; i <= nc + 1; i++) in->cut[i] = tg->cut[i] = dm->cut[i];
  if (txl_adaptive_input(dm) && txl_dims_split(dm)) {
    in->last = nc;
    for (int i = 0; i <= nc; i++) {
      const int64_t n = i > 0 && fixed && s->tail.known && s->tail.inputs ? (int64_t)cap[i] + cols : LB;
      in->cap[i] = (int32_t)(n < LB ? n : LB);
      in->base[i] = i ? in->base[i - 1] + in->cap[i - 1] : 0;
    }
  }
  tg->first = 1;
  tg->last = nc;
  tg->head_size = txl_adaptive_head_size(dm);
  for (int i = 1; i <= nc; i++) {
    tg->cap[i] = cap[i];
    tg->base[i] = i > 1 ? tg->base[i - 1] + tg->cap[i - 1] : 0;
  }
}

/* Slots of a grouping: the last cluster's end (0 for none). */
static int64_t group_slots(const TxlGroupSpec *g) {
  int64_t end = 0;
  for (int i = g->first; i <= g->last; i++) end = g->base[i] + g->cap[i] > end ? g->base[i] + g->cap[i] : end;
  return end;
}

/* sum_i cap_i ld(width(i)) over the clusters of g: the elements of an activation holding cluster
 * after cluster at their caps (fixed products). */
static int64_t caps_times(const TxlModel *m, const TxlGroupSpec *g, int (*width)(const TxlDims *, int)) {
  int64_t e = 0;
  for (int i = g->first; i <= g->last; i++) e += (int64_t)g->cap[i] * txl_model_ld(m, width(&m->spec.dims, i));
  return e;
}

static int width_d(const TxlDims *dm, int i) { return (void)i, dm->d_model; }

/* Elements of the tail logits buffer: adaptive.c lays the clusters' logits one after the other,
 * n_i rows of ld(size of cluster i) elements. Fixed products: n_i = cap_i, every cluster at its
 * cap. Else n_i <= cap[i] and sum n_i <= L_max cols (a target falls in one cluster): the largest
 * such sum gives the most rows to the widest clusters first (every row counts 1 against the rows
 * of the segment: a greedy fill is optimal); with no bound (every cap the whole segment) that is
 * the whole segment in the widest cluster. At least one row of the widest: txl_adaptive_logprobs
 * writes one row of each cluster in turn there. */
static int64_t tail_elems(const TxlModel *m, const TxlRunShape *s, int cols) {
  const TxlDims *dm = &m->spec.dims;
  int cap[TXL_MAX_CLUSTERS], used[TXL_MAX_CLUSTERS] = {0};
  int64_t ld[TXL_MAX_CLUSTERS] = {0}, widest = 0;
  tail_caps(dm, s, cols, cap);
  for (int i = 1; i <= dm->n_clusters; i++) {
    ld[i] = txl_model_ld(m, txl_dims_csize(dm, i));
    widest = ld[i] > widest ? ld[i] : widest;
  }
  int64_t elems = 0;
  if (!m->ops->host_memory) {
    TxlGroupSpec in, tg;
    group_specs(m, s, cols, 1, &in, &tg);
    elems = caps_times(m, &tg, txl_dims_csize);
  } else {
    int64_t rows = (int64_t)s->L_max * cols;
    for (int pass = 1; pass <= dm->n_clusters; pass++) {
      int best = 0;
      for (int i = 1; i <= dm->n_clusters; i++)
        if (!used[i] && (!best || ld[i] > ld[best])) best = i;
      used[best] = 1;
      const int64_t n = cap[best] < rows ? cap[best] : rows;
      elems += n * ld[best];
      rows -= n;
    }
  }
  return elems > widest ? elems : widest > 0 ? widest : 1;
}

/* The adaptive input's and softmax's buffers of run r. Fixed products (a GPU's) hold every
 * cluster at its cap; the CPU's at most one segment's rows in all. */
static void walk_adaptive(Alloc *a, TxlRun *r) {
  const TxlDims *dm = &a->m->spec.dims;
  const TxlRunShape *s = a->s;
  const size_t F = sizeof(float), A = txl_dtype_size(a->m->ops->act);
  const TxlModel *m = a->m; /* rows padded: d, d_embed (the widest cluster's) and cluster sizes */
  const size_t L = (size_t)s->L_max, B = (size_t)a->cols, d = (size_t)txl_model_ld(m, dm->d_model);
  const size_t de = (size_t)txl_model_ld(m, dm->d_embed);
  const int fixed = !m->ops->host_memory, split = txl_dims_split(dm);
  r->ad_fixed = fixed;
  group_specs(m, s, a->cols, fixed, &r->ad_in, &r->ad_tg);
  r->ad_tg_slot0 = group_slots(&r->ad_in);
  const size_t tails = (size_t)group_slots(&r->ad_tg); /* sum of the tail caps */
  const size_t slots = (size_t)r->ad_tg_slot0 + tails;
  r->ad_rows = take(a, (slots ? slots : 1) * sizeof(int32_t), "adaptive rows");
  r->ad_ids = take(a, (slots ? slots : 1) * sizeof(int32_t), "adaptive ids");
  r->ad_head_tg = take(a, L * B * sizeof(int32_t), "head targets");
  r->ad_count = take(a, 2 * TXL_GROUP_MAX * sizeof(int32_t), "adaptive counts");
  r->ad_dropped = take(a, sizeof(int32_t), "adaptive drops");
  const size_t emb = fixed && split ? (size_t)caps_times(m, &r->ad_in, txl_dims_demb) : L * B * de;
  r->ad_emb = take(a, (emb ? emb : 1) * A, "adaptive embeddings");
  r->ad_hp0 = take(a, L * B * de * A, "head projection");
  const size_t hc = fixed ? (size_t)caps_times(m, &r->ad_tg, width_d) : L * B * d;
  const size_t hp = fixed ? (size_t)caps_times(m, &r->ad_tg, txl_dims_demb) : L * B * de;
  r->ad_hc = take(a, (hc ? hc : 1) * A, "tail hidden rows");
  r->ad_hp = take(a, (hp > de ? hp : de) * A, "tail projections"); /* one row at least: txl_adaptive_logprobs */
  r->ad_tail = take(a, (size_t)tail_elems(m, s, a->cols) * A, "tail logits");
  r->ad_tloss = take(a, (fixed ? (tails ? tails : 1) : L * B) * F, "tail losses");
  if (s->training) {
    r->ad_dbias = take(a, (size_t)txl_adaptive_head_size(dm) * F, "head bias gradient");
    r->ad_dhp = take(a, L * B * de * A, "adaptive scratch");
    r->ad_dhc = take(a, L * B * d * A, "adaptive scratch");
  }
}

void txl_run_groups(const TxlRunShape *s, int *groups, int *group_cols) {
  const int want = s->training && s->groups > 1 ? (s->groups < s->B ? s->groups : s->B) : 1;
  *group_cols = (s->B + want - 1) / want;
  *groups = (s->B + *group_cols - 1) / *group_cols;
}

static void walk_run(Alloc *a) {
  const TxlDims *dm = &a->m->spec.dims;
  const TxlRunShape *s = a->s;
  const size_t F = sizeof(float), A = txl_dtype_size(a->m->ops->act); /* fp32; an activation */
  int groups, group_cols;
  txl_run_groups(s, &groups, &group_cols);
  a->cols = group_cols; /* every activation buffer holds one group's columns */
  const size_t L = (size_t)s->L_max, B = (size_t)group_cols, K = (size_t)(s->L_max + s->mem_len);
  const TxlModel *m = a->m; /* every activation in padded rows (model.h) */
  const size_t HD0 = (size_t)dm->n_head * dm->d_head;
  const size_t d = (size_t)txl_model_ld(m, dm->d_model), HD = (size_t)txl_model_ld(m, (int64_t)HD0);
  const size_t HD2 = (size_t)txl_model_ld(m, 2 * (int64_t)HD0), di = (size_t)txl_model_ld(m, dm->d_inner);
  const size_t V = (size_t)txl_model_ld(m, dm->n_token), H = (size_t)dm->n_head;
  TxlRun tmp;
  TxlRun *r = a->r ? a->r : &tmp;
  r->n_slots = s->training ? dm->n_layer : 1;
  r->mem_stride = txl_act_padded(a->m, (int64_t)s->mem_len * (int64_t)(B * d));
  r->kv_stride = txl_act_padded(a->m, (int64_t)s->mem_len * (int64_t)(B * HD2));
  r->r_stride = txl_act_padded(a->m, (int64_t)(K * HD));
  /* each column group's own (txl_run_use_group points tokens and targets at them), so that the
   * inputs of all the groups of a step can be uploaded before a CUDA graph's launch */
  r->tokens_base = take(a, (size_t)groups * L * B * sizeof(int32_t), "tokens");
  r->targets_base = take(a, (size_t)groups * L * B * sizeof(int32_t), "targets");
  r->step_dev = take(a, sizeof(uint32_t), "step");
  r->group_stride = txl_act_padded(a->m, (int64_t)dm->n_layer * r->mem_stride);
  r->mems_base = take(a, (size_t)groups * (size_t)r->group_stride * A + F, "memory");
  const TxlAttnType at = dm->attn_type;
  r->R = txl_attn_sinusoids(at) ? take(a, K * d * A, "relative positions") : NULL;
  r->pos_idx = txl_attn_gathers_positions(at) ? take(a, K * B * sizeof(int32_t), "position rows") : NULL;
  r->pos_rows = txl_attn_absolute(at) ? take(a, K * B * d * A, "positions") : NULL;
  if (a->r) r->acts = txl_calloc((size_t)r->n_slots, sizeof(TxlLayerActs), "activation slots");
  for (int l = 0; l < r->n_slots; l++) {
    TxlLayerActs dummy;
    walk_layer(a, a->r ? &r->acts[l] : &dummy);
  }
  r->hout = take(a, L * B * d * A, "output");
  const int ad_in = txl_adaptive_input(dm), ad_out = txl_adaptive_output(dm);
  r->logits = take(a, L * B * (ad_out ? (size_t)txl_model_ld(m, txl_adaptive_head_size(dm)) : V) * A, "logits");
  if (ad_in || ad_out) walk_adaptive(a, r);
  r->loss = take(a, L * B * F, "loss");
  r->loss_dev = take(a, sizeof(double), "loss sum");
  r->ff_drop = take(a, L * B * di * A, "ffn dropout scratch");
  r->tmp = take(a, L * B * d * A, "scratch");
  r->attn_work = take(a, m->ops->rel_attn_workspace((int)L, (int)K, (int)B, (int)H, dm->d_head, s->training),
                      "attention workspace");
  if (!s->training) {
    r->kv_cache = take(a, (size_t)dm->n_layer * (size_t)r->kv_stride * A + F, "key/value cache");
    r->r_cache = take(a, (size_t)dm->n_layer * (size_t)r->r_stride * A, "R W_r cache");
  }
  if (s->training) {
    r->dh = take(a, L * B * d * A, "dh");
    r->dres = take(a, L * B * d * A, "dres");
    r->dtmp = take(a, L * B * d * A, "dtmp");
    r->dff = take(a, L * B * di * A, "dff");
    r->dq = take(a, L * B * HD * A, "dq");
    r->dkv = take(a, K * B * HD2 * A, "dkv");
    r->dr = take(a, K * HD * A, "dr");
    r->dvec = take(a, L * B * HD * A, "dvec");
    r->dmem = a->m->spec.pre_lnorm || txl_attn_adds_every_layer(at)
                  ? take(a, (size_t)s->mem_len * B * d * A + F, "dmem")
                  : NULL;
    r->drb = txl_attn_key_bias(at) ? take(a, K * H * F, "r_bias rows gradient") : NULL;
  }
}

size_t txl_run_bytes(const TxlModel *m, const TxlRunShape *shape) {
  Alloc a = {m, shape, NULL, 0, 0};
  walk_run(&a);
  return a.bytes;
}

size_t txl_run_tail_bytes(const TxlModel *m, const TxlRunShape *shape) {
  if (!txl_adaptive_output(&m->spec.dims) || m->spec.dims.n_clusters == 0) return 0;
  int groups, group_cols;
  txl_run_groups(shape, &groups, &group_cols);
  return (size_t)tail_elems(m, shape, group_cols) * txl_dtype_size(m->ops->act);
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
  r->cols = shape->B;
  r->col_first = shape->col0;
  txl_run_groups(shape, &r->n_groups, &r->group_cols);
  Alloc a = {m, shape, r, 0, 0};
  walk_run(&a);
  txl_run_use_group(m, r, 0);
  if (shape->training) { /* the backend's scratch for the backward: rows, widest bias_backward, LayerNorm d */
    const TxlDims *dm = &m->spec.dims;
    int wide = dm->n_token > dm->d_inner ? dm->n_token : dm->d_inner;
    if (txl_adaptive_head_size(dm) > wide) wide = txl_adaptive_head_size(dm);
    /* attn_type 1 and 3 also scatter position rows: K keys (1), M or L rows of every column (3) */
    const int64_t rows = (int64_t)(txl_attn_gathers_positions(dm->attn_type) ? shape->L_max + shape->mem_len : shape->L_max) * r->group_cols;
    m->ops->reserve(rows, wide > dm->d_model ? wide : dm->d_model, dm->d_model);
  } else if (txl_adaptive_input(&m->spec.dims) && txl_dims_split(&m->spec.dims)) {
    /* a forward-only run's one scatter (adaptive.c: the clusters' rows into h) sorts its L x B
     * rows too: an evaluation run may have more than the training run's column group */
    m->ops->reserve((int64_t)shape->L_max * r->group_cols, 0, 0);
  }
  /* what one forward pass uploads (ops.def, upload): tokens and targets, the step, the position
   * rows (the adaptive grouping is made on the device) */
  const size_t LB = (size_t)shape->L_max * r->group_cols, KB = (size_t)(shape->L_max + shape->mem_len) * r->group_cols;
  m->ops->upload_reserve((2 * LB + 1 + (r->pos_idx ? KB : 0)) * sizeof(int32_t));
  if (r->pos_idx)
    r->pos_host = txl_malloc((size_t)(shape->L_max + shape->mem_len) * r->group_cols * sizeof(int32_t), "position rows (host)");
  if (r->n_groups > 1)
    r->group_host = txl_malloc(2 * (size_t)shape->L_max * r->group_cols * sizeof(int32_t), "column group tokens");
}

void txl_run_use_group(const TxlModel *m, TxlRun *r, int g) {
  if (g < 0 || g >= r->n_groups) txl_fatal("internal: column group %d of %d", g, r->n_groups);
  const int first = g * r->group_cols;
  r->group = g;
  r->B = r->cols - first < r->group_cols ? r->cols - first : r->group_cols;
  r->col0 = r->col_first + first;
  r->mems = txl_act_at(m, r->mems_base, (int64_t)g * r->group_stride);
  const size_t group_tokens = (size_t)r->L_max * (size_t)r->group_cols;
  if (r->tokens_base) r->tokens = r->tokens_base + (size_t)g * group_tokens;
  if (r->targets_base) r->targets = r->targets_base + (size_t)g * group_tokens;
}

void txl_run_destroy(TxlRun *r, const TxlModel *m) {
  for (int i = 0; i < r->n_owned; i++) m->ops->free(r->owned[i]);
  free(r->owned);
  free(r->acts);
  free(r->group_host);
  free(r->pos_host);
  memset(r, 0, sizeof *r);
}

void txl_run_reset_memory(TxlRun *r) {
  r->mem_rows = 0;
  r->kv_valid = 0;
}

/* Each group's layer l holds [mem_len, B_g, d] in rows ldd apart (its gaps zeros); the packed
 * host view [n_layer, mem_len, cols, d] has the group's columns at [first, first + B_g) of every
 * row. Each layer of a group travels whole, gaps included (one transfer), through a staging
 * copy in the device's layout. to_host: 1 copies into host, 0 from it. */
static void move_mems(const TxlModel *m, TxlRun *r, float *host, int to_host) {
  const int d = m->spec.dims.d_model, ldd = txl_model_ld(m, d), n_layer = m->spec.dims.n_layer;
  const int current = r->group;
  float *stage = NULL;
  for (int g = 0; g < r->n_groups; g++) {
    txl_run_use_group(m, r, g);
    const int64_t rows = (int64_t)r->mem_len * r->B, n = rows * ldd; /* one layer of this group */
    const int first = r->col0 - r->col_first;
    if (!stage) stage = txl_calloc((size_t)(n > 0 ? n : 1), sizeof(float), "memory staging");
    for (int l = 0; l < n_layer; l++) {
      float *layer = host + (int64_t)l * r->mem_len * r->cols * d;
      void *dev = txl_act_at(m, r->mems, l * r->mem_stride);
      if (to_host) txl_act_to_host(m, stage, dev, n);
      for (int64_t i = 0; i < rows; i++) { /* row i = (memory row, column of the group) */
        float *packed = layer + ((i / r->B) * r->cols + first + i % r->B) * d;
        if (to_host) memcpy(packed, stage + i * ldd, (size_t)d * sizeof(float));
        else memcpy(stage + i * ldd, packed, (size_t)d * sizeof(float));
      }
      if (!to_host) txl_act_to_device(m, dev, stage, n);
    }
  }
  free(stage);
  txl_run_use_group(m, r, current);
}

void txl_run_mems_to_host(const TxlModel *m, TxlRun *r, float *dst) { move_mems(m, r, dst, 1); }

void txl_run_mems_to_device(const TxlModel *m, TxlRun *r, const float *src) { move_mems(m, r, (float *)src, 0); }

/* ---- cost ---------------------------------------------------------------------------------- */

double txl_model_flops_per_token(const TxlModel *m, int L, int mem_len) {
  /* The estimate of the reference notes: forward = 2 x non-embedding parameters
   * + 2 d V (output layer) + per layer 3 x 2 x K x H x dh (AC, BD, P v) + 2 K d H dh / L (R W_r)
   * (attn_type 0; the other types below); backward about twice the forward. */
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
  /* per layer: AC and P v over K keys, BD too for attn_type 0 and 1, R W_r for 0 only; the
   * position tables of attn_type 1 and 3 (r_emb, r_bias) are read by row, not multiplied */
  const TxlAttnType at = dm->attn_type;
  const double attn =
      (txl_attn_relative(at) ? 6.0 : 4.0) * K * HD + (txl_attn_projects_positions(at) ? 2.0 * K * d * HD / L : 0.0);
  const double tables = (double)dm->n_layer * dm->max_klen *
                        (txl_attn_key_bias(at) ? HD + dm->n_head : txl_attn_learned_table(at) ? d : 0.0);
  double fwd = 2.0 * ((double)txl_param_count_non_embedding(&m->table) - tables) + out + dm->n_layer * attn;
  return 3.0 * fwd;
}
