/* What the config says, in the terms of the layers below it that know no config (src/model,
 * src/optim, src/device): the model's spec, the optimizer's and the schedule's kinds, the loss
 * scaling's mode, the device's spec.
 * Included, instead of trainer.h, by what needs only these (estimate, check, graph_step, the
 * tools). */
#ifndef TXL_TRAIN_CONFIG_MAP_H
#define TXL_TRAIN_CONFIG_MAP_H

#include "src/config/config.h"
#include "src/device/backend.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "src/optim/loss_scale.h"
#include "src/optim/schedule.h"

/* The model spec a config describes (vocabulary n_token). */
void txl_model_spec_from_config(const TxlConfig *c, int n_token, TxlModelSpec *spec);
/* The learning-rate schedule's settings (kind, rates, steps, the plateau's patience); its state
 * (the plateau's) is left as it was: txl_schedule_plateau_init makes it. */
void txl_schedule_from_config(const TxlConfig *c, TxlSchedule *s);
/* train.loss_scale as a mode; auto: dynamic where activations are stored in a 16-bit float type
 * whose range loses small gradients (run.precision = fp16: 5 exponent bits), else off (bf16 has
 * fp32's exponent range). */
TxlLossScaleMode txl_trainer_loss_scale_mode(const TxlConfig *c);
/* train.optim (TXL_OPTIM_*) as the optimizer's kind. */
TxlOptimKind txl_optim_kind_of(int optim);
/* train.scheduler (TXL_SCHEDULER_*) as the schedule's kind. */
TxlSchedKind txl_sched_kind_of(int scheduler);

/* run.device, run.precision and run.threads as the backend's spec. */
TxlDeviceSpec txl_device_spec_of(const TxlConfig *c);
/* txl_backend_resolve_device on c's run.device: auto becomes cpu or cuda in c; the note and the
 * return value are that function's. Inline: src/train's library does not link a backend (each
 * program links the one it runs on). collective: all ranks */
static inline int txl_config_resolve_device(TxlConfig *c, const TxlDist *d, char *note, size_t n) {
  TxlDeviceSpec s = txl_device_spec_of(c);
  const int said = txl_backend_resolve_device(&s.device, d, note, n);
  if (s.device != TXL_BACKEND_AUTO) c->device = s.device == TXL_BACKEND_CUDA ? TXL_DEVICE_CUDA : TXL_DEVICE_CPU;
  return said;
}

#endif
