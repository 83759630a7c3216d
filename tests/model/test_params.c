/* The padded layout of the parameter buffers (src/model/params.c) and the run state's
 * per-layer slices (src/model/model.c):
 *   - every tensor of the table starts 256-byte aligned in the fp32 buffers and in the bf16
 *     compute copy, tensors do not overlap, the gaps are shorter than one alignment, the layer
 *     slices (layer_begin, layer_size, layer_end) hold exactly their layer's tensors, and the
 *     packed offsets are the running sum of the sizes (the checkpoint's order);
 *   - txl_params_bind points every field at the table's offset;
 *   - the padding is zero after initialisation and after training steps (parameters,
 *     gradients, both Adam moments);
 *   - the packed view is what the packed layout of before gave, bit for bit: the same model
 *     bound to a packed copy of its table (the layout the buffer had before the padding) is
 *     initialised and trained side by side, and the losses, gradient norms, gradients,
 *     parameters, Adam moments and the memory are compared with memcmp;
 *   - the run state's per-layer memory, key/value and R W_r slices are 256-byte aligned;
 *   - row padding (spec.row_align 8, the CUDA backend's layout, forced on the CPU): every GEMM
 *     weight's rows (and W_kv's columns inside W_qkv) start on a multiple of 8 floats, the FLAT
 *     tensors stay packed, the gaps inside the rows are zero, and training with it gives the
 *     packed layout's numbers bit for bit, as above.
 * Shapes: wt103_base (d_model 410, d_head 41, adaptive softmax; table only) and two small
 * models with odd widths, one of them with every adaptive tensor (split tables, projections,
 * untied output, per-layer biases). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "tests/lib/test_util.h"

#define ALIGN_BYTES 256

static const TxlTensorInfo *find(const TxlParamTable *t, const char *name) {
  for (int k = 0; k < t->n_tensors; k++)
    if (strcmp(t->tensors[k].name, name) == 0) return &t->tensors[k];
  return NULL;
}

/* The table's layout rules, rows padded to row_align. */
static void check_table(const char *shape, const TxlDims *m, int row_align) {
  TxlParamTable t;
  txl_param_table_build(&t, m, row_align);
  int aligned = 1, apart = 1, tight = 1, packed_ok = 1, in_slice = 1, uniform = 1, outside = 1, rows_ok = 1;
  int64_t end = 0, packed = 0;
  char bad[160] = "";
  for (int k = 0; k < t.n_tensors; k++) {
    const TxlTensorInfo *ti = &t.tensors[k];
    if ((ti->offset * (int64_t)sizeof(float)) % ALIGN_BYTES || (ti->offset * 2) % ALIGN_BYTES) {
      aligned = 0;
      snprintf(bad, sizeof bad, "%s at %lld", ti->name, (long long)ti->offset);
    }
    if (ti->offset < end) apart = 0;
    if (ti->offset - end >= TXL_PARAM_ALIGN) tight = 0;
    if (ti->packed_offset != packed) packed_ok = 0;
    /* rows: a GEMM weight's (rank 2, not r_*) padded to row_align, W_kv's columns too; the rest packed */
    const int gemm = ti->rank == 2 && !strstr(ti->name, "r_w_bias") && !strstr(ti->name, "r_r_bias") &&
                     !strstr(ti->name, "r_emb") && !strstr(ti->name, "r_bias");
    const int qkv = strstr(ti->name, "w_qkv") != NULL;
    const int64_t cols = ti->shape[1], split = qkv ? (int64_t)m->n_head * m->d_head : cols;
    if (ti->span != ti->shape[0] * ti->ld || ti->ld < cols || ti->split != split || ti->split_at < split ||
        (gemm && (ti->ld % row_align || (split < cols && ti->split_at % row_align) ||
                  ti->ld - (ti->split_at + cols - split) >= row_align || ti->split_at - split >= row_align)) ||
        (!gemm && ti->ld != cols)) {
      rows_ok = 0;
      snprintf(bad, sizeof bad, "%s: ld %lld split %lld at %lld", ti->name, (long long)ti->ld, (long long)ti->split,
               (long long)ti->split_at);
    }
    end = ti->offset + ti->span;
    packed += ti->numel;
    if (ti->layer >= 0) {
      const int64_t lo = t.layer_begin + ti->layer * t.layer_size;
      if (ti->offset < lo || end > lo + t.layer_size) in_slice = 0;
      /* layer l's tensor sits where layer 0's does, l slices further */
      const char *base = strchr(ti->name + strlen("layers."), '.') + 1;
      char name0[80];
      snprintf(name0, sizeof name0, "layers.0.%s", base);
      const TxlTensorInfo *t0 = find(&t, name0);
      if (!t0 || t0->offset + ti->layer * t.layer_size != ti->offset) uniform = 0;
    } else if (!(end <= t.layer_begin || ti->offset >= t.layer_end)) {
      outside = 0;
    }
  }
  char what[160];
  snprintf(what, sizeof what, "%s rows %d: %d tensors 256-byte aligned (fp32 and bf16)", shape, row_align, t.n_tensors);
  ot_check_true(what, aligned, "%s", bad);
  snprintf(what, sizeof what, "%s rows %d: GEMM weights' rows and W_kv aligned, the rest packed", shape, row_align);
  ot_check_true(what, rows_ok, "%s", bad);
  snprintf(what, sizeof what, "%s: tensors in order, apart, gaps < %d floats", shape, TXL_PARAM_ALIGN);
  ot_check_true(what, apart && tight, "apart %d tight %d", apart, tight);
  snprintf(what, sizeof what, "%s: packed offsets the running sum, packed = %lld", shape, (long long)packed);
  ot_check_true(what, packed_ok && t.packed == packed, "packed %lld", (long long)t.packed);
  snprintf(what, sizeof what, "%s: total %lld aligned, covers every tensor", shape, (long long)t.total);
  ot_check_true(what, t.total % TXL_PARAM_ALIGN == 0 && t.total >= end && t.total - end < TXL_PARAM_ALIGN, NULL);
  snprintf(what, sizeof what, "%s: layer slices [%lld + l * %lld, ...) aligned, uniform, end at %lld", shape,
           (long long)t.layer_begin, (long long)t.layer_size, (long long)t.layer_end);
  ot_check_true(what,
                in_slice && uniform && outside && t.layer_begin % TXL_PARAM_ALIGN == 0 &&
                    t.layer_size % TXL_PARAM_ALIGN == 0 && t.layer_end == t.layer_begin + m->n_layer * t.layer_size,
                "in slice %d uniform %d outside %d", in_slice, uniform, outside);
  snprintf(what, sizeof what, "%s: non-embedding count without padding", shape);
  int64_t ne = 0;
  for (int k = 0; k < t.n_tensors; k++)
    if (t.tensors[k].layer >= 0 || !strncmp(t.tensors[k].name, "r_", 2)) ne += t.tensors[k].numel;
  ot_check_true(what, txl_param_count_non_embedding(&t) == ne, "%lld, want %lld",
                (long long)txl_param_count_non_embedding(&t), (long long)ne);
  txl_param_table_free(&t);
}

