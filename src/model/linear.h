/* Linear layers as named backend GEMMs, forward and backward (private to src/model). Thin
 * inline wrappers: each is exactly one gemm, gemm_bias or gemm_wgrad_bias of m's op table.
 * n rows of x; `in` / `out` features; activations in the table's act type, parameter
 * gradients fp32. Every activation lies in m's padded rows (x's rows txl_model_ld(m, in) apart,
 * y's txl_model_ld(m, out), model.h) unless a call says otherwise. Two weight layouts, both with
 * rows ldw apart (the weight's padded rows, txl_model_ld; or a column block of a wider matrix,
 * such as W_q or W_kv inside W_qkv):
 *   txl_linear_*    y = x W,     W [in, out], ldw >= out;
 *   txl_linear_t_*  y = s x W^T, W [out, in], ldw >= in (embedding-shaped: the output layers,
 *                                the adaptive projections); y's rows ldy apart (ldy > the padded
 *                                out: a column block of a wider activation, the adaptive head). */
#ifndef TXL_MODEL_LINEAR_H
#define TXL_MODEL_LINEAR_H

#include "src/model/model.h"

/* y = x W.   y [n, out], x [n, in] */
static inline void txl_linear_forward(const TxlModel *m, void *y, const void *x, const void *w, int64_t n, int in,
                                      int out, int ldw) {
  const TxlOps *o = m->ops;
  o->gemm(0, 0, (int)n, out, in, 1.0f, x, txl_model_ld(m, in), w, ldw, 0.0f, y, txl_model_ld(m, out), o->act);
}
/* y = x W + b, or y = max(x W + b, 0) when relu (one GEMM with a fused epilogue).
 * b [out] in the act type (txl_model_w of the fp32 bias), W [in, out] */
static inline void txl_linear_bias_forward(const TxlModel *m, void *y, const void *x, const void *w, int ldw,
                                           const void *b, int relu, int64_t n, int in, int out) {
  m->ops->gemm_bias(0, 0, (int)n, out, in, x, txl_model_ld(m, in), w, ldw, b, relu, y, txl_model_ld(m, out));
}
/* dW += x^T dy.   dW [in, out] fp32 (rows ldw apart), x [n, in], dy [n, out] */
static inline void txl_linear_backward_w(const TxlModel *m, float *dw, const void *x, const void *dy, int64_t n,
                                         int in, int out, int ldw) {
  m->ops->gemm(1, 0, in, out, (int)n, 1.0f, x, txl_model_ld(m, in), dy, txl_model_ld(m, out), 1.0f, dw, ldw, TXL_F32);
}
/* dW += x^T dy and db += the column sums of dy (one GEMM with a fused bias-gradient epilogue).
 * dW [in, out] fp32, db [out] fp32, x [n, in], dy [n, out] */
static inline void txl_linear_bias_backward_w(const TxlModel *m, float *dw, int ldw, float *db, const void *x,
                                              const void *dy, int64_t n, int in, int out) {
  m->ops->gemm_wgrad_bias(1, 0, in, out, (int)n, x, txl_model_ld(m, in), dy, txl_model_ld(m, out), dw, ldw, db, 0);
}
/* dx = dy W^T + beta dx (beta 0: overwrite; 1: add into the residual stream).   dx [n, in] */
static inline void txl_linear_backward_x(const TxlModel *m, void *dx, float beta, const void *dy, const void *w,
                                         int64_t n, int in, int out, int ldw) {
  const TxlOps *o = m->ops;
  o->gemm(0, 1, (int)n, in, out, 1.0f, dy, txl_model_ld(m, out), w, ldw, beta, dx, txl_model_ld(m, in), o->act);
}
/* y = s x W^T + beta y.   y [n, out] (rows ldy apart), x [n, in], W [out, in] */
static inline void txl_linear_t_forward(const TxlModel *m, void *y, int ldy, float beta, float s, const void *x,
                                        const void *w, int ldw, int64_t n, int in, int out) {
  const TxlOps *o = m->ops;
  o->gemm(0, 1, (int)n, out, in, s, x, txl_model_ld(m, in), w, ldw, beta, y, ldy, o->act);
}
/* y = x W^T + b (one GEMM with a fused epilogue).   b [out] in the act type, y [n, out] (rows ldy
 * apart) */
static inline void txl_linear_t_bias_forward(const TxlModel *m, void *y, int ldy, const void *x, const void *w,
                                             int ldw, const void *b, int64_t n, int in, int out) {
  m->ops->gemm_bias(0, 1, (int)n, out, in, x, txl_model_ld(m, in), w, ldw, b, 0, y, ldy);
}
/* dW += s dy^T x.   dW [out, in] fp32, dy [n, out] (rows ldy apart), x [n, in] */
static inline void txl_linear_t_backward_w(const TxlModel *m, float *dw, int ldw, float s, const void *dy, int ldy,
                                           const void *x, int64_t n, int in, int out) {
  m->ops->gemm(1, 0, out, in, (int)n, s, dy, ldy, x, txl_model_ld(m, in), 1.0f, dw, ldw, TXL_F32);
}
/* dW += dy^T x and db += the column sums of dy (one GEMM with a fused bias-gradient epilogue).
 * dW [out, in] fp32, db [out] fp32, dy [n, out], x [n, in] */
static inline void txl_linear_t_bias_backward_w(const TxlModel *m, float *dw, int ldw, float *db, const void *dy,
                                                const void *x, int64_t n, int in, int out) {
  m->ops->gemm_wgrad_bias(1, 0, out, in, (int)n, dy, txl_model_ld(m, out), x, txl_model_ld(m, in), dw, ldw, db, 1);
}
/* dx = s dy W + beta dx.   dx [n, in], dy [n, out] (rows ldy apart), W [out, in] */
static inline void txl_linear_t_backward_x(const TxlModel *m, void *dx, float beta, float s, const void *dy, int ldy,
                                           const void *w, int ldw, int64_t n, int in, int out) {
  const TxlOps *o = m->ops;
  o->gemm(0, 0, (int)n, in, out, s, dy, ldy, w, ldw, beta, dx, txl_model_ld(m, in), o->act);
}

#endif
