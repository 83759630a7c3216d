/* The argument checks of the relative-attention ops (kernels/ops.def) that both backends make, so
 * that both end the job on the same calls with the same message. C and C++, host only. */
#ifndef TXL_KERNELS_ATTN_CHECK_H
#define TXL_KERNELS_ATTN_CHECK_H

#include <stdint.h>

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif
#include "src/base/error.h"
#ifdef __cplusplus
}
#endif

/* The optional parts r, vb, rb come in the combinations of ops.def, and every row stride of s is
 * at least its rows' width (q: H dh, kv: 2 H dh, r: H dh): anything else is a bug of the caller. */
static inline void txl_attn_check_call(const TxlAttnShape *s, const void *r, const float *vb, const float *rb) {
  if (!r && (vb || rb)) txl_fatal("internal: rel_attn with vb or rb but no r");
  const int64_t hd = (int64_t)s->H * s->dh;
  if (s->ldq < hd || s->ldkv < 2 * hd || s->ldr < hd)
    txl_fatal("internal: rel_attn with row strides ldq %d, ldkv %d, ldr %d below their rows' widths %lld, %lld, %lld",
              s->ldq, s->ldkv, s->ldr, (long long)hd, (long long)(2 * hd), (long long)hd);
}

#endif
