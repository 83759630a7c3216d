/* The optimizer (train.optim: Adam, LAMB or SGD with momentum) with global gradient-norm clipping
 * over the model's one gradient buffer. Its state is the same for all three: m (Adam's and LAMB's
 * first moment, SGD's momentum buffer), v (the second moment; SGD leaves it zero) and t. */
#ifndef TXL_OPTIM_ADAM_H
#define TXL_OPTIM_ADAM_H

#include <stdint.h>

#include "kernels/ops.h"
#include "src/model/params.h"
#include "src/optim/shard.h"

/* Which optimizer (the trainer maps train.optim onto it: src/train/config_map.h). */
typedef enum { TXL_OPTIMIZER_ADAM, TXL_OPTIMIZER_LAMB, TXL_OPTIMIZER_SGD } TxlOptimKind;

typedef struct {
  const TxlOps *ops;
  int64_t n;      /* floats in the parameter buffer */
  int64_t lo, hi; /* the parameters whose state this optimizer holds and updates: [lo, hi); [0, n)
                     unless sharded (txl_optim_shard) */
  float *m, *v;   /* [hi - lo] device: first and second moments of params[lo, hi) */
  int part0, part1, n_parts; /* sharded: the gradient norm's parts of [lo, hi), of n_parts */
  double *parts;  /* sharded: [n_parts] device, the norm's part sums (txl_optim_clip_parts) */
  int t;          /* updates done */
  float beta1, beta2, eps, clip;
  TxlOptimKind kind; /* TXL_OPTIMIZER_ADAM (txl_adam_create's), _LAMB or _SGD (txl_optim_set_kind) */
  float momentum;     /* sgd */
  float weight_decay; /* lamb */
  const TxlParamTable *table; /* lamb: the tensors whose trust ratios are taken */
  TxlGradClip *rec;   /* [1] device: the last step's norm and clip factor (txl_optim_clip) */
  TxlOptimStep *step_dev; /* [1] device: the next fused update's constants (txl_optim_prepare) */
  TxlOptimStep step_host; /* the same, on the host */
} TxlAdam;

void txl_adam_create(TxlAdam *a, const TxlOps *ops, int64_t n, float beta1, float beta2, float eps,
                     float clip);
void txl_adam_destroy(TxlAdam *a);
/* Makes a (Adam after txl_adam_create) the optimizer `kind`; LAMB takes
 * one trust ratio per tensor of `table` (the parameter layout; kept by pointer). */
void txl_optim_set_kind(TxlAdam *a, TxlOptimKind kind, float momentum, float weight_decay, const TxlParamTable *table);

/* ZeRO-1: makes a (just made by txl_adam_create, Adam or SGD) the optimizer of rank `rank`'s slice
 * of plan (src/optim/shard.h) alone: its moments shrink to the slice, txl_optim_apply updates the
 * slice alone, and the clipping is taken in parts (txl_optim_clip_parts, summed across the ranks
 * by the caller, then txl_optim_clip_record). */
void txl_optim_shard(TxlAdam *a, const TxlShardPlan *plan, int rank);
static inline int txl_optim_sharded(const TxlAdam *a) { return a->parts != NULL; }
/* Sharded: a->parts = this rank's part sums of the squares of grad (laid out by t; 0 for every
 * other part). After the parts are summed across ranks (exact: each part is one rank's, the
 * others add 0), txl_optim_clip_record makes a->rec from them as txl_optim_clip would from the
 * whole summed gradient: the same bits. Nothing waits. */
void txl_optim_clip_parts(TxlAdam *a, const float *grad, const TxlParamTable *t);
void txl_optim_clip_record(TxlAdam *a, double loss_scale);

/* L2 norm of the gradient buffer laid out by t (accumulated in double): of its tensors, the
 * padding left out; on the CPU the bits of the norm of the packed view (ops->sumsq_segments). */
double txl_grad_norm(const TxlOps *ops, const float *grad, const TxlParamTable *t);

/* The training step's clipping, left on the device: the norm of grad (laid out by t, the gradient
 * times loss_scale) and the factor the fused step takes into a->rec (kernels/common/clip.h; a
 * non-finite norm halts the fused updates until txl_optim_reset_clip). Nothing waits. */
void txl_optim_clip(TxlAdam *a, const float *grad, const TxlParamTable *t, double loss_scale);
/* The record to the host (waits for the device), and back to its state after create (zeros). */
void txl_optim_read_clip(const TxlAdam *a, TxlGradClip *out);
void txl_optim_reset_clip(TxlAdam *a);

/* One update with learning rate lr: clips the gradient to norm `clip` as
 * torch.nn.utils.clip_grad_norm_ (coef = clip / (norm + 1e-6), applied when < 1), then the
 * optimizer a->kind. grad holds the gradient times loss_scale (a power of two; 1: none), `norm`
 * is the unscaled gradient's L2 norm (txl_grad_norm / loss_scale); the optimizer takes the
 * gradient times coef / loss_scale (a power-of-two factor: exact). LAMB overwrites grad with its
 * direction (the gradient is not needed after the update). The unfused passes (the reference of
 * txl_adam_step_fused); the caller refreshes the weights' compute copy and zeroes grad itself. */
void txl_adam_step(TxlAdam *a, float *params, float *grad, double norm, double loss_scale, float lr);

/* txl_adam_step in the fused passes (kernels/ops.def: adam_fused, sgd_fused, LAMB's axpy_fused),
 * with the clip factor of a->rec (txl_optim_clip of this gradient) and the same bits in params
 * and the state as txl_adam_step with that record's norm, and besides: params_act, the weights'
 * compute copy in the table's act type (TxlModel.param_act; params itself when that is fp32),
 * refreshed as to_act would, and grad left all zeros (the next step's accumulation can start
 * without a zeroing pass). Over the parameter buffer: Adam and SGD one pass, reading the update's
 * constants and the factor on the device (the host does not wait); LAMB its moments, the
 * per-tensor norms (on the host: LAMB waits for the device), then one pass per tensor. Halted
 * (a->rec's factor a NaN): nothing is written, grad included.
 * txl_adam_step_fused = txl_optim_prepare, then txl_optim_apply: prepare counts the update (t) and
 * uploads its constants (lr: the rate) to a->step_dev; apply is the device's part alone, which a
 * CUDA graph can capture once and replay after each prepare. */
void txl_adam_step_fused(TxlAdam *a, float *params, void *params_act, float *grad, float lr);
void txl_optim_prepare(TxlAdam *a, float lr);
void txl_optim_apply(TxlAdam *a, float *params, void *params_act, float *grad);

/* LAMB (src/optim/lamb.c): the moments, then per tensor of a->table the trust ratio
 * ||p|| / ||u|| (1 when either is 0) and p -= lr * ratio * u, on the gradient scaled by coef.
 * params_act NULL: that step by axpy (grad left holding u); else by axpy_fused, which also
 * refreshes params_act (the compute copy, as txl_adam_step_fused's) and zeroes grad. */
void txl_lamb_update(TxlAdam *a, float *params, void *params_act, float *grad, float coef, float lr);

#endif