/* Every field of p is base + its tensor's offset (NULL when absent). */
static void check_bind(const char *shape, const TxlParams *p, const float *base, const TxlParamTable *t) {
  int ok = 1, n = 0;
  char name[96];
#define CHECK_FIELD(ptr, nm)                                                \
  do {                                                                      \
    const TxlTensorInfo *ti = find(t, nm);                                  \
    if ((ptr) != (ti ? base + ti->offset : NULL)) ok = 0;                   \
    n += ti != NULL;                                                        \
  } while (0)
#define BIND_HEAD(pname) CHECK_FIELD(p->pname, #pname);
#define BIND_TAIL(pname) CHECK_FIELD(p->pname, #pname);
#define BIND_LAYER(pname)                                                   \
  for (int l = 0; l < t->n_layer; l++) {                                    \
    snprintf(name, sizeof name, "layers.%d.%s", l, #pname);                 \
    CHECK_FIELD(p->layers[l].pname, name);                                  \
  }
#define X(pname, section, present, init, rank, d0, d1, rows) BIND_##section(pname)
#include "src/model/params.def"
#undef X
  char what[128];
  snprintf(what, sizeof what, "%s: bind points %d fields at the table's offsets", shape, n);
  ot_check_true(what, ok && n == t->n_tensors, "%d of %d tensors", n, t->n_tensors);
}

/* Whether every float of buf outside t's tensors is +0.0 (all bits zero). */
static int padding_zero(const TxlParamTable *t, const float *buf) {
  int64_t end = 0;
  for (int k = 0; k <= t->n_tensors; k++) {
    const int64_t begin = k < t->n_tensors ? t->tensors[k].offset : t->total;
    for (int64_t i = end; i < begin; i++) {
      uint32_t bits;
      memcpy(&bits, buf + i, sizeof bits);
      if (bits) return 0;
    }
    if (k < t->n_tensors) end = t->tensors[k].offset + t->tensors[k].span;
  }
  /* inside the tensors: every float not in one of their runs */
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    const int64_t n = txl_tensor_runs(ti, NULL);
    int64_t *seg = malloc((size_t)n * 2 * sizeof(int64_t));
    txl_tensor_runs(ti, seg);
    int64_t at = ti->offset;
    for (int64_t r = 0; r <= n; r++) {
      const int64_t next = r < n ? seg[2 * r] : ti->offset + ti->span;
      for (int64_t i = at; i < next; i++) {
        uint32_t bits;
        memcpy(&bits, buf + i, sizeof bits);
        if (bits) {
          free(seg);
          return 0;
        }
      }
      if (r < n) at = seg[2 * r] + seg[2 * r + 1];
    }
    free(seg);
  }
  return 1;
}

