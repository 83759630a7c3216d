/* The model of the checkpoint harness and its seed (make_ckpt_seed.c): the smallest shape that
 * still has every kind of tensor of a plain model (1 layer, width 4, a memory of 2 rows of 2
 * columns), so that the seed file stays small. */
#ifndef TXL_TESTS_FUZZ_CKPT_MODEL_H
#define TXL_TESTS_FUZZ_CKPT_MODEL_H

#include <string.h>

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

#endif
