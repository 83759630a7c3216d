#include "src/model/params.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/philox.h"
#include "src/base/error.h"

enum { SEC_HEAD, SEC_LAYER, SEC_TAIL };
#define SEC_ID_HEAD SEC_HEAD
#define SEC_ID_LAYER SEC_LAYER
#define SEC_ID_TAIL SEC_TAIL
#define INIT_ID_NORMAL TXL_INIT_NORMAL
#define INIT_ID_NORMAL_ONE TXL_INIT_NORMAL_ONE
#define INIT_ID_ZERO TXL_INIT_ZERO
#define INIT_ID_PROJ TXL_INIT_PROJ

#define FIELD_OF_HEAD(name) offsetof(TxlParams, name)
#define FIELD_OF_LAYER(name) offsetof(TxlLayerParams, name)
#define FIELD_OF_TAIL(name) offsetof(TxlParams, name)

/* params.def's row layouts as the column where the aligned second block starts: FLAT none
 * (-1), ROWS none but padded (0), SPLIT(s) at s. */
#define ROWS_FLAT (-1)
#define ROWS_ROWS 0
#define ROWS_SPLIT(s) (s)

static int64_t numel_of(int rank, int64_t d0, int64_t d1) { return rank == 1 ? d0 : d0 * d1; }
static int64_t align_up(int64_t n) { return (n + TXL_PARAM_ALIGN - 1) / TXL_PARAM_ALIGN * TXL_PARAM_ALIGN; }

/* ld, split, split_at and span of ti (shape set) for the row layout `rows` (ROWS_*). */
static void lay_rows(TxlTensorInfo *ti, int64_t rows, int row_align) {
  const int64_t cols = ti->shape[1];
  ti->split = ti->split_at = ti->ld = cols;
  if (ti->rank == 2 && rows > 0 && rows < cols) {
    ti->split = rows;
    ti->split_at = txl_split_col(row_align, rows);
    ti->ld = txl_split_ld(row_align, rows, cols);
  } else if (ti->rank == 2 && rows == ROWS_ROWS) {
    ti->ld = txl_row_ld(row_align, cols);
  }
  ti->span = ti->rank == 2 ? ti->shape[0] * ti->ld : ti->numel;
}

/* Walks the table in storage order: head tensors, then each layer's, then the tail's. `off`
 * runs over the padded buffer (each tensor starts aligned), `packed` over the packed view. */
