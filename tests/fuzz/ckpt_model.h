/* The model of the checkpoint harness and its seed (make_ckpt_seed.c): the smallest shape that
 * still has every kind of tensor of a plain model (1 layer, width 4, a memory of 2 rows of 2
 * columns), so that the seed file stays small. */
#ifndef TXL_TESTS_FUZZ_CKPT_MODEL_H
#define TXL_TESTS_FUZZ_CKPT_MODEL_H

#include <stdio.h>
#include <string.h>

#include "src/checkpoint/checkpoint.h"
#include "src/config/config.h"
#include "src/model/params.h"

enum { FUZZ_CKPT_MEM_LEN = 2, FUZZ_CKPT_BATCH = 2 };

static inline void fuzz_ckpt_dims(TxlDims *d) {
  memset(d, 0, sizeof *d);
  d->n_token = 5;
  d->n_layer = 1;
  d->d_model = 4;
  d->n_head = 1;
  d->d_head = 2;
  d->d_inner = 4;
  d->untie_r = 0;
  d->tie_weight = 1;
  txl_dims_single_softmax(d);
}

/* Its config as txl-train stores it (txl_config_write_ini): malloc'd text, NULL when out of
 * memory. */
static inline char *fuzz_ckpt_config(void) {
  TxlDims dims;
  fuzz_ckpt_dims(&dims);
  TxlConfig cfg;
  txl_config_defaults(&cfg);
  cfg.n_token = dims.n_token;
  cfg.n_layer = dims.n_layer;
  cfg.d_model = dims.d_model;
  cfg.n_head = dims.n_head;
  cfg.d_head = dims.d_head;
  cfg.d_inner = dims.d_inner;
  cfg.mem_len = FUZZ_CKPT_MEM_LEN;
  cfg.batch_size = FUZZ_CKPT_BATCH;
  char *ini = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&ini, &len);
  if (!f) return NULL;
  txl_config_write_ini(&cfg, f, 0);
  fclose(f);
  return ini;
}

/* The training state stored with it. */
static inline void fuzz_ckpt_state(TxlCkptState *st) {
  memset(st, 0, sizeof *st);
  st->step = 3;
  st->tokens_seen = 96;
  st->data_pos = 12;
  st->epoch = 0;
  st->best_step = 2;
  st->mem_rows = 2;
  st->adam_t = 3;
  st->world_size = 1;
  st->seed = 1234;
  st->best_valid_loss = 1.5;
  st->lr = 2.5e-4;
  snprintf(st->run_id, sizeof st->run_id, "%s", "0123456789abcdef0123456789abcdef");
  snprintf(st->vocab_digest, sizeof st->vocab_digest, "%064d", 0);
}

#endif
