/* The Transformer-XL model (attn_type 0 to 3 of the original code, model.attn_type): parameters, the per-use run
 * state (activations, memory), and the forward / backward passes as lists of backend ops.
 * Nothing here knows about MPI, CUDA or files. */
#ifndef TXL_MODEL_MODEL_H
#define TXL_MODEL_MODEL_H

#include <stdint.h>

#include "kernels/ops.h"
#include "src/model/params.h"

/* LayerNorm's epsilon in every layer: the original's (PyTorch's nn.LayerNorm default). */
#define TXL_LAYER_NORM_EPS 1e-5f

/* Hyper-parameters the forward pass needs besides the shapes. */
typedef struct {
  TxlDims dims;
  float dropout;   /* p of every dropout but dropatt */
  float dropatt;   /* p of the attention-probability dropout */
  int pre_lnorm;   /* 1: pre-norm layers, 0: post-norm */
  float ln_eps;    /* LayerNorm's epsilon (> 0; TXL_LAYER_NORM_EPS) */
  uint32_t seed;   /* dropout key */
  int row_align;   /* rows of the GEMM weights padded to this many floats (params.h); 0: the
                      backend's (TxlOps.row_align). Tests force 8 on the CPU: same numbers. */
} TxlModelSpec;

typedef struct {
  const TxlOps *ops;
  TxlModelSpec spec;
  TxlParamTable table;
  float *param_buf; /* [table.total] device: the fp32 master weights */
  float *grad_buf;  /* [table.total] device: fp32 */
  void *param_act;   /* [table.total] device: the weights in the activation type, the GEMMs' and
                       gathers' copy (param_buf itself when activations are fp32); refreshed by
                       txl_model_params_changed */
  TxlParams p;      /* views into param_buf */
  TxlParams g;      /* views into grad_buf  */
  int grad_zero;    /* 1 while grad_buf is known to hold zeros: the fused update left it so
                       (txl_train_update), and the next txl_train_grad skips its zeroing pass.
                       Whatever else writes grad_buf between the two clears it (0: zeroed first) */
} TxlModel;

/* Allocates parameters and gradients (zero); does not initialise the parameters. */
void txl_model_create(TxlModel *m, const TxlOps *ops, const TxlModelSpec *spec);
void txl_model_destroy(TxlModel *m);
/* The original's initialisation (see txl_params_init), copied to the device. */
void txl_model_init_params(TxlModel *m, float init_std, float proj_std, uint32_t seed);
/* Parameters from the host ([table.total] fp32, a checkpoint's), copied to the device. */
void txl_model_set_params(TxlModel *m, const float *host);
/* Tells the model param_buf was written on the device (outside the fused optimizer step, which
 * writes the copy itself): refreshes the activation-type copy of the weights
 * (txl_model_init_params and txl_model_set_params call it). */
void txl_model_params_changed(TxlModel *m);

/* The compute copy of a weight tensor: `master` points into param_buf; the same tensor in
 * param_act (the same pointer when activations are fp32). */
static inline const void *txl_model_w(const TxlModel *m, const float *master) {
  if (!master) return NULL;
  return (const char *)m->param_act + (size_t)(master - m->param_buf) * txl_dtype_size(m->ops->act);
}
/* The row padding of m's tensors, and their row strides (params.h): every GEMM weight of `cols`
 * columns (ROWS) and every activation of `cols` features lies in rows txl_model_ld(m, cols)
 * elements apart (the gaps hold zeros and are never read: GEMM leading dimensions on multiples of
 * row_align); W_qkv, whose W_kv starts at column txl_model_kv_col, has its own. */
static inline int txl_model_row_align(const TxlOps *o, const TxlModelSpec *s) {
  return s->row_align > 0 ? s->row_align : o->row_align;
}
static inline int txl_model_ld(const TxlModel *m, int64_t cols) { return (int)txl_row_ld(m->table.row_align, cols); }
static inline int txl_model_kv_col(const TxlModel *m) {
  return (int)txl_split_col(m->table.row_align, (int64_t)m->spec.dims.n_head * m->spec.dims.d_head);
}
static inline int txl_model_ld_qkv(const TxlModel *m) {
  const int64_t HD = (int64_t)m->spec.dims.n_head * m->spec.dims.d_head;
  return (int)txl_split_ld(m->table.row_align, HD, 3 * HD);
}
/* Alignment in bytes of the tensors the run state carves out of one allocation (each layer's
 * memory, key/value cache and R W_r cache): the backend's alloc gives buffers aligned at least
 * as much (cudaMalloc: 256 bytes; the CPU backend the same). */
