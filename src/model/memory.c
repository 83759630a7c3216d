/* The memory and the inference caches: see memory.h. */
#include "src/model/memory.h"

#include "src/model/linear.h"
#include "src/model/positions.h"

void txl_memory_concat(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const TxlOps *o = m->ops;
  const int B = r->B, ldd = txl_model_ld(m, m->spec.dims.d_model), M = sg->M, Mnew = sg->Mnew;
  const size_t AS = txl_dtype_size(o->act); /* bytes of an activation */
  TxlLayerActs *a = txl_slot(r, l);
  void *mem = txl_act_at(m, r->mems, l * r->mem_stride); /* [mem_len, B, d] */
  if (M) o->copy(a->cat, mem, (size_t)M * B * ldd * AS); /* whole padded rows: the gaps' zeros too */
  txl_pos_layer_add(m, r, l, sg); /* attn_type 2 and 3: positions added in place (positions.h) */
  if (Mnew) o->copy(mem, txl_act_at(m, a->cat, (int64_t)(sg->K - Mnew) * B * ldd), (size_t)Mnew * B * ldd * AS);
}

void txl_memory_kv_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg, const void *in) {
  const TxlOps *o = m->ops;
  const int B = r->B, d = m->spec.dims.d_model, HD = m->spec.dims.n_head * m->spec.dims.d_head;
  const int M = sg->M, Mnew = sg->Mnew;
  const size_t AS = txl_dtype_size(o->act);
  TxlLayerActs *a = txl_slot(r, l);
  const void *w_kv = txl_model_w(m, m->p.layers[l].w_qkv + txl_model_kv_col(m)); /* [d, 2*HD] in W_qkv */
  const int ld_qkv = txl_model_ld_qkv(m);
  const int64_t kv_row = (int64_t)B * txl_model_ld(m, 2 * HD); /* one key row of every column */
  void *kv_cache = r->kv_cache ? txl_act_at(m, r->kv_cache, l * r->kv_stride) : NULL;
  if (sg->cached_kv) { /* the memory rows' from the cache, the new rows' computed */
    if (M) o->copy(a->kv, kv_cache, (size_t)(M * kv_row) * AS);
    txl_linear_forward(m, txl_act_at(m, a->kv, M * kv_row), txl_act_at(m, in, (int64_t)M * B * txl_model_ld(m, d)),
                       w_kv, sg->LB, d, 2 * HD, ld_qkv);
  } else {
    txl_linear_forward(m, a->kv, in, w_kv, sg->KB, d, 2 * HD, ld_qkv);
  }
  if (kv_cache && Mnew) o->copy(kv_cache, txl_act_at(m, a->kv, (sg->K - Mnew) * kv_row), (size_t)(Mnew * kv_row) * AS);
}

const void *txl_memory_rw_forward(TxlModel *m, TxlRun *r, int l, const TxlSegment *sg) {
  const int d = m->spec.dims.d_model, HD = m->spec.dims.n_head * m->spec.dims.d_head;
  const void *w_r = txl_model_w(m, m->p.layers[l].w_r); /* [d, HD] */
  TxlLayerActs *a = txl_slot(r, l);
  if (!r->r_cache) {
    txl_linear_forward(m, a->r, r->R, w_r, sg->K, d, HD, txl_model_ld(m, HD));
    return a->r;
  }
  void *rl = txl_act_at(m, r->r_cache, l * r->r_stride); /* [K, HD], kept while K stays */
  if (!sg->R_kept) txl_linear_forward(m, rl, r->R, w_r, sg->K, d, HD, txl_model_ld(m, HD));
  return rl;
}

void txl_memory_advance(TxlRun *r, const TxlSegment *sg, int dropout_on) {
  r->mem_rows = sg->Mnew;
  if (r->kv_cache) r->kv_valid = !dropout_on; /* holds exactly the new memory rows' keys and values */
}
