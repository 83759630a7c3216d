/* The double-precision reference of relative multi-head attention (Transformer-XL attn_type 0 and
 * the variants of ops.def: the math of kernels/ops.h), element by element, that the op test
 * (tests/ops/test_rel_attn.c: against the CPU op and finite differences) and the CUDA test
 * (tests/cuda/test_rel_attn.c: the error bounds of the kernels) share: the forward, the analytic
 * backward, and the backward on absolute values that bounds the terms of every gradient element.
 * Layouts (kernels/ops.h): q, vec, dvec [L,B,H,dh]; kv [K,B,2,H,dh]; r [K,H,dh]; u, vb [H,dh];
 * rows [B,H,L]; prob, drop factors [B,H,L,K] (K = M + L keys); rb [K,H] (attn_type 1's per-key
 * bias, NULL: none). The op's absent u, vb or r are zeros here: the same math. */
#ifndef TXL_TESTS_LIB_REF_REL_ATTN_H
#define TXL_TESTS_LIB_REF_REL_ATTN_H

#include <stdint.h>

#include "kernels/common/dropout.h"
#include "kernels/ops.h"

static inline int64_t q_at(const TxlAttnShape *s, int i, int c, int h) {
  return (((int64_t)i * s->B + c) * s->H + h) * s->dh;
}
static inline int64_t k_at(const TxlAttnShape *s, int j, int c, int h) {
  return ((((int64_t)j * s->B + c) * 2) * s->H + h) * s->dh;
}
static inline int64_t v_at(const TxlAttnShape *s, int j, int c, int h) {
  return k_at(s, j, c, h) + (int64_t)s->H * s->dh;
}
static inline int64_t r_at(const TxlAttnShape *s, int p, int h) { return ((int64_t)p * s->H + h) * s->dh; }
static inline int64_t row_at(const TxlAttnShape *s, int c, int h, int i) {
  return ((int64_t)c * s->H + h) * s->L + i;
}

/* Whether query i sees key j: not the future, and with same_length not too far back. */
static inline int attn_visible(const TxlAttnShape *s, int i, int j) {
  if (j > s->M + i) return 0;                             /* the future */
  if (s->same_length && j <= i - s->same_shift) return 0; /* too far back */
  return 1;
}

typedef struct {
  TxlAttnShape s;
  TxlDropout drop;
  int K;
  double *q, *kv, *r, *u, *vb; /* inputs (double copies of the float ones; FD perturbs them) */
  double *rb;                  /* [K, H] added to BD before the shift; NULL: none */
  double *dvec;                /* the gradient of vec (backward) */
  double *prob, *drop_factor;  /* forward: probability, dropatt factor (1 without dropatt) */
  double *vec;                 /* forward, when not NULL */
  /* forward, when not NULL: per row the log-sum-exp (-inf where no key is visible), the rounding
   * error bound of the fp32 scores, (2 dh + 4) u scale max_j sum_e |q+u||k_j| + |q+vb||r|, the
   * largest |score|, and whether any key is visible */
  double *lse, *serr, *sabs;
  int *any;
} RefAttn;

void ref_attn_forward(RefAttn *a);

/* The backward of the reference (after ref_attn_forward), added to dq, dkv, dr, du, dvb and,
 * when not NULL, drb [K, H].
 * absolute = 1: every input and intermediate replaced by its absolute value and differences by
 * sums: for every gradient element, the sum of the magnitudes of the terms that enter it (for
 * the error bounds). dD [B,H,L] (absolute only, else NULL): what an error dD_i of D_i = dvec_i .
 * vec_i alone makes of every gradient, the same sums with |dS_ij| = P_ij scale dD_i (nothing is
 * added to dv, which does not depend on D). */
void ref_attn_backward(double *dq, double *dkv, double *dr, double *du, double *dvb, double *drb,
                       const RefAttn *a, int absolute, const double *dD);

#endif