#define TXL_ACT_ALIGN 256
/* n activation-type elements rounded up to a whole number of TXL_ACT_ALIGN bytes. */
static inline int64_t txl_act_padded(const TxlModel *m, int64_t n) {
  const int64_t per = TXL_ACT_ALIGN / (int64_t)txl_dtype_size(m->ops->act);
  return (n + per - 1) / per * per;
}
/* An activation tensor `elems` elements further than p (activations are `void *`: their
 * element size is the backend's). */
static inline void *txl_act_at(const TxlModel *m, const void *p, int64_t elems) {
  return (char *)p + (size_t)elems * txl_dtype_size(m->ops->act);
}
/* n activation-type values of the device at src to fp32 host values (dst [n]), and back. */
void txl_act_to_host(const TxlModel *m, float *dst, const void *src, int64_t n);
void txl_act_to_device(const TxlModel *m, void *dst, const float *src, int64_t n);

/* Activations saved by one layer for its backward pass (one slot per layer when training,
 * one shared slot when only running forward). Shapes at capacity; K = M + L rows in use. Here and
 * in TxlRun, the last dimension of an activation (f features) lies in rows txl_model_ld(m, f)
 * apart: [K, B, d] is K * B rows of ld(d) elements, [K, B, 2, H, dh] K * B rows of ld(2 H dh). */
typedef struct {
  void *cat;        /* [K, B, d]   memory rows, then this layer's input h                     */
  void *ln_cat;     /* [K, B, d]   pre-norm: LayerNorm(cat); NULL for post-norm               */
  float *ln_cat_mean, *ln_cat_rstd; /* [K, B]                                                 */
  void *q;          /* [L, B, H*dh]                                                           */
  void *kv;         /* [K, B, 2, H, dh]                                                       */
  void *r;          /* [K, H*dh]   R W_r (attn_type 0), the clamped r_emb rows (1), unused (2, 3) */
  float *rb;        /* [K, H]      attn_type 1: the clamped r_bias rows; NULL otherwise         */
  float *saved;     /* what rel_attn_forward keeps for its backward (rel_attn_saved_floats)   */
  void *vec;        /* [L, B, H*dh]                                                           */
  void *res1;       /* [L, B, d]   post-norm: h + attn (LayerNorm 1 input); pre-norm: out1    */
  void *h1;         /* [L, B, d]   post-norm: LayerNorm 1 output; pre-norm: LayerNorm 2 output */
  float *ln1_mean, *ln1_rstd; /* [L, B] */
  void *ff_a;       /* [L, B, di]  ReLU output, before dropout                                */
  void *res2;       /* [L, B, d]   post-norm: h1 + ffn (LayerNorm 2 input); unused pre-norm   */
  float *ln2_mean, *ln2_rstd; /* [L, B] */
} TxlLayerActs;

/* Everything one use of the model (training, evaluation, generation) needs besides the
 * parameters: capacities fixed at creation, no allocation afterwards. */
