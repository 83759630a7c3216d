/* The model's parameters: one contiguous buffer laid out by the table in params.def.
 * The gradient buffer and Adam's two moment buffers use the identical layout, so one
 * all-reduce covers every gradient and each layer's slice is contiguous.
 *
 * The buffer is padded, not packed: every tensor starts at a multiple of TXL_PARAM_ALIGN floats
 * from the buffer start (buffers come from the backend's alloc, at least 256-byte aligned), and
 * the gap after each tensor up to the next multiple holds zeros in every buffer (gradients are
 * zero there, so Adam keeps parameters and moments zero there). The padding never leaves the
 * process: checkpoints, --dump-params and txl_params_pack hold the tensors packed, in table
 * order (TxlParamTable.packed values).
 *
 * Row padding: the rows of a GEMM operand (params.def's ROWS and SPLIT tensors) lie ld floats
 * apart, ld = txl_row_ld(row_align, columns), so that a 16-bit copy's rows start on 16 bytes
 * (cuBLAS's fast kernels want leading dimensions that are multiples of 8 elements); a SPLIT(s)
 * tensor's columns s.. start at column txl_row_ld(row_align, s) of the row, so that the second
 * operand (W_kv of W_qkv) starts aligned too. The gaps hold zeros, like the gaps between tensors.
 * row_align is the backend's (TxlOps.row_align: 8 on CUDA, 1 on the CPU, whose layout is then
 * the packed rows of before). */
#ifndef TXL_MODEL_PARAMS_H
#define TXL_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "src/model/attn_type.h"

/* Clusters of the adaptive softmax at most: the head and three tails (every recipe of the paper). */
#define TXL_MAX_CLUSTERS 4

/* The sizes that decide the parameter shapes. */
typedef struct {
  int n_token;    /* V  */
  int n_layer;
  int d_model;    /* d  */
  int n_head;     /* H  */
  int d_head;     /* dh */
  int d_inner;    /* di */
  int untie_r;    /* per-layer r_w_bias / r_r_bias */
  TxlAttnType attn_type; /* positional encoding, the original's attn_type: 0 relative (u, vb, W_r), 1 Shaw et
                     al.'s learnable relative (r_emb, r_bias, per-layer u), 2 absolute sinusoids at
                     the input, 3 learned absolute per layer (r_emb) */
  int max_klen;   /* rows of r_emb / r_bias (attn_type 1 and 3): train tgt_len + mem_len */
  int tie_weight; /* output layer = word embedding */
  /* adaptive input and softmax (the original's cutoffs, div_val, d_embed, tie_projs) */
  int n_clusters; /* tail clusters: 0 = one softmax over the whole vocabulary */
  int cut[TXL_MAX_CLUSTERS + 1]; /* cluster i holds tokens [cut[i], cut[i+1]); cut[0] = 0,
                                    cut[n_clusters + 1] = n_token */
  int div_val;    /* cluster i embeds in d_embed / div_val^i features (1: one table) */
  int d_embed;    /* embedding width of cluster 0 */
  int tie_projs;  /* the tail clusters' output projections are the input's */
} TxlDims;

/* Sets the adaptive fields for one softmax over the whole vocabulary, embeddings of d_model. */
static inline void txl_dims_single_softmax(TxlDims *m) {
  m->n_clusters = 0;
  m->cut[0] = 0;
  m->cut[1] = m->n_token;
  m->div_val = 1;
  m->d_embed = m->d_model;
  m->tie_projs = 1;
}

/* Whether the clusters have tables of their own (div_val > 1), and whether embeddings are
 * projected to d_model (then P [d_model, d_emb] maps both ways: input e P^T, output h P). */
static inline int txl_dims_split(const TxlDims *m) { return m->div_val != 1; }
static inline int txl_dims_has_proj(const TxlDims *m) { return m->div_val != 1 || m->d_embed != m->d_model; }
/* Embedding width and vocabulary size of cluster i. */
static inline int txl_dims_demb(const TxlDims *m, int i) {
  int d = m->d_embed;
  for (int k = 0; k < i; k++) d /= m->div_val;
  return d;
}
static inline int txl_dims_csize(const TxlDims *m, int i) { return m->cut[i + 1] - m->cut[i]; }
/* Rows of word_emb / out_weight: every token with one table, cluster 0 with split tables. */
static inline int txl_dims_rows0(const TxlDims *m) { return txl_dims_split(m) ? m->cut[1] : m->n_token; }

#define TXL_PFIELD_HEAD_HEAD(name) float *name;
#define TXL_PFIELD_HEAD_LAYER(name)
#define TXL_PFIELD_HEAD_TAIL(name) float *name;
#define TXL_PFIELD_LAYER_HEAD(name)
#define TXL_PFIELD_LAYER_LAYER(name) float *name;
#define TXL_PFIELD_LAYER_TAIL(name)

/* Pointers into one buffer (parameters, or gradients, or a moment). Absent tensors are NULL. */
typedef struct {
#define X(name, section, present, init, rank, d0, d1, rows) TXL_PFIELD_LAYER_##section(name)
#include "src/model/params.def"
#undef X
} TxlLayerParams;

typedef struct {
#define X(name, section, present, init, rank, d0, d1, rows) TXL_PFIELD_HEAD_##section(name)
#include "src/model/params.def"
#undef X
  TxlLayerParams *layers; /* [n_layer] */
} TxlParams;

/* Tensor alignment in elements: 128 floats = 512 bytes in the fp32 buffers, 256 bytes in the
 * bf16 compute copy (TxlModel.param_act), which uses the same element offsets. */
