/* The config in the terms of src/optim: see config_map.h. */
#include "src/train/config_map.h"

#include "src/base/error.h"

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