typedef struct {
  int L_max;        /* segment rows at most                                    */
  int B;            /* columns of the current column group (txl_run_use_group) */
  int col0;         /* global index of the current group's first column        */
  int mem_len;      /* memory rows kept per layer                              */
  int clamp_len;    /* <= 0: none                                              */
  int same_length;
  int training;     /* 1: one activation slot per layer + gradient buffers     */
  int mem_rows;     /* M: memory rows valid now (0 after a reset)              */

  /* column groups (gradient accumulation, train.batch_chunk): the rank's `cols` columns, the
   * first `col_first` globally, go through the model in n_groups groups of at most group_cols,
   * one after the other; the activation buffers are sized for one group and shared, while each
   * group keeps its own memory (group g's at mems_base + g * group_stride elements). */
  int cols, col_first, n_groups, group_cols, group;
  void *mems_base;
  int64_t group_stride;
  int32_t *group_host; /* [2, L_max, group_cols] host: one group's tokens and targets (n_groups > 1) */

  int32_t *tokens;  /* [L_max, B] device: the current group's, in tokens_base */
  int32_t *targets; /* [L_max, B] device: the current group's, in targets_base */
  int32_t *tokens_base, *targets_base; /* [n_groups, L_max, group_cols] device */
  uint32_t *step_dev; /* [1] device: the step of the dropout masks (TxlDropout.step_at) */
  int inputs_ready; /* forwards whose uploads txl_run_upload made already (each skips its own) */
  void *mems;       /* [n_layer][mem_len, B, d]: layer l's at l * mem_stride */
  void *R;          /* [K_max, d] relative positions after dropout (attn_type 0, 2) */
  /* attn_type 1, 2, 3 (positions.h), NULL otherwise */
  int32_t *pos_idx; /* [K_max, B] device: the table row of each key (and column)             */
  int32_t *pos_host;/* [K_max, B] host staging of pos_idx                                     */
  void *pos_rows;   /* [K_max, B, d] attn_type 2, 3: the positions added to cat (backward: scratch) */
  float *drb;       /* [K_max, H] attn_type 1, training: d r_bias rows                         */
  TxlLayerActs *acts; /* [n_slots] */
  int n_slots;
  void *hout;       /* [L, B, d] last layer output after dropout */
  void *logits;     /* [L*B, V] (adaptive: [L*B, head size]); after a training forward: d(loss)/d(logits) */
  float *loss;      /* [L*B] per-token loss */
  double *loss_dev; /* [1] device: the loss sum of the last forward with targets (ops loss_sum) */
  double *loss_out; /* NULL, or set by the caller (the training step): device [n_groups], where the
                       forward of column group g leaves its loss sum (in loss_out[g]) instead of
                       reading it back, so that the step need not wait for the device */
  void *ff_drop;    /* [L, B, di] scratch: FFN hidden after dropout */
  void *tmp;        /* [L, B, d] scratch */
  void *attn_work;  /* rel_attn_workspace bytes */
  /* backward only */
  void *dh, *dres, *dtmp; /* [L, B, d] */
  void *dmem;       /* [mem_len, B, d] pre-norm: d LayerNorm(memory rows); attn_type 3 post-norm:
                       d(memory rows) */
  void *dff;        /* [L, B, di] */
  void *dq;         /* [L, B, H*dh] */
  void *dkv;        /* [K, B, 2*H*dh] */
  void *dr;         /* [K, H*dh] */
  void *dvec;       /* [L, B, H*dh] */

  /* adaptive input and softmax (src/model/adaptive.c); NULL when the model has none. The tokens
   * are grouped by cluster on the device (the op adaptive_group) into slots of fixed capacity:
   * ad_in for the inputs (clusters 0.., when the input tables are split), ad_tg for the targets
   * (the tail clusters 1..). Where ad_fixed, every cluster's products run on its capacity of rows,
   * the padding rows giving zeros (a GPU's: the shapes repeat from step to step, so the step
   * captures into a CUDA graph); else on its count of rows, read back (the CPU's: its memory is
   * the host's, the read costs nothing). Below, n_i is those rows of cluster i. */
  TxlGroupSpec ad_in, ad_tg;
  int ad_fixed;
  int64_t ad_tg_slot0; /* the targets' slots start there in ad_rows and ad_ids, after the inputs' */
  int32_t *ad_rows;   /* [ad_tg_slot0 + tail slots] device: rows grouped by cluster (-1: padding) */
  int32_t *ad_ids;    /* the same slots: each token's id within its cluster                    */
  int32_t *ad_head_tg;/* [L*B] device: the head's target (the token, or its cluster's column)  */
  int32_t *ad_count;  /* [2, TXL_GROUP_MAX] device: the last grouping's counts, inputs, targets  */
  int32_t *ad_dropped;/* [1] device: targets that found no slot since the run was made (none by
                         construction: the caps are measured bounds; txl_run_check_dropped) */
  int ad_in_n[TXL_MAX_CLUSTERS], ad_tg_n[TXL_MAX_CLUSTERS]; /* n_i, last forward                */
  void *ad_emb;       /* [sum n_i, d_emb_i] the input rows' embeddings before projection       */
  void *ad_hp0;       /* [L*B, d_emb_0] the head's projected hidden rows                       */
  void *ad_hc;        /* [sum n_i, d] hidden rows of the tail targets, cluster after cluster    */
  void *ad_hp;        /* [sum n_i, d_emb_i] the same rows projected                            */
  void *ad_tail;      /* tail logits, cluster after cluster: [n_i, ld(size of cluster i)] for the
                         tail clusters; after a training forward, their gradients */
  float *ad_tloss;    /* [sum n_i] tail losses                                                 */
  float *ad_dbias;    /* [head size] its gradient (training)                                   */
  void *ad_dhp;       /* [L*B, d_embed] training scratch                                       */
  void *ad_dhc;       /* [L*B, d] training scratch                                             */

  void **owned;     /* every device buffer above, as allocated (freed by txl_run_destroy) */
  int n_owned, cap_owned;

  /* state of the last forward, used by the backward */
  int last_L, last_M, last_step, last_dropout_on;
  int R_rows;       /* K of the dropout-free R held in R (and R W_r in r_cache), -1 when none */
  /* inference runs only (NULL when training): per layer, the keys and values of the memory rows
   * [n_layer][mem_len, B, 2*H*dh] and R W_r [n_layer][K_max, H*dh], layer l's at l * kv_stride
   * and l * r_stride */
  void *kv_cache, *r_cache;
  /* elements from one layer's slice of mems, kv_cache, r_cache to the next: the slice's size
   * rounded up (txl_act_padded), so every slice starts TXL_ACT_ALIGN-byte aligned */
  int64_t mem_stride, kv_stride, r_stride;
  int kv_valid;     /* kv_cache holds the current memory rows' keys and values */
} TxlRun;

