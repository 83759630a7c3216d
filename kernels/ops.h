/* The operations a Transformer-XL is made of, as one table of function pointers per backend.
 * The model (src/model) calls only these; it never knows which device runs them.
 *
 * Conventions for every op:
 *   - outputs first, then inputs, then sizes; gradient pointers are prefixed `d`;
 *   - gradients of PARAMETERS accumulate (+=); gradients of ACTIVATIONS overwrite (=),
 *     except where an op says "(+=, residual stream)";
 *   - tensors are row-major, time-major ([T, B, ...]); every pointer is device memory of the
 *     backend (host memory for the CPU backend);
 *   - no op allocates: scratch comes from a workspace whose size the backend reports.
 *
 * Storage types. A table stores activations in one type, `act` (TXL_F32, or TXL_BF16 for the
 * mixed-precision CUDA table); every op computes in fp32 after widening and rounds once when it
 * stores. In the signatures:
 *   - `void *` / `const void *` tensors are in the table's `act` type: activations, their
 *     gradients, and the GEMM operands (weights as the model's compute copy, see src/model);
 *   - `float *` tensors are fp32 whatever the table: parameters read by element-wise ops (biases,
 *     LayerNorm weights, u, v_b), parameter gradients, LayerNorm statistics, losses, the
 *     attention's saved statistics, Adam's state;
 *   - where one op serves both (a GEMM's C, the embedding backward's destination, add), a
 *     TxlDtype argument says which.
 * The CPU table is TXL_F32 only (an op asked for bf16 there ends the job as an internal error). */
#ifndef TXL_KERNELS_OPS_H
#define TXL_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/dropout.h"

/* Storage type of a tensor. */
typedef enum { TXL_F32 = 0, TXL_BF16 = 1 } TxlDtype;

/* Bytes of one element of type t. */
static inline size_t txl_dtype_size(TxlDtype t) { return t == TXL_BF16 ? 2 : 4; }

/* Shape of one relative-attention call. K = M + L keys: M memory rows, then the L current rows. */
typedef struct {
  int L;           /* query rows (current segment length)                         */
  int M;           /* memory rows before them                                      */
  int B;           /* batch columns on this rank                                   */
  int H;           /* heads                                                        */
  int dh;          /* head size                                                    */
  int col0;        /* global index of this rank's first column (dropout key)       */
  int same_length; /* 0: causal mask only; 1: also mask j <= i - same_shift         */
  int same_shift;  /* s in [0, L] (see src/model for how it follows from mem_len)   */
  float scale;     /* 1 / sqrt(dh)                                                 */
} TxlAttnShape;