/* Rebinds m (made by txl_model_create) to the packed layout of before: every tensor right after
 * the previous one, the buffers used from their start. */
static void make_packed(TxlModel *m) {
  TxlParamTable *t = &m->table;
  int64_t begin = -1, end = 0;
  for (int k = 0; k < t->n_tensors; k++) {
    TxlTensorInfo *ti = &t->tensors[k];
    ti->offset = ti->packed_offset;
    ti->ld = ti->split = ti->split_at = ti->shape[1]; /* rows end to end */
    ti->span = ti->numel;
    if (ti->layer == 0 && begin < 0) begin = ti->offset;
    if (ti->layer == 0) end = ti->offset + ti->numel;
  }
  t->layer_begin = begin;
  t->layer_size = end - begin;
  t->layer_end = begin + t->n_layer * t->layer_size;
  t->total = t->packed;
  t->row_align = 1;
  txl_param_table_runs(t);
  txl_params_unbind(&m->p);
  txl_params_unbind(&m->g);
  txl_params_bind(&m->p, m->param_buf, t);
  txl_params_bind(&m->g, m->grad_buf, t);
}

static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static void check_buffers(const char *what, const TxlModel *pad, const TxlModel *ref, const float *dp,
                          const float *dr) {
  const TxlParamTable *t = &pad->table;
  float *host = ot_alloc(t->total), *want = ot_alloc(t->packed), *got = ot_alloc(t->packed);
  pad->ops->to_host(host, dp, (size_t)t->total * sizeof(float));
  ref->ops->to_host(want, dr, (size_t)t->packed * sizeof(float));
  txl_params_pack(t, host, got);
  char name[160];
  snprintf(name, sizeof name, "%s: padding zero", what);
  ot_check_true(name, padding_zero(t, host), NULL);
  snprintf(name, sizeof name, "%s: packed view as the packed layout (%lld values)", what, (long long)t->packed);
  ot_check_same(name, got, want, (size_t)t->packed * sizeof(float));
  /* unpack is pack's inverse and writes zero padding */
  float *back = ot_alloc(t->total);
  memset(back, 0xA5, (size_t)t->total * sizeof(float));
  txl_params_unpack(t, got, back);
  snprintf(name, sizeof name, "%s: unpack(pack(buffer)) = buffer", what);
  ot_check_same(name, back, host, (size_t)t->total * sizeof(float));
  free(back);
  free(host);
  free(want);
  free(got);
}

