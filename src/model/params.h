/* The model's parameters: one contiguous buffer laid out by the table in params.def.
 * The gradient buffer and Adam's two moment buffers use the identical layout, so one
 * all-reduce covers every gradient and each layer's slice is contiguous. */
#ifndef TXL_MODEL_PARAMS_H
#define TXL_MODEL_PARAMS_H

#include <stdint.h>

/* The sizes that decide the parameter shapes. */
typedef struct {
  int n_token;    /* V  */
  int n_layer;
  int d_model;    /* d  */
  int n_head;     /* H  */
  int d_head;     /* dh */
  int d_inner;    /* di */
  int untie_r;    /* per-layer r_w_bias / r_r_bias */
  int tie_weight; /* output layer = word embedding */
} TxlDims;

#define TXL_PFIELD_HEAD_HEAD(name) float *name;
#define TXL_PFIELD_HEAD_LAYER(name)
#define TXL_PFIELD_HEAD_TAIL(name) float *name;
#define TXL_PFIELD_LAYER_HEAD(name)
#define TXL_PFIELD_LAYER_LAYER(name) float *name;
#define TXL_PFIELD_LAYER_TAIL(name)

/* Pointers into one buffer (parameters, or gradients, or a moment). Absent tensors are NULL. */
typedef struct {
#define X(name, section, present, init, rank, d0, d1) TXL_PFIELD_LAYER_##section(name)
#include "src/model/params.def"
#undef X
} TxlLayerParams;

typedef struct {
#define X(name, section, present, init, rank, d0, d1) TXL_PFIELD_HEAD_##section(name)
#include "src/model/params.def"
#undef X
  TxlLayerParams *layers; /* [n_layer] */
} TxlParams;

typedef enum { TXL_INIT_NORMAL, TXL_INIT_NORMAL_ONE, TXL_INIT_ZERO } TxlInit;

/* One present tensor of the buffer, in storage order. */
typedef struct {
  char name[64];     /* "word_emb", "layers.3.w_qkv", ... (also the HDF5 dataset name) */
  int64_t offset;    /* in floats from the buffer start */
  int64_t numel;
  int rank;          /* 1 or 2 */
  int64_t shape[2];
  TxlInit init;
  int layer;         /* -1 for tensors outside the layers */
} TxlTensorInfo;

typedef struct {
  TxlTensorInfo *tensors;
  int n_tensors;
  int64_t total;                  /* floats in the buffer */
  int64_t layer_begin, layer_end; /* [begin, end) of the per-layer part; layer l's slice is
                                     layer_begin + l * layer_size ... */
  int64_t layer_size;
} TxlParamTable;

void txl_param_table_build(TxlParamTable *t, const TxlDims *m);
void txl_param_table_free(TxlParamTable *t);
/* Points every field of p into base (a buffer of t->total floats). Allocates p->layers. */
void txl_params_bind(TxlParams *p, float *base, const TxlDims *m);
void txl_params_unbind(TxlParams *p);
/* The original's initialisation into a host buffer of t->total floats: N(0, std) weights,
 * N(1, std) LayerNorm weights, zero biases; deterministic in `seed` alone. */
void txl_params_init(float *host, const TxlParamTable *t, float init_std, uint32_t seed);
/* Non-embedding parameter count (for FLOP estimates). */
int64_t txl_param_count_non_embedding(const TxlParamTable *t);

#endif
