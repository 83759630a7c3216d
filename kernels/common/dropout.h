/* Dropout masks from Philox4x32-10, keyed by where the element lives, so that a mask is the
 * same on any rank count, on the CPU and the GPU, and after a resume.
 *
 *   key     = (seed, site)                    site: which dropout in the model (TXL_SITE_*)
 *   counter = (feature / 4, row, column, step) column: the GLOBAL batch column
 *   word    = output[feature % 4]
 *   keep    = (word >> 8) >= threshold,  threshold = floor(p * 2^24)
 *   kept values are multiplied by scale = (float)(1 / (1 - p)) (computed in double).
 *
 * Rows, columns and features per site are documented where the site is used (src/model). */
#ifndef TXL_KERNELS_DROPOUT_H
#define TXL_KERNELS_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "kernels/common/philox.h"

/* Which dropout in the model a mask belongs to: part of the Philox key. */
enum {
  TXL_SITE_EMBED = 0,    /* word embedding output   [L rows, columns, d_model]       */
  TXL_SITE_POS = 1,      /* relative position R     [K rows, column 0, d_model]      */
  TXL_SITE_OUTPUT = 2,   /* last layer's output     [L rows, columns, d_model]       */
  TXL_SITE_LAYER0 = 16,  /* layer l uses TXL_SITE_LAYER0 + 16 * l + a TXL_LSITE_*     */
};

/* Dropouts inside a layer (the `which` of txl_layer_site). */
enum {
  TXL_LSITE_ATTN_PROB = 0,  /* dropatt on probs      [L rows (query i), columns, H*K (h*K + j)] */
  TXL_LSITE_ATTN_OUT = 1,   /* attention output      [L rows, columns, d_model]       */
  TXL_LSITE_FF_HIDDEN = 2,  /* FFN hidden after ReLU [L rows, columns, d_inner]       */
  TXL_LSITE_FF_OUT = 3,     /* FFN output            [L rows, columns, d_model]       */
};

static inline TXL_HD uint32_t txl_layer_site(int layer, int which) {
  return (uint32_t)(TXL_SITE_LAYER0 + 16 * layer + which);
}

/* One dropout application: p = 0 means identity. */
typedef struct {
  float p;        /* drop probability in [0, 1) */
  uint32_t seed;  /* run seed */
  uint32_t site;  /* TXL_SITE_* (with txl_layer_site for per-layer sites) */
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