typedef struct TxlOps {
  const char *name; /* "cpu", "cuda" or "cuda-bf16" */
  TxlDtype act;     /* storage type of activations (the `void *` tensors of the ops below) */

  /* ---- memory (device) ---------------------------------------------------------------- */
  void *(*alloc)(size_t bytes, const char *what); /* zero-filled; ends the job when out of memory */
  void (*free)(void *p);
  void (*copy)(void *dst, const void *src, size_t bytes);          /* device -> device */
  void (*to_device)(void *dst, const void *host_src, size_t bytes); /* host -> device   */
  void (*to_host)(void *host_dst, const void *src, size_t bytes);   /* device -> host   */
  void (*zero)(void *p, size_t bytes);
  /* dst = src rounded to the act type (a copy when act is TXL_F32).   dst, src [n] */
  void (*to_act)(void *dst, const float *src, int64_t n);

  /* ---- dense algebra ------------------------------------------------------------------- */
  /* C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, row-major, op(X) = X or X^T, fp32 sums.
   * A and B in the act type; C in c_type (the act type, or TXL_F32 for a parameter gradient). */
  void (*gemm)(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
               const void *B, int ldb, float beta, void *C, int ldc, TxlDtype c_type);
  /* x[r, :] = b for r < rows: a bias, before a gemm with beta = 1 adds the product to it
   * (one pass over x instead of a zeroing pass and an addition pass). x [rows, n], b [n] */
  void (*bias_fill)(void *x, const float *b, int64_t rows, int n);
  /* db += sum_r dy[r, :].                      db [n], dy [rows, n] */
  void (*bias_backward)(float *db, const void *dy, int64_t rows, int n);
  /* out = a + b, all three of type t (the act type or TXL_F32). out may alias a or b.   [n] */
  void (*add)(void *out, const void *a, const void *b, int64_t n, TxlDtype t);
  /* sum of squares of fp32 values (the gradients), accumulated in double in a fixed order
   * (deterministic). [n] */
  double (*sumsq)(const float *x, int64_t n);

  /* ---- embedding and positions --------------------------------------------------------- */
  /* out[t, :] = emb[tok[t], :] * scale (a row gather; emb is a table or an activation).
   * out [n, d], tok [n], emb [V, d] */
  void (*embedding_forward)(void *out, const int32_t *tok, const void *emb, float scale,
                            int64_t n, int d);
  /* demb[tok[t], :] += dout[t, :] * scale, deterministic order (a scatter-add); demb of type
   * demb_type (TXL_F32 for a parameter gradient, the act type for an activation). */
  void (*embedding_backward)(void *demb, TxlDtype demb_type, const void *dout, const int32_t *tok,
                             float scale, int64_t n, int d);
  /* R[p, :] for p < K, position pos = K-1-p, clamped to clamp_len when clamp_len > 0:
   * R[p, i] = sin(pos * f_i), R[p, d/2 + i] = cos(pos * f_i), f_i = 1 / 10000^(2i/d),
   * computed in double and rounded to float.    R [K, d], d even */
  void (*posemb_forward)(void *R, int K, int d, int clamp_len);

  /* ---- dropout ------------------------------------------------------------------------- */
  /* x[i, c, f] *= keep(i, col0 + c, f) * scale in place (see kernels/common/dropout.h).
   * The backward pass is the same call on the gradient.   x [rows, cols, feats] */
  void (*dropout)(void *x, int rows, int cols, int feats, int col0, TxlDropout d);

  /* ---- fused FFN hidden layer ----------------------------------------------------------- */
  /* a[i, c, f] = max(a[i, c, f] + b[f], 0) in place (a holds x W1 on entry); when drop.p > 0
   * also ad = dropout(a) (as the dropout op would make it from a copy); ad is not touched when
   * drop.p == 0.   a, ad [rows, cols, feats], b [feats] */
  void (*bias_relu_dropout_forward)(void *a, void *ad, const float *b, int rows, int cols,
                                    int feats, int col0, TxlDropout drop);
  /* dx = a > 0 ? dropout(dx) : 0 in place: the backward of the dropout then of the ReLU.
   * a is the ReLU output of the forward.   dx, a [rows, cols, feats] */
  void (*relu_dropout_backward)(void *dx, const void *a, int rows, int cols, int feats,
                                int col0, TxlDropout drop);

  /* ---- layer norm ---------------------------------------------------------------------- */
  /* out = (inp - mean) * rstd * w + b over the last dim; saves mean and rstd.
   * out, inp [n, d]; mean, rstd [n]; w, b [d] */
  void (*layernorm_forward)(void *out, float *mean, float *rstd, const void *inp,
                            const float *w, const float *b, int64_t n, int d, float eps);
  /* dinp += (residual stream), dw += , db += (parameters). dinp may be NULL: then only dw and db
   * are accumulated (rows whose input takes no gradient, such as the memory rows). */
  void (*layernorm_backward)(void *dinp, float *dw, float *db, const void *dout,
                             const void *inp, const float *w, const float *mean,
                             const float *rstd, int64_t n, int d);

  /* Residual then layer norm in one pass: res = x + y, out = LayerNorm(res) as above.
   * res, out, x, y [n, d]; mean, rstd [n]. res may alias x or y. */
  void (*add_layernorm_forward)(void *res, void *out, float *mean, float *rstd, const void *x,
                                const void *y, const float *w, const float *b, int64_t n, int d,
                                float eps);
  /* The backward of out = LayerNorm(x + dropout(y)) up to its two inputs: dinp = d(x + ...)
   * (OVERWRITTEN, not +=), dbranch = dropout(dinp) (= d y), dw += , db += . The rows are
   * (row i, column c) pairs, n = rows * cols, keyed as the dropout op.
   *   dinp, dbranch, dout, inp [rows, cols, d]; mean, rstd [rows * cols]; w [d] */
  void (*layernorm_backward_dropout)(void *dinp, void *dbranch, float *dw, float *db,
                                     const void *dout, const void *inp, const float *w,
                                     const float *mean, const float *rstd, int rows, int cols,
                                     int d, int col0, TxlDropout drop);

  /* ---- relative multi-head attention (Transformer-XL, attn_type 0) --------------------- */
  /* score[c,h,i,j] = ((q[i,c,h] + u[h]) . k[j,c,h] + (q[i,c,h] + vb[h]) . r[K-1-(M+i-j), h]) * scale
   * masked where j > M + i (and j <= i - same_shift when same_length), softmax over j,
   * dropatt on the probabilities (site drop.site, row i, column col0 + c, feature h*K + j),
   * vec[i,c,h] = sum_j dropatt(prob)[c,h,i,j] * v[j,c,h].
   * `saved` is what the forward keeps for the backward, rel_attn_saved_floats of it, in a layout
   * private to the backend (the CPU keeps the probabilities [B, H, L, K]; the CUDA backend only
   * the log-sum-exp of each score row [B, H, L], and recomputes the scores).
   *   vec  [L, B, H, dh]    q [L, B, H, dh]    kv [K, B, 2, H, dh] (k then v)    r [K, H, dh]
   *   u, vb [H, dh] (r_w_bias, r_r_bias)          work: rel_attn_workspace bytes */
  void (*rel_attn_forward)(void *vec, float *saved, const void *q, const void *kv,
                           const void *r, const float *u, const float *vb, TxlAttnShape s,
                           TxlDropout drop, void *work);
  /* dq, dkv, dr overwritten; du, dvb += (parameters). vec and saved as the forward left them.
   * Shapes as in the forward. */
  void (*rel_attn_backward)(void *dq, void *dkv, void *dr, float *du, float *dvb,
                            const void *dvec, const void *vec, const void *q, const void *kv,
                            const void *r, const float *u, const float *vb, const float *saved,
                            TxlAttnShape s, TxlDropout drop, void *work);
  /* Floats of `saved` for shapes up to (L, K, B, H). */
  size_t (*rel_attn_saved_floats)(int L, int K, int B, int H);
  /* Bytes of workspace the forward (backward = 0) or both calls (backward = 1) need for shapes
   * up to (L, K, B, H, dh). */
  size_t (*rel_attn_workspace)(int L, int K, int B, int H, int dh, int backward);

  /* ---- loss ---------------------------------------------------------------------------- */
  /* loss[t] = logsumexp(logits[t, :]) - logits[t, target[t]]  (computed with a max shift).
   * When grad_scale != 0, logits is overwritten with (softmax(logits) - onehot) * grad_scale.
   * logits [n, V], target [n], loss [n] */
  void (*xent_forward_backward)(void *logits, float *loss, const int32_t *target,
                                float grad_scale, int64_t n, int V);

  /* ---- optimizer ----------------------------------------------------------------------- */
  /* Adam (as torch.optim.Adam, no weight decay), on g' = g * grad_scale:
   *   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2;
   *   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),  t = step (1-based).
   * p, g, m, v [n] */
  void (*adam_update)(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                      float beta1, float beta2, float eps, int step, float grad_scale);
} TxlOps;

/* The CPU backend (kernels/cpu). Always available. */
const TxlOps *txl_ops_cpu(void);

#endif