/* Trains the padded model and the packed one side by side for a few steps. */
static void check_training(const char *shape, const TxlModelSpec *spec) {
  const TxlOps *ops = txl_ops_cpu();
  TxlModel pad, ref;
  txl_model_create(&pad, ops, spec);
  txl_model_create(&ref, ops, spec);
  make_packed(&ref);
  check_bind(shape, &pad.p, pad.param_buf, &pad.table);
  check_bind(shape, &pad.g, pad.grad_buf, &pad.table);
  char what[160];
  snprintf(what, sizeof what, "%s: buffers 256-byte aligned", shape);
  ot_check_true(what, (uintptr_t)pad.param_buf % ALIGN_BYTES == 0 && (uintptr_t)pad.grad_buf % ALIGN_BYTES == 0, NULL);
  snprintf(what, sizeof what, "%s: padding of %lld floats", shape, (long long)(pad.table.total - pad.table.packed));
  ot_check_true(what, pad.table.total > pad.table.packed, NULL); /* these shapes do pad */

  txl_model_init_params(&pad, 0.02f, 0.01f, 1234u);
  txl_model_init_params(&ref, 0.02f, 0.01f, 1234u);
  snprintf(what, sizeof what, "%s init params", shape);
  check_buffers(what, &pad, &ref, pad.param_buf, ref.param_buf);

  const int L = 5, B = 3, mem_len = 4;
  const TxlRunShape rs = {L, B, 0, mem_len, -1, 0, 1, 1, TXL_TAIL_NOT_COUNTED};
  TxlRun rp, rr;
  txl_run_create(&rp, &pad, &rs);
  txl_run_create(&rr, &ref, &rs);
  const int64_t A = (int64_t)txl_dtype_size(ops->act);
  snprintf(what, sizeof what, "%s: memory slices %lld apart, 256-byte aligned", shape, (long long)rp.mem_stride);
  ot_check_true(what, (rp.mem_stride * A) % ALIGN_BYTES == 0 && (uintptr_t)rp.mems % ALIGN_BYTES == 0 &&
                          rp.mem_stride >= (int64_t)mem_len * B * spec->dims.d_model, NULL);
  TxlAdam ap, ar;
  txl_adam_create(&ap, ops, pad.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
  txl_adam_create(&ar, ops, ref.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
  OtRng rng = ot_rng(77);
  int32_t tok[(5 + 1) * 3];
  const int steps = 4;
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < (L + 1) * B; i++) tok[i] = ot_randint(&rng, spec->dims.n_token);
    double loss[2], norm[2];
    TxlModel *ms[2] = {&pad, &ref};
    TxlRun *runs[2] = {&rp, &rr};
    TxlAdam *ad[2] = {&ap, &ar};
    for (int k = 0; k < 2; k++) {
      TxlModel *m = ms[k];
      ops->zero(m->grad_buf, (size_t)m->table.total * sizeof(float));
      loss[k] = txl_model_forward(m, runs[k], tok, tok + B, L, s, 1, 1.0f / (float)(L * B));
      txl_model_backward(m, runs[k], NULL, NULL);
      norm[k] = txl_grad_norm(ops, m->grad_buf, &m->table);
    }
    snprintf(what, sizeof what, "%s step %d: loss %.6f and |g| %.6f the same bits", shape, s, loss[0], norm[0]);
    ot_check_true(what, same_bits(&loss[0], &loss[1], sizeof loss[0]) && same_bits(&norm[0], &norm[1], sizeof norm[0]),
                  "loss %.17g / %.17g, norm %.17g / %.17g", loss[0], loss[1], norm[0], norm[1]);
    snprintf(what, sizeof what, "%s step %d gradients", shape, s);
    check_buffers(what, &pad, &ref, pad.grad_buf, ref.grad_buf);
    for (int k = 0; k < 2; k++) {
      txl_adam_step(ad[k], ms[k]->param_buf, ms[k]->grad_buf, norm[k], 1.0, 1e-3f);
      txl_model_params_changed(ms[k]);
    }
    snprintf(what, sizeof what, "%s step %d params", shape, s);
    check_buffers(what, &pad, &ref, pad.param_buf, ref.param_buf);
  }
  snprintf(what, sizeof what, "%s Adam m", shape);
  check_buffers(what, &pad, &ref, ap.m, ar.m);
  snprintf(what, sizeof what, "%s Adam v", shape);
  check_buffers(what, &pad, &ref, ap.v, ar.v);
  const int64_t nm = (int64_t)spec->dims.n_layer * mem_len * B * spec->dims.d_model;
  float *mp = ot_alloc(nm + 1), *mr = ot_alloc(nm + 1);
  txl_run_mems_to_host(&pad, &rp, mp);
  txl_run_mems_to_host(&ref, &rr, mr);
  snprintf(what, sizeof what, "%s memory (packed, as a checkpoint's /mems)", shape);
  ot_check_same(what, mp, mr, (size_t)nm * sizeof(float));
  /* the way back: into the padded run's slices, read out again */
  for (int64_t i = 0; i < nm; i++) mp[i] = (float)i;
  txl_run_mems_to_device(&pad, &rp, mp);
  txl_run_mems_to_host(&pad, &rp, mr);
  snprintf(what, sizeof what, "%s memory to the device and back", shape);
  ot_check_same(what, mr, mp, (size_t)nm * sizeof(float));
  free(mp);
  free(mr);

  /* an inference run's key/value and R W_r caches */
  const TxlRunShape is = {L, B, 0, 7, -1, 0, 0, 1, TXL_TAIL_NOT_COUNTED};
  TxlRun inf, infr;
  txl_run_create(&inf, &pad, &is);
  txl_run_create(&infr, &ref, &is);
  snprintf(what, sizeof what, "%s: key/value and R W_r cache slices 256-byte aligned", shape);
  ot_check_true(what, (inf.kv_stride * A) % ALIGN_BYTES == 0 && (inf.r_stride * A) % ALIGN_BYTES == 0 &&
                          (inf.mem_stride * A) % ALIGN_BYTES == 0 && (uintptr_t)inf.kv_cache % ALIGN_BYTES == 0 &&
                          (uintptr_t)inf.r_cache % ALIGN_BYTES == 0,
                "strides %lld %lld %lld", (long long)inf.kv_stride, (long long)inf.r_stride, (long long)inf.mem_stride);
  /* three segments without targets (the second and third reuse the cached keys and values, and R
   * W_r while K stays), then every row's log-probabilities: the packed run's bits */
  const int V = spec->dims.n_token;
  float *lp = ot_alloc(V), *lr = ot_alloc(V);
  int same = 1;
  for (int seg = 0; seg < 3; seg++) {
    for (int i = 0; i < L * B; i++) tok[i] = ot_randint(&rng, V);
    txl_model_forward(&pad, &inf, tok, NULL, L, 0, 0, 0.0f);
    txl_model_forward(&ref, &infr, tok, NULL, L, 0, 0, 0.0f);
    for (int row = 0; row < L * B; row++) {
      txl_model_logprobs(&pad, &inf, row, lp);
      txl_model_logprobs(&ref, &infr, row, lr);
      same &= same_bits(lp, lr, (size_t)V * sizeof(float));
    }
  }
  snprintf(what, sizeof what, "%s inference: 3 segments' log-probabilities the same bits", shape);
  ot_check_true(what, same, NULL);
  free(lp);
  free(lr);
  txl_run_destroy(&inf, &pad);
  txl_run_destroy(&infr, &ref);

  txl_adam_destroy(&ap);
  txl_adam_destroy(&ar);
  txl_run_destroy(&rp, &pad);
  txl_run_destroy(&rr, &ref);
  txl_model_destroy(&pad);
  txl_model_destroy(&ref);
}

