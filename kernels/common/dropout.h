/* Dropout masks from Philox4x32-10, keyed by where the element lives, so that a mask is the
 * same on any rank count, on the CPU and the GPU, and after a resume.
 *
 *   key     = (seed, site)                    site: which dropout (the model's number)
 *   counter = (feature / 4, row, column, step) column: the GLOBAL batch column
 *   word    = output[feature % 4]
 *   keep    = (word >> 8) >= threshold,  threshold = floor(p * 2^24)
 *   kept values are multiplied by scale = (float)(1 / (1 - p)) (computed in double).
 *
 * The model numbers its sites, and documents their rows, columns and features, in
 * src/model/dropout_sites.h: the kernels take a site as a number and know no model. */
#ifndef TXL_KERNELS_DROPOUT_H
#define TXL_KERNELS_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "src/base/philox.h"

/* One dropout application: p = 0 means identity. */
typedef struct {
  float p;        /* drop probability in [0, 1) */
  uint32_t seed;  /* run seed */
  uint32_t site;  /* which dropout: part of the Philox key (the model's numbers) */
  uint32_t step;  /* training step (0-based update index), unless step_at is set */
  /* NULL, or where the step is in the backend's memory (the run's, uploaded with the tokens):
   * read by the kernel when it runs, so that a captured CUDA graph replays each step with its own
   * masks (run.cuda_graph) */
  const uint32_t *step_at;
} TxlDropout;

/* The step of the masks: *step_at when set, else step. */
static inline TXL_HD uint32_t txl_dropout_step(TxlDropout d) { return d.step_at ? *d.step_at : d.step; }

static inline TXL_HD uint32_t txl_dropout_threshold(float p) {
  return (uint32_t)floor((double)p * 16777216.0);
}

static inline TXL_HD float txl_dropout_scale(float p) { return (float)(1.0 / (1.0 - (double)p)); }

/* The four Philox words covering features [4*(feature/4), 4*(feature/4) + 4). */
static inline TXL_HD TxlPhilox4 txl_dropout_words(TxlDropout d, uint32_t row, uint32_t column,
                                                  uint32_t feature) {
  return txl_philox4x32_10(feature >> 2, row, column, txl_dropout_step(d), d.seed, d.site);
}

/* 1 when element (row, column, feature) is kept. */
static inline TXL_HD int txl_dropout_keep(TxlDropout d, uint32_t row, uint32_t column,
                                          uint32_t feature) {
  TxlPhilox4 w = txl_dropout_words(d, row, column, feature);
  return (w.v[feature & 3u] >> 8) >= txl_dropout_threshold(d.p);
}

#endif