/* The most targets of each tail cluster of the adaptive softmax that one segment of a run can
 * hold (its column group together), measured from the corpus at start (src/train/tail_cap.h)
 * and carried in the run's shape, so that txl_run_create and txl_run_bytes (the memory estimate)
 * size the tail buffers alike. known = 0: not measured; any target may fall in any cluster (the
 * worst case: every target of a segment in the widest cluster). A run without targets
 * (generation) is known with every n 0. */
typedef struct {
  int known;
  int n[TXL_MAX_CLUSTERS]; /* n[i]: tail cluster i's (1 .. n_clusters); n[0] unused */
  /* 1: the run's inputs are the counted split's too (a segment's inputs are its targets one row
   * earlier, so they hold at most n[i] + one per column of cluster i: a column's row 0 is no
   * target), which bounds the adaptive input's clusters as well */
  int inputs;
} TxlTailCap;
/* Initialisers: not counted (the worst case); a run that never sees targets. */
#define TXL_TAIL_NOT_COUNTED {0, {0}, 0}
#define TXL_TAIL_NO_TARGETS {1, {0}, 0}

/* B: this rank's columns, col0: the global index of its first; groups: training runs may take
 * the columns in this many groups of ceil(B / groups) (0 or 1: all at once; see TxlRun); tail:
 * the adaptive softmax's tail targets per segment (TXL_TAIL_NOT_COUNTED: the worst case). */
typedef struct {
  int L_max, B, col0, mem_len, clamp_len, same_length, training, groups;
  TxlTailCap tail;
} TxlRunShape;

/* The column groups of a run of that shape: *groups of at most *group_cols columns (1 and B
 * unless a training run asks for more groups; never more groups than columns). */
void txl_run_groups(const TxlRunShape *s, int *groups, int *group_cols);
void txl_run_create(TxlRun *r, const TxlModel *m, const TxlRunShape *shape);
void txl_run_destroy(TxlRun *r, const TxlModel *m);
/* Forget the memory (start of a stream). */
void txl_run_reset_memory(TxlRun *r);
/* Makes column group g (< r->n_groups) current: r->B, r->col0 and r->mems are its own. */
void txl_run_use_group(const TxlModel *m, TxlRun *r, int g);
/* The memory of every layer as fp32 [n_layer, mem_len, cols, d], packed (a checkpoint's /mems on
 * this rank: every column group's columns in their places) on the host, from the run state (dst)
 * or into it (src). */
void txl_run_mems_to_host(const TxlModel *m, TxlRun *r, float *dst);
void txl_run_mems_to_device(const TxlModel *m, TxlRun *r, const float *src);
/* Bytes of device memory the run state holds. */
size_t txl_run_bytes(const TxlModel *m, const TxlRunShape *shape);
/* Of those, the adaptive softmax's tail logits (0 without tail clusters). */
size_t txl_run_tail_bytes(const TxlModel *m, const TxlRunShape *shape);
/* Ends the job when some target of the adaptive softmax found no slot in r's tail buffers since
 * r was made (TxlRun.ad_dropped: impossible while the caps are the measured bounds, so an internal
 * error). One read from the device: made where the losses are read. */