static TxlDims dims_of(int V, int n_layer, int d, int H, int dh, int di) {
  TxlDims m;
  memset(&m, 0, sizeof m);
  m.n_token = V;
  m.n_layer = n_layer;
  m.d_model = d;
  m.n_head = H;
  m.d_head = dh;
  m.d_inner = di;
  m.tie_weight = 1;
  txl_dims_single_softmax(&m);
  return m;
}

int main(void) {
  /* configs/wt103_base.ini: the table only (its buffers would take 600 MB) */
  TxlDims wt = dims_of(267735, 16, 410, 10, 41, 2100);
  wt.n_clusters = 3;
  wt.cut[1] = 20000;
  wt.cut[2] = 40000;
  wt.cut[3] = 200000;
  wt.cut[4] = wt.n_token;
  check_table("wt103_base", &wt, 1);
  check_table("wt103_base", &wt, 8);

  TxlModelSpec a;
  memset(&a, 0, sizeof a);
  a.dims = dims_of(61, 2, 82, 2, 41, 210);
  a.dropout = 0.1f;
  a.dropatt = 0.1f;
  a.seed = 5;
  a.ln_eps = TXL_LAYER_NORM_EPS;
  check_table("small", &a.dims, 1);
  check_table("small", &a.dims, 8);
  check_training("small", &a);
  TxlModelSpec a8 = a; /* the CUDA backend's row padding */
  a8.row_align = 8;
  check_training("small rows 8", &a8);
  /* the other attention types (their positions are gathers into padded rows, attn_type 2 and 3
   * add them to the cat rows in place) */
  for (int at = 1; at <= 3; at++) {
    TxlModelSpec v = a8;
    v.dims.attn_type = at;
    v.dims.max_klen = at == 1 || at == 3 ? 5 + 7 : 0; /* the longest L + mem_len of check_training's runs */
    char name[64];
    snprintf(name, sizeof name, "small attn_type %d rows 8", at);
    check_training(name, &v);
  }

  TxlModelSpec b = a; /* every adaptive tensor, untied, per-layer biases, pre-norm */
  b.dims = dims_of(301, 3, 46, 3, 13, 70);
  b.dims.untie_r = 1;
  b.dims.tie_weight = 0;
  b.dims.n_clusters = 2;
  b.dims.cut[1] = 101;
  b.dims.cut[2] = 203;
  b.dims.cut[3] = b.dims.n_token;
  b.dims.div_val = 2;
  b.dims.d_embed = 38;
  b.dims.tie_projs = 0;
  b.pre_lnorm = 1;
  check_table("adaptive", &b.dims, 1);
  check_table("adaptive", &b.dims, 8);
  check_training("adaptive", &b);
  TxlModelSpec b8 = b;
  b8.row_align = 8;
  check_training("adaptive rows 8", &b8);
  return ot_finish("test_params");
}