void txl_param_table_build(TxlParamTable *t, const TxlDims *m, int row_align) {
  int cap = 32 + 32 * m->n_layer;
  if (row_align < 1) txl_fatal("internal: parameter rows aligned to %d floats", row_align);
  memset(t, 0, sizeof *t);
  t->row_align = row_align;
  t->tensors = txl_calloc((size_t)cap, sizeof(TxlTensorInfo), "parameter table");
  t->n_layer = m->n_layer;
  t->attn_type = m->attn_type;
  int64_t off = 0, packed = 0;
  int n = 0;
  for (int pass = SEC_HEAD; pass <= SEC_TAIL; pass++) {
    int layers = pass == SEC_LAYER ? m->n_layer : 1;
    if (pass == SEC_LAYER) t->layer_begin = off;
    for (int l = 0; l < layers; l++) {
#define X(pname, section, present, pinit, prank, d0, d1, prows)                                \
      if (SEC_ID_##section == pass && (present)) {                                           \
        TxlTensorInfo *ti = &t->tensors[n++];                                                \
        if (pass == SEC_LAYER) snprintf(ti->name, sizeof ti->name, "layers.%d.%s", l, #pname); \
        else snprintf(ti->name, sizeof ti->name, "%s", #pname);                               \
        ti->rank = prank;                                                                     \
        ti->shape[0] = (d0);                                                                 \
        ti->shape[1] = prank == 2 ? (d1) : 1;                                                 \
        ti->numel = numel_of(prank, ti->shape[0], ti->shape[1]);                              \
        ti->offset = off;                                                                    \
        ti->packed_offset = packed;                                                          \
        ti->init = INIT_ID_##pinit;                                                           \
        ti->layer = pass == SEC_LAYER ? l : -1;                                              \
        ti->field = FIELD_OF_##section(pname);                                               \
        lay_rows(ti, ROWS_##prows, row_align);                                               \
        off = align_up(off + ti->span);                                                      \
        packed += ti->numel;                                                                 \
      }
#include "src/model/params.def"
#undef X
      if (pass == SEC_LAYER && l == 0) t->layer_size = off - t->layer_begin;
    }
    if (pass == SEC_LAYER) t->layer_end = off;
  }
  t->n_tensors = n;
  t->total = off;
  t->packed = packed;
  txl_param_table_runs(t);
}

void txl_param_table_runs(TxlParamTable *t) {
  free(t->runs);
  t->n_runs = 0;
  for (int k = 0; k < t->n_tensors; k++) {
    t->tensors[k].run0 = t->n_runs;
    t->tensors[k].n_runs = txl_tensor_runs(&t->tensors[k], NULL);
    t->n_runs += t->tensors[k].n_runs;
  }
  t->runs = txl_malloc((size_t)(t->n_runs > 0 ? t->n_runs : 1) * 2 * sizeof(int64_t), "parameter runs");
  for (int k = 0; k < t->n_tensors; k++) txl_tensor_runs(&t->tensors[k], t->runs + 2 * t->tensors[k].run0);
}

void txl_param_table_free(TxlParamTable *t) {
  free(t->tensors);
  free(t->runs);
  t->tensors = NULL;
  t->runs = NULL;
}

void txl_params_bind(TxlParams *p, float *base, const TxlParamTable *t) {
  memset(p, 0, sizeof *p);
  p->layers = txl_calloc((size_t)(t->n_layer > 0 ? t->n_layer : 1), sizeof(TxlLayerParams), "layer parameter pointers");
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    char *owner = ti->layer < 0 ? (char *)p : (char *)&p->layers[ti->layer];
    *(float **)(owner + ti->field) = base + ti->offset;
  }
}

void txl_params_unbind(TxlParams *p) {
  free(p->layers);
  p->layers = NULL;
}

/* N(0, 1) from Philox via Box-Muller: element e of tensor k uses counter (e, k, 0x1417, 0). */
void txl_params_init(float *host, const TxlParamTable *t, float init_std, float proj_std, uint32_t seed) {
  memset(host, 0, (size_t)t->total * sizeof(float)); /* the padding */
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    float *x = host + ti->offset;
    if (ti->init == TXL_INIT_ZERO) continue; /* zero already, like the padding */
    const float mean = ti->init == TXL_INIT_NORMAL_ONE ? 1.0f : 0.0f;
    const float std = ti->init == TXL_INIT_PROJ ? proj_std : init_std;
    for (int64_t e = 0; e < ti->numel; e += 2) {
      TxlPhilox4 r = txl_philox4x32_10((uint32_t)(e >> 1), (uint32_t)((uint64_t)e >> 33), (uint32_t)k,
                                       0x1417u, seed, 0x9a7a11u);
      double u1 = ((double)r.v[0] + 1.0) / 4294967296.0; /* (0, 1] */
      double u2 = (double)r.v[1] / 4294967296.0;
      double rad = sqrt(-2.0 * log(u1));
      x[txl_tensor_at(ti, e)] = (float)(mean + std * rad * cos(2.0 * M_PI * u2));
      if (e + 1 < ti->numel) x[txl_tensor_at(ti, e + 1)] = (float)(mean + std * rad * sin(2.0 * M_PI * u2));
    }
  }
}

int64_t txl_tensor_runs(const TxlTensorInfo *ti, int64_t *seg) {
  if (ti->ld == ti->shape[1] || ti->numel == 0) { /* not padded: one run */
    if (seg) {
      seg[0] = ti->offset;
      seg[1] = ti->numel;
    }
    return 1;
  }
  const int64_t cols = ti->shape[1], blocks = ti->split < cols ? 2 : 1;
  if (seg)
    for (int64_t r = 0; r < ti->shape[0]; r++) {
      int64_t *s = seg + 2 * blocks * r;
      s[0] = ti->offset + r * ti->ld;
      s[1] = ti->split;
      if (blocks == 2) {
        s[2] = ti->offset + r * ti->ld + ti->split_at;
        s[3] = cols - ti->split;
      }
    }
  return blocks * ti->shape[0];
}

/* Copies tensor ti between the buffer (padded rows) and the packed view: to_packed 1 packs. */
static void copy_tensor(const TxlTensorInfo *ti, float *buf, float *packed, int to_packed) {
  const int64_t n = txl_tensor_runs(ti, NULL);
  int64_t *seg = txl_malloc((size_t)n * 2 * sizeof(int64_t), "parameter runs");
  txl_tensor_runs(ti, seg);
  float *p = packed + ti->packed_offset;
  for (int64_t k = 0; k < n; k++) {
    float *b = buf + seg[2 * k];
    const size_t bytes = (size_t)seg[2 * k + 1] * sizeof(float);
    if (bytes) memcpy(to_packed ? p : b, to_packed ? b : p, bytes);
    p += seg[2 * k + 1];
  }
  free(seg);
}

void txl_params_pack(const TxlParamTable *t, const float *buf, float *packed) {
  for (int k = 0; k < t->n_tensors; k++) copy_tensor(&t->tensors[k], (float *)buf, packed, 1);
}

void txl_params_unpack(const TxlParamTable *t, const float *packed, float *buf) {
  memset(buf, 0, (size_t)t->total * sizeof(float));
  for (int k = 0; k < t->n_tensors; k++) copy_tensor(&t->tensors[k], buf, (float *)packed, 0);
}

const TxlTensorInfo *txl_param_first_nonfinite(const TxlParamTable *t, const float *buf, int64_t *index) {
  for (int i = 0; i < t->n_tensors; i++) {
    const TxlTensorInfo *ti = &t->tensors[i];
    const int64_t n = txl_tensor_runs(ti, NULL);
    int64_t *seg = txl_malloc((size_t)n * 2 * sizeof(int64_t), "parameter runs");
    txl_tensor_runs(ti, seg);
    int64_t e = 0; /* the element index of the run's first value */
    for (int64_t k = 0; k < n; e += seg[2 * k + 1], k++)
      for (int64_t j = 0; j < seg[2 * k + 1]; j++)
        if (!isfinite(buf[seg[2 * k] + j])) {
          if (index) *index = e + j;
          free(seg);
          return ti;
        }
    free(seg);
  }
  return NULL;
}

int64_t txl_param_count_non_embedding(const TxlParamTable *t) {
  int64_t n = 0;
  for (int k = 0; k < t->n_tensors; k++)
    if (strcmp(t->tensors[k].name, "word_emb") && strncmp(t->tensors[k].name, "emb_", 4) &&
        strncmp(t->tensors[k].name, "out_", 4) && strncmp(t->tensors[k].name, "cluster_", 8))
      n += t->tensors[k].numel;
  return n;
}