void txl_run_check_dropped(const TxlModel *m, const TxlRun *r);

/* The device inputs of a forward over L rows of the current column group: the tokens and targets
 * ([L, B], host; targets may be NULL) and the step of its dropout masks, uploaded (ops upload: the
 * host does not wait), so that a later txl_model_forward skips its own uploads (r->inputs_ready
 * counts them: one a call, taken by the next forward). A training step replayed as a CUDA graph
 * uploads the inputs of all its column groups this way, before the graph's launch. */
void txl_run_upload(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets, int L, int step);

/* Forward over one segment of L <= L_max rows whose tokens and targets ([L, B], host) are
 * copied in (unless txl_run_upload did); targets may be NULL (generation: logits only). Dropout is on when
 * dropout_on (keyed with `step`). When grad_scale != 0 the logits buffer ends holding
 * d(loss)/d(logits) * grad_scale, ready for txl_model_backward. Advances the memory.
 * Returns the SUM of the per-token losses of this rank's L*B tokens (0 without targets), read
 * back from the device; 0 when r->loss_out is set (the sum is then left in loss_out[r->group]). */
double txl_model_forward(TxlModel *m, TxlRun *r, const int32_t *tokens, const int32_t *targets,
                         int L, int step, int dropout_on, float grad_scale);
/* Told each time a slice [begin, end) of the gradient buffer (in floats) is final: every layer's
 * slice as soon as its backward is done (last layer first), then the parameters outside the
 * layers. The gradient all-reduce hangs on this to overlap the backward pass. */
typedef void (*TxlGradReady)(void *ctx, int64_t begin, int64_t end);

/* Backward of the last forward: adds every parameter's gradient into m->grad_buf, calling
 * ready (may be NULL) as slices become final. */
void txl_model_backward(TxlModel *m, TxlRun *r, TxlGradReady ready, void *ctx);

/* The input embedding's gradient as rows (the row-sparse reduction of the word embedding,
 * src/train/step.c): the gradient of E[tok[i]] from this segment is rows[i] * scale. */
typedef struct {
  const void *rows;   /* [n, d] act type, rows ld apart (r->dh after the embedding dropout's backward) */
  const int32_t *tok; /* [n] device (r->tokens) */
  int64_t n;
  int d, ld;
  float scale;
} TxlEmbedRows;

/* 1 when the input embedding is a plain lookup of word_emb (no adaptive input) that the output
 * layer shares (tie_weight): the one case where txl_model_backward_rows leaves rows. */
int txl_model_has_embed_rows(const TxlModel *m);
/* word_emb's slice of the gradient buffer, [0, *end) (the alignment gap after it included). */
int64_t txl_model_word_emb_end(const TxlModel *m);

/* txl_model_backward, except where txl_model_has_embed_rows: the input embedding's rows are not
 * added into word_emb's gradient but left in *rows (valid until the next forward), and word_emb's
 * slice is announced to `ready` as soon as the output layer's backward has made its dense part
 * final, before the layers' (so its reduction overlaps the whole backward pass). The caller adds
 * the rows (every rank's, in a fixed order) after the reduction. rows->n = 0: none left. */
void txl_model_backward_rows(TxlModel *m, TxlRun *r, TxlGradReady ready, void *ctx, TxlEmbedRows *rows);

/* log p(v | row) for every v of the vocabulary ([V] host) of row `row` (< L*B) of the last
 * forward (made without targets): log_softmax of the logits, or of the adaptive softmax. */
void txl_model_logprobs(TxlModel *m, TxlRun *r, int row, float *out);

/* The same_length mask's shift s of a segment of L query rows and K = M + L keys when mem_len
 * rows are kept (the original's tril(ones, -s)): query i sees no key j <= i - s, so none sees
 * more than mem_len keys: s = L - (K - mem_len) when K > mem_len, else L (nothing masked beyond
 * the causal mask). */
static inline int txl_attn_same_shift(int L, int K, int mem_len) {
  return K > mem_len ? L - (K - mem_len) : L;
}

/* FLOPs of one trained token (forward + backward), the estimate of docs/results.md, Estimating cost. */
double txl_model_flops_per_token(const TxlModel *m, int L, int mem_len);

#endif
