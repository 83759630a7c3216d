/* The config in the terms of src/model and src/optim: see config_map.h. */
#include "src/train/config_map.h"

#include <string.h>

#include "src/base/error.h"

void txl_model_spec_from_config(const TxlConfig *c, int n_token, TxlModelSpec *spec) {
  memset(spec, 0, sizeof *spec);
  spec->dims.n_token = n_token;
  spec->dims.n_layer = c->n_layer;
  spec->dims.d_model = c->d_model;
  spec->dims.n_head = c->n_head;
  spec->dims.d_head = c->d_head;
  spec->dims.d_inner = c->d_inner;
  spec->dims.untie_r = c->untie_r;
  spec->dims.attn_type = c->attn_type; /* config.def's choices are TxlAttnType's list */
  /* the original's max_klen = tgt_len + ext_len + mem_len (no ext_len here): attn_type 1 and 3's rows */
  spec->dims.max_klen = txl_attn_learned_table(spec->dims.attn_type) ? c->tgt_len + c->mem_len : 0;
  spec->dims.tie_weight = c->tie_weight;
  spec->dropout = (float)c->dropout;
  spec->dropatt = (float)c->dropatt;
  spec->pre_lnorm = c->pre_lnorm;
  spec->ln_eps = TXL_LAYER_NORM_EPS;
  spec->seed = (uint32_t)c->seed;
  int cut[TXL_CFG_MAX_CUTOFFS];
  char err[512];
  const int n = txl_config_cutoffs(c, n_token, cut, err, sizeof err);
  if (n < 0) txl_fatal_all("%s: %s", *c->corpus ? c->corpus : "the synthetic vocabulary", err);
  spec->dims.n_clusters = n;
  spec->dims.cut[0] = 0;
  for (int i = 0; i < n; i++) spec->dims.cut[i + 1] = cut[i];
  spec->dims.cut[n + 1] = n_token;
  spec->dims.div_val = c->div_val;
  spec->dims.d_embed = c->d_embed > 0 ? c->d_embed : c->d_model;
  spec->dims.tie_projs = c->tie_projs;
}

TxlLossScaleMode txl_trainer_loss_scale_mode(const TxlConfig *c) {
  switch (c->loss_scale) {
  case TXL_LSCALE_OFF: return TXL_LOSS_SCALE_OFF;
  case TXL_LSCALE_STATIC: return TXL_LOSS_SCALE_STATIC;
  case TXL_LSCALE_DYNAMIC: return TXL_LOSS_SCALE_DYNAMIC;
  default: return c->precision == TXL_PRECISION_FP16 ? TXL_LOSS_SCALE_DYNAMIC : TXL_LOSS_SCALE_OFF;
  }
}

TxlOptimKind txl_optim_kind_of(int optim) {
  switch (optim) {
  case TXL_OPTIM_ADAM: return TXL_OPTIMIZER_ADAM;
  case TXL_OPTIM_LAMB: return TXL_OPTIMIZER_LAMB;
  case TXL_OPTIM_SGD: return TXL_OPTIMIZER_SGD;
  }
  txl_fatal("internal: train.optim %d", optim);
}

TxlSchedKind txl_sched_kind_of(int scheduler) {
  switch (scheduler) {
  case TXL_SCHEDULER_COSINE: return TXL_SCHED_COSINE;
  case TXL_SCHEDULER_INV_SQRT: return TXL_SCHED_INV_SQRT;
  case TXL_SCHEDULER_CONSTANT: return TXL_SCHED_CONSTANT;
  case TXL_SCHEDULER_DEV_PERF: return TXL_SCHED_DEV_PERF;
  }
  txl_fatal("internal: train.scheduler %d", scheduler);
}

void txl_schedule_from_config(const TxlConfig *c, TxlSchedule *s) {
  s->kind = txl_sched_kind_of(c->scheduler);
  s->lr = c->lr;
  s->eta_min = c->eta_min;
  s->warmup_step = c->warmup_step;
  s->max_step = c->max_step;
  s->decay_rate = c->decay_rate;
  s->patience = c->patience;
  s->lr_min = c->lr_min;
}

TxlDeviceSpec txl_device_spec_of(const TxlConfig *c) {
  TxlDeviceSpec s = {TXL_BACKEND_CPU, TXL_BACKEND_FP32, c->threads, c->attn_impl == TXL_ATTN_IMPL_FUSED};
  switch (c->device) {
  case TXL_DEVICE_CPU: s.device = TXL_BACKEND_CPU; break;
  case TXL_DEVICE_CUDA: s.device = TXL_BACKEND_CUDA; break;
  case TXL_DEVICE_AUTO: s.device = TXL_BACKEND_AUTO; break;
  default: txl_fatal("internal: run.device %d", c->device);
  }
  switch (c->precision) {
  case TXL_PRECISION_FP32: s.precision = TXL_BACKEND_FP32; break;
  case TXL_PRECISION_TF32: s.precision = TXL_BACKEND_TF32; break;
  case TXL_PRECISION_BF16: s.precision = TXL_BACKEND_BF16; break;
  case TXL_PRECISION_FP16: s.precision = TXL_BACKEND_FP16; break;
  default: txl_fatal("internal: run.precision %d", c->precision);
  }
  return s;
}