#define TXL_PARAM_ALIGN 128

typedef enum { TXL_INIT_NORMAL, TXL_INIT_NORMAL_ONE, TXL_INIT_ZERO, TXL_INIT_PROJ } TxlInit;

/* The row stride of a padded matrix of `cols` columns: cols rounded up to row_align. */
static inline int64_t txl_row_ld(int row_align, int64_t cols) {
  return (cols + row_align - 1) / row_align * row_align;
}
/* A SPLIT(s) matrix of `cols` columns: where its columns s.. start in a row, and its row stride. */
static inline int64_t txl_split_col(int row_align, int64_t s) { return txl_row_ld(row_align, s); }
static inline int64_t txl_split_ld(int row_align, int64_t s, int64_t cols) {
  return txl_row_ld(row_align, txl_split_col(row_align, s) + cols - s);
}

/* One present tensor of the buffer, in storage order. */
typedef struct {
  char name[64];     /* "word_emb", "layers.3.w_qkv", ... (also the HDF5 dataset name) */
  int64_t offset;    /* in floats from the buffer start: a multiple of TXL_PARAM_ALIGN */
  int64_t packed_offset; /* in floats in the packed view (checkpoint order, no padding) */
  int64_t numel;
  int rank;          /* 1 or 2 */
  int64_t shape[2];
  int64_t ld;        /* floats from one row to the next in the buffer (shape[1] when not padded) */
  int64_t split;     /* SPLIT tensors: columns split.. start at column split_at of the row; */
  int64_t split_at;  /* otherwise both shape[1] (one block of columns) */
  int64_t span;      /* floats from the tensor's start to the end of its last row: shape[0] * ld */
  int64_t run0, n_runs; /* its runs (txl_tensor_runs) in TxlParamTable.runs */
  TxlInit init;
  int layer;         /* -1 for tensors outside the layers */
  size_t field;      /* byte offset of this tensor's pointer in TxlParams (layer -1) or in
                        TxlLayerParams (txl_params_bind) */
} TxlTensorInfo;

typedef struct {
  TxlTensorInfo *tensors;
  int n_tensors;
  int n_layer;
  int row_align;                  /* the row padding (1: none) */
  int attn_type;                  /* the model's (TxlDims.attn_type): checkpoints record it */
  int64_t total;                  /* floats in the buffer, padding included (a multiple of
                                     TXL_PARAM_ALIGN) */
  int64_t packed;                 /* parameter values: the sum of the tensors' numel */
  int64_t layer_begin, layer_end; /* [begin, end) of the per-layer part; layer l's slice is
                                     layer_begin + l * layer_size ... (padding included, every
                                     bound a multiple of TXL_PARAM_ALIGN) */
  int64_t layer_size;
  int64_t *runs;                  /* [2 * n_runs] every tensor's runs, (offset, length) pairs in table
                                     order (the packed view's): made once by txl_param_table_runs, so
                                     the per-step sums (gradient norm, LAMB) build no list */
  int64_t n_runs;
} TxlParamTable;

/* The one place that lays the buffer out (offsets, padding, the layer slices), rows padded to
 * row_align floats (>= 1). */
void txl_param_table_build(TxlParamTable *t, const TxlDims *m, int row_align);
void txl_param_table_free(TxlParamTable *t);
/* (Re)makes t->runs and each tensor's run0, n_runs from the tensors' layout (txl_param_table_build
 * calls it; a table laid out by hand calls it after). */
void txl_param_table_runs(TxlParamTable *t);
/* Points every field of p into base (a buffer of t->total floats) at the table's offsets.
 * Allocates p->layers. */
void txl_params_bind(TxlParams *p, float *base, const TxlParamTable *t);
/* The packed view: packed [t->packed] gets buf's tensors one after the other in table order
 * (the checkpoint's order), without the padding; unpack is the inverse and zeroes the padding. */
void txl_params_pack(const TxlParamTable *t, const float *buf, float *packed);
void txl_params_unpack(const TxlParamTable *t, const float *packed, float *buf);
void txl_params_unbind(TxlParams *p);
/* The original's initialisation into a host buffer of t->total floats: N(0, std) weights,
 * N(1, std) LayerNorm weights, zero biases, zero padding; deterministic in `seed` alone (element
 * e of the k-th tensor draws from Philox counter (e, k): the values do not depend on the
 * padding). */
void txl_params_init(float *host, const TxlParamTable *t, float init_std, float proj_std, uint32_t seed);
/* The position of element e (row-major in the tensor's shape) from the tensor's start. */
static inline int64_t txl_tensor_at(const TxlTensorInfo *ti, int64_t e) {
  const int64_t r = e / ti->shape[1], c = e % ti->shape[1];
  return r * ti->ld + (c < ti->split ? c : c - ti->split + ti->split_at);
}
/* The tensor's contiguous runs of values, as (offset in the buffer, length) pairs in seg (the
 * packed view's order): one run when its rows are not padded, else one or two per row.
 * Returns the count; seg NULL only counts. */
int64_t txl_tensor_runs(const TxlTensorInfo *ti, int64_t *seg);
/* The first tensor of `t` holding a NaN or an infinity in buf (host memory, t->total floats), or
 * NULL when every value is finite; *index gets the element's index within that tensor. */
const TxlTensorInfo *txl_param_first_nonfinite(const TxlParamTable *t, const float *buf, int64_t *index);
/* Non-embedding parameter count (for FLOP estimates; padding not counted). */
int64_t txl_param_count_non_embedding(const TxlParamTable *t);

#endif
