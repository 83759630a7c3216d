/* The model's dropout sites: the number of each dropout, which is part of its masks' Philox key
 * (kernels/common/dropout.h: key = (seed, site)), so these numbers fix the masks of every run and
 * of every checkpoint resumed; rows, columns and features of each as the masks are drawn. */
#ifndef TXL_MODEL_DROPOUT_SITES_H
#define TXL_MODEL_DROPOUT_SITES_H

#include <stdint.h>

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

static inline uint32_t txl_layer_site(int layer, int which) {
  return (uint32_t)(TXL_SITE_LAYER0 + 16 * layer + which);
}

#endif
