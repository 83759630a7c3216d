/* Relative multi-head attention of Transformer-XL (attn_type 0, and the original's variants 1,
 * 2 and 3 through the optional parts of ops.def): the products on cuBLAS
 * strided-batched GEMMs (tensor cores in the tf32 and bf16 modes), the relative shift, masks,
 * softmax and dropatt in one row kernel per direction. The CUDA counterpart of
 * kernels/cpu/rel_attn.c (same math, masks and dropatt masks; see kernels/ops.def). Per column
 * c, head h, query i and key j (K = M + L keys):
 *   s_ij  = AC_ij + BD_i,p,   AC = scale (q + u) k^T,  BD = scale (q + vb) r^T,  p = L-1-i+j
 *   visible: lo(i) <= j <= hi(i),  hi(i) = M + i,  lo(i) = same_length ? max(0, i-same_shift+1) : 0
 *   P_ij  = exp(s_ij - lse_i) over the visible j,  lse_i = log sum_j exp(s_ij)
 *   P~_ij = P_ij * keep_ij * dscale  (dropatt: row i, column col0 + c, feature h*K + j)
 *   vec_i = sum_j P~_ij v_j
 * The relative shift is a gather (BD's row i read from column L-1-i on), so BD is one GEMM per
 * head over all B L query rows: r does not depend on the column.
 *
 * Layouts. The model's tensors (q [L, B, H, dh], kv [K, B, 2, H, dh], r [K, H, dh], their rows
 * ldq, ldkv, ldr apart: kernels/ops.h) give no uniform stride between the (h, c) products, and
 * leading dimensions such as H dh = 410 are off cuBLAS's aligned path. So the operands are first
 * gathered, per head and column, into the workspace (and the gradients scattered back; the gaps
 * between the rows neither read nor written) with the head size padded to dhp (a multiple of 8,
 * zeros beyond dh: the padded products add exact zeros) and score rows padded to Kp (a multiple
 * of 8):
 *   qu, qv [H, B, L, dhp] (q + u, q + vb, rounded once to the act type)   kt, vt [H, B, K, dhp]
 *   rt [H, K, dhp]        AC, BD, dP~ [H, B, L, Kp] fp32                   P~, dS, dBD [H, B, L, Kp] act
 * Every leading dimension and batch stride is then a multiple of 8 elements, and every buffer
 * starts 256-byte aligned.
 *
 * Forward: gather; AC (batch H B: [L, dhp] x [K, dhp]^T) and BD (batch H: [B L, dhp] x
 * [K, dhp]^T), both with alpha = scale; the row kernel (one warp per score row): the visible
 * scores, their max and sum (online, per lane, then a fixed butterfly), lse into `saved`
 * [B, H, L], P~ to the workspace; P~ v (batch H B: [L, K] x [K, dhp]); vec scattered back.
 * Backward (the forward's lse only is kept; AC and BD are recomputed by the same GEMMs, so the
 * same bits): dP~ = dvec v^T; the row kernel: P, P~ (again), D_i = sum_j P~_ij dP~_ij (fp32, from
 * the fp32 dP~), dS_ij = P_ij (keep dscale dP~_ij - D_i), and dBD, dS shifted back to the
 * positions (zeros where no key maps); then dv = P~^T dvec, dq = scale (dS k + dBD r),
 * dk = scale dS^T (q + u), dr = scale dBD^T (q + vb) (one GEMM per head, summing all B L rows),
 * every gradient GEMM writing fp32; a scatter kernel adds the two halves of dq and rounds each
 * gradient once to the act type; du += and dvb += the column sums of the fp32 halves of dq.
 * Only O(L K) work (the row kernels) runs on the CUDA cores; all O(L K dh) work is in the GEMMs
 * (txl_cuda_rel_attn_cost counts both).
 *
 * Determinism: no atomics. cuBLAS gives the same bits for the same call on one architecture
 * (kernels/emu/README.md for what the emulator shows), the row kernels reduce in a fixed
 * butterfly, and the column sums of du / dvb in a fixed order of row groups.
 *
 * Precision (what the parity test's bounds count, tests/cuda/test_rel_attn.c): fp32 table,
 * exact fp32 GEMMs: every product in fp32, as the CPU. TF32 (txl_cuda_set_gemm_math): the GEMM
 * operands are rounded to 10-bit mantissas inside the tensor cores. bf16 table: q + u, q + vb,
 * P~ and dS, dBD are rounded to bf16 once (they are GEMM operands); AC, BD, dP~, the gradient
 * GEMMs' results and every sum are fp32; each output rounded once when stored. fp16 table: the
 * same roundings to IEEE fp16 (11-bit significand, range 2^-24 .. 65504).
 *
 * Rows without any visible key (only same_length with same_shift = 0 and M = 0): the CPU gives
 * them probabilities 0, so vec = 0 and zero gradients; so does this code (lse = -inf, every P 0).
 *
 * The optional parts (ops.def; NULL: absent): without u or vb nothing is added to q in the
 * gathers; without r there is no BD term at all (attn_type 2 and 3: the rt gather, the BD GEMM,
 * the dBD buffer and its two GEMMs, dr and the dq half are skipped); Shaw's per-key bias rb [K, H]
 * (attn_type 1) is added, times the scale, in the row kernels (s_ij += scale rb[p, h]), and its
 * gradient drb[p, h] = scale sum over (c, i) of dBD[h, c, i, p] is a column sum of the dBD the
 * backward row kernel writes anyway (one thread per (h, p), rows in order: deterministic). */
#include <math.h>

#include "kernels/attn_check.h"
#include "kernels/common/bf16.h"
#include "kernels/common/dropout.h"
#include "kernels/cuda/cost.h"
#include "kernels/cuda/act.h"
#include "kernels/cuda/rel_attn_fused.h"

namespace {

TxlAttnImpl g_attn_impl = TXL_ATTN_GEMM; /* txl_cuda_set_attn_impl */

/* Everything a kernel needs to know about the call (by value). */
struct Geo {
  int L, M, K, B, H, dh;
  int ldq, ldkv, ldr; /* the row strides of the model's tensors (TxlAttnShape) */
  int dhp, Kp; /* dh and K rounded up to multiples of 8 */
  int col0, same_length, same_shift;
  float scale;
  int dropout;        /* 1 when dropatt applies (p > 0) */
  uint32_t threshold; /* txl_dropout_threshold(p)       */
  float dscale;       /* txl_dropout_scale(p)           */
  TxlDropout drop;
  int has_bd;         /* r given: the BD term            */
  const float *rb;    /* [K, H] per-key bias, or nullptr */
};

int round8(int n) { return (n + 7) / 8 * 8; }
size_t round256(size_t n) { return (n + 255) / 256 * 256; }

/* The workspace of one call: byte offsets of its buffers (each 256-byte aligned), from the shapes
 * alone, so that txl_cuda_rel_attn_workspace, the calls and the cost count agree. */
struct Plan {
  size_t qu, qv, kt, vt, rt, ac, bd, pd; /* forward (the backward too)                     */
  size_t o;                              /* forward: P~ v [H, B, L, dhp]; backward: dvec^T */
  size_t dp, ds, dbd, dqu, dqv, dkt, dvt, drt; /* backward only                            */
  size_t bytes;
};

Plan make_plan(int L, int K, int B, int H, int dh, size_t act, int backward) {
  const size_t dhp = (size_t)round8(dh), Kp = (size_t)round8(K);
  const size_t nq = (size_t)H * B * L * dhp, nk = (size_t)H * B * K * dhp, nr = (size_t)H * K * dhp;
  const size_t ns = (size_t)H * B * L * Kp;
  Plan p = {};
  size_t at = 0;
  auto take = [&at](size_t bytes) {
    const size_t here = at;
    at += round256(bytes);
    return here;
  };
  p.qu = take(nq * act);
  p.qv = take(nq * act);
  p.kt = take(nk * act);
  p.vt = take(nk * act);
  p.rt = take(nr * act);
  p.ac = take(ns * 4);
  p.bd = take(ns * 4);
  p.pd = take(ns * act);
  p.o = take(nq * act);
  if (backward) {
    p.dp = take(ns * 4);
    p.ds = take(ns * act);
    p.dbd = take(ns * act);
    p.dqu = take(nq * 4);
    p.dqv = take(nq * 4);
    p.dkt = take(nk * 4);
    p.dvt = take(nk * 4);
    p.drt = take(nr * 4);
  }
  p.bytes = at;
  return p;
}

Geo make_geo(const TxlAttnShape &s, const TxlDropout &drop, int has_bd, const float *rb) {
  Geo g;
  g.has_bd = has_bd;
  g.rb = rb;
  g.L = s.L;
  g.M = s.M;
  g.K = s.M + s.L;
  g.B = s.B;
  g.H = s.H;
  g.dh = s.dh;
  g.ldq = s.ldq;
  g.ldkv = s.ldkv;
  g.ldr = s.ldr;
  g.dhp = round8(s.dh);
  g.Kp = round8(g.K);
  g.col0 = s.col0;
  g.same_length = s.same_length;
  g.same_shift = s.same_shift;
  g.scale = s.scale;
  g.dropout = drop.p > 0.0f;
  g.threshold = txl_dropout_threshold(drop.p);
  g.dscale = txl_dropout_scale(drop.p);
  g.drop = drop;
  return g;
}

/* ---- gathers and scatters between the model's layouts and the per-head ones --------------- */

/* Element t of an [H, nb, X, width] walk: its head, column, row, feature and the (h, b, x) row. */
struct HeadAt {
  int h, b, x, e;
  int64_t hbx;
};

__device__ __forceinline__ HeadAt head_at(int64_t t, int width, int X, int nb) {
  HeadAt p;
  p.e = (int)(t % width);
  p.hbx = t / width;
  p.x = (int)(p.hbx % X);
  const int64_t hb = p.hbx / X;
  p.b = (int)(hb % nb);
  p.h = (int)(hb / nb);
  return p;
}

/* dst[h, b, x, e] = src[x * xs + b * bs + h * dh + e] (+ bias[h * dh + e]) for e < dh, 0 for
 * dh <= e < dhp; x < X, b < nb, h < H. Rounded once to D.   dst [H, nb, X, dhp] */
template <typename D, typename S>
__global__ void gather_heads_kernel(D *dst, const S *src, const float *bias, int X, int nb, int H, int dh,
                                    int dhp, int64_t xs, int64_t bs) {
  const int64_t total = (int64_t)H * nb * X * dhp;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const HeadAt p = head_at(t, dhp, X, nb);
    float v = 0.0f;
    if (p.e < dh) {
      v = txl_ld(src + p.x * xs + p.b * bs + (int64_t)p.h * dh + p.e);
      if (bias) v += bias[p.h * dh + p.e];
    }
    txl_st(dst + t, v);
  }
}

/* The inverse: dst[x * xs + b * bs + h * dh + e] = a[h, b, x, e] (+ b2[h, b, x, e]) for e < dh,
 * summed in fp32 and rounded once to D. */
template <typename D, typename S>
__global__ void scatter_heads_kernel(D *dst, const S *a, const S *a2, int X, int nb, int H, int dh, int dhp,
                                     int64_t xs, int64_t bs) {
  const int64_t total = (int64_t)H * nb * X * dh;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const HeadAt p = head_at(t, dh, X, nb);
    const int64_t at = p.hbx * dhp + p.e;
    float v = txl_ld(a + at);
    if (a2) v += txl_ld(a2 + at);
    txl_st(dst + p.x * xs + p.b * bs + (int64_t)p.h * dh + p.e, v);
  }
}

/* du[h dh + e] += sum over rows of dqu[h, row, e], dvb likewise from dqv (rows = B L); a NULL du
 * or dvb (no u or no vb) is skipped, and its dq half not read. Block
 * (h, group of 32 e) with 256 threads: thread (g = tid / 32, lane) sums rows g, g + 8, ... in
 * order; the 8 group sums are then added in group order. Deterministic. */
__global__ void head_colsum_kernel(float *du, float *dvb, const float *dqu, const float *dqv, int64_t rows,
                                   int dh, int dhp) {
  __shared__ float part[2][8][32];
  const int lane = threadIdx.x & 31, grp = threadIdx.x >> 5;
  const int h = blockIdx.x, e = blockIdx.y * 32 + lane;
  float su = 0.0f, sv = 0.0f;
  if (e < dh) {
    const float *pu = dqu + (int64_t)h * rows * dhp + e, *pv = dvb ? dqv + (int64_t)h * rows * dhp + e : nullptr;
    for (int64_t r = grp; r < rows; r += 8) {
      su += pu[r * dhp];
      if (pv) sv += pv[r * dhp];
    }
  }
  part[0][grp][lane] = su;
  part[1][grp][lane] = sv;
  __syncthreads();
  if (grp == 0 && e < dh) {
    float tu = 0.0f, tv = 0.0f;
    for (int g = 0; g < 8; g++) {
      tu += part[0][g][lane];
      tv += part[1][g][lane];
    }
    if (du) du[h * dh + e] += tu;
    if (dvb) dvb[h * dh + e] += tv;
  }
}

/* ---- the row kernels: one warp per score row (h, c, i) ---------------------------------------- */

struct Row {
  int i, b, h;
  int64_t at; /* the row's first element in the [H, B, L, Kp] buffers */
  int lo, hi, off;
};

__device__ __forceinline__ Row row_of(const Geo &g, int64_t row) {
  Row r;
  r.i = (int)(row % g.L);
  const int64_t hb = row / g.L;
  r.b = (int)(hb % g.B);
  r.h = (int)(hb / g.B);
  r.at = row * g.Kp;
  r.hi = g.M + r.i;
  r.lo = g.same_length ? r.i - g.same_shift + 1 : 0;
  if (r.lo < 0) r.lo = 0;
  r.off = g.L - 1 - r.i;
  return r;
}

/* The keys j of a row in groups of the 4 features one Philox call gives (features h K + j):
 * lane takes groups q = q0 + lane, q0 + lane + 32, ...; group q holds j = 4 q - h K + t, t < 4
 * (those in [0, K)). factors[t] = the dropatt factor (dscale or 0) of each, 1 without dropatt. */
__device__ __forceinline__ void group_factors(float f[4], const Geo &g, const Row &r, uint32_t q) {
  if (!g.dropout) {
    f[0] = f[1] = f[2] = f[3] = 1.0f;
    return;
  }
  const TxlPhilox4 w = txl_dropout_words(g.drop, (uint32_t)r.i, (uint32_t)(g.col0 + r.b), q * 4u);
  for (int t = 0; t < 4; t++) f[t] = (w.v[t] >> 8) >= g.threshold ? g.dscale : 0.0f;
}

/* Calls fn(j, factor) for this lane's keys j in [0, K), group after group (group_factors), in
 * increasing j: factor is the dropatt factor when Factors, else 1. */
template <bool Factors, typename Fn>
__device__ __forceinline__ void row_keys(const Geo &g, const Row &r, int lane, Fn fn) {
  const uint32_t f0 = (uint32_t)r.h * (uint32_t)g.K;
  const uint32_t q_first = f0 >> 2, q_last = (f0 + (uint32_t)g.K - 1u) >> 2;
  for (uint32_t q = q_first + (uint32_t)lane; q <= q_last; q += 32) {
    float f[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    if (Factors) group_factors(f, g, r, q);
    for (int t = 0; t < 4; t++) {
      const int j = (int)(4u * q + (uint32_t)t - f0);
      if (j >= 0 && j < g.K) fn(j, f[t]);
    }
  }
}

/* Forward, one score row (every lane of the warp): lse (saved [B, H, L]) and P~ [H, B, L, Kp]
 * (zeros where not visible). */
/* The score s_ij: AC, + BD at p = j + L-1-i when there is a BD term, + scale rb[p, h] with rb. */
__device__ __forceinline__ float score_at(const float *a, const float *d, const Geo &g, const Row &r, int j) {
  float s = a[j];
  if (g.has_bd) s += d[j];
  if (g.rb) s += g.scale * g.rb[(int64_t)(j + r.off) * g.H + r.h];
  return s;
}

template <typename T>
__device__ void forward_row(T *pd, float *lse, const float *ac, const float *bd, const Geo &g, int64_t row,
                            int lane) {
  const Row r = row_of(g, row);
  const float *a = ac + r.at, *d = g.has_bd ? bd + r.at + r.off : nullptr;
  /* online max and sum over this lane's visible scores */
  float m = -INFINITY, l = 0.0f;
  row_keys<false>(g, r, lane, [&](int j, float) {
    if (j < r.lo || j > r.hi) return;
    const float s = score_at(a, d, g, r, j);
    if (s > m) {
      l = l * expf(m - s) + 1.0f;
      m = s;
    } else {
      l += expf(s - m);
    }
  });
  float mx = m;
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const float sum = txl_warp_sum(m == -INFINITY ? 0.0f : l * expf(m - mx));
  const float ls = mx == -INFINITY ? -INFINITY : mx + logf(sum);
  if (lane == 0) lse[((int64_t)r.b * g.H + r.h) * g.L + r.i] = ls;
  T *out = pd + r.at;
  row_keys<true>(g, r, lane, [&](int j, float f) {
    const bool vis = j >= r.lo && j <= r.hi;
    txl_st(out + j, vis ? expf(score_at(a, d, g, r, j) - ls) * f : 0.0f);
  });
}

/* The rows of the forward and backward kernels: warp w of the grid takes rows w, w + warps, ...;
 * every lane of a warp takes the same rows, so the warp operations of a row see full warps. */
struct WarpRows {
  int64_t first, step, end;
  int lane;
};

__device__ __forceinline__ WarpRows warp_rows(const Geo &g) {
  WarpRows w;
  w.first = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  w.step = ((int64_t)gridDim.x * blockDim.x) >> 5;
  w.end = (int64_t)g.H * g.B * g.L;
  w.lane = threadIdx.x & 31;
  return w;
}

template <typename T>
__global__ void softmax_forward_kernel(T *pd, float *lse, const float *ac, const float *bd, Geo g) {
  const WarpRows w = warp_rows(g);
  for (int64_t row = w.first; row < w.end; row += w.step) forward_row(pd, lse, ac, bd, g, row, w.lane);
}

/* Backward, one score row: P~ (again), dS [H, B, L, Kp] and dBD (dS at the positions p = j + L-1-i, zeros for
 * p < L-1-i), from the recomputed AC, BD, the saved lse and dP~ = dvec v^T. */
template <typename T>
__device__ void backward_row(T *pd, T *ds, T *dbd, const float *ac, const float *bd, const float *dp,
                             const float *lse, const Geo &g, int64_t row, int lane) {
  const Row r = row_of(g, row);
  const float *a = ac + r.at, *d = g.has_bd ? bd + r.at + r.off : nullptr, *dpr = dp + r.at;
  const float ls = lse[((int64_t)r.b * g.H + r.h) * g.L + r.i];
  T *pdr = pd + r.at, *dsr = ds + r.at, *dbr = dbd + r.at;
  float dot = 0.0f; /* this lane's part of D_i = sum_j P~_ij dP~_ij */
  row_keys<true>(g, r, lane, [&](int j, float f) {
    float pt = 0.0f;
    if (j >= r.lo && j <= r.hi) {
      pt = expf(score_at(a, d, g, r, j) - ls) * f;
      dot += pt * dpr[j];
    }
    txl_st(pdr + j, pt);
  });
  dot = txl_warp_sum(dot);
  row_keys<true>(g, r, lane, [&](int j, float f) {
    float gs = 0.0f;
    if (j >= r.lo && j <= r.hi) gs = expf(score_at(a, d, g, r, j) - ls) * (f * dpr[j] - dot);
    txl_st(dsr + j, gs);
    if (g.has_bd && j + r.off < g.K) txl_st(dbr + j + r.off, gs);
  });
  if (g.has_bd)
    for (int p = lane; p < r.off && p < g.K; p += 32) txl_st(dbr + p, 0.0f);
}

/* drb[p, h] = scale sum over the B L rows (b, i) of head h of dBD[h, b, i, p], in row order.
 * One thread per (h, p). */
template <typename T>
__global__ void rb_colsum_kernel(float *drb, const T *dbd, Geo g) {
  const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (t >= (int64_t)g.H * g.K) return;
  const int h = (int)(t / g.K), p = (int)(t % g.K);
  const int64_t rows = (int64_t)g.B * g.L;
  const T *col = dbd + (int64_t)h * rows * g.Kp + p;
  float sum = 0.0f;
  for (int64_t row = 0; row < rows; row++) sum += txl_ld(col + row * g.Kp);
  drb[(int64_t)p * g.H + h] = g.scale * sum;
}

template <typename T>
__global__ void softmax_backward_kernel(T *pd, T *ds, T *dbd, const float *ac, const float *bd, const float *dp,
                                        const float *lse, Geo g) {
  const WarpRows w = warp_rows(g);
  for (int64_t row = w.first; row < w.end; row += w.step) backward_row(pd, ds, dbd, ac, bd, dp, lse, g, row, w.lane);
}

/* ---- the plan, executed or counted ------------------------------------------------------------ */

/* Runs the plan's steps (Run) or adds their cost (Count): one source for both, so the count is
 * that of the calls. A step is a GEMM or a kernel with its bytes and FLOPs. */
struct Run {
  void gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, int64_t sA, const void *B,
            int ldb, int64_t sB, void *C, int ldc, int64_t sC, int batch, TxlDtype ab, TxlDtype ct) {
    txl_cuda_gemm_batched(ta, tb, M, N, K, alpha, A, lda, sA, B, ldb, sB, 0.0f, C, ldc, sC, batch, ab, ct);
  }
  template <typename Launch>
  void kernel(double bytes, double flops, Launch launch) {
    (void)bytes;
    (void)flops;
    launch();
    CUDA_LAUNCH_CHECK();
  }
};

struct Count {
  TxlCudaCost *c;
  bool tensor; /* the GEMMs run on tensor cores (tf32, bf16 or fp16) */
  void gemm(int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda, int64_t sA, const void *B,
            int ldb, int64_t sB, void *C, int ldc, int64_t sC, int batch, TxlDtype ab, TxlDtype ct) {
    (void)ta, (void)tb, (void)alpha, (void)A, (void)lda, (void)sA, (void)B, (void)ldb, (void)sB, (void)C;
    (void)ldc, (void)sC;
    const double flops = 2.0 * M * N * K * batch, e = (double)txl_dtype_size(ab);
    (tensor ? c->tensor_flops : c->core_flops) += flops;
    c->bytes += (double)batch * ((double)M * K * e + (double)K * N * e + (double)M * N * (double)txl_dtype_size(ct));
    c->launches += 1.0;
  }
  template <typename Launch>
  void kernel(double bytes, double flops, Launch launch) {
    (void)launch;
    c->bytes += bytes;
    c->core_flops += flops;
    c->launches += 1.0;
  }
};

/* Costs of the element kernels, per element: the row kernels' scores (one add, the exp, the
 * online max / sum: ~6 FLOPs forward, ~8 per pass backward), the gathers one add. */
constexpr double ROW_FWD_FLOPS = 8.0, ROW_BWD_FLOPS = 16.0;

template <typename T>
T *at(void *work, size_t off) {
  return reinterpret_cast<T *>(static_cast<char *>(work) + off);
}

/* Gathers q (+ u, + vb), k, v, r (and, backward, dvec) into the per-head layouts. */
template <typename T, typename Exec>
void gather_all(Exec &x, const Geo &g, const Plan &p, void *w, const T *q, const T *kv, const T *r,
                const float *u, const float *vb, const T *dvec) {
  const int HD = g.H * g.dh;
  const double e = sizeof(T);
  const double nq = (double)g.H * g.B * g.L * g.dhp, nk = (double)g.H * g.B * g.K * g.dhp;
  const double nr = (double)g.H * g.K * g.dhp;
  const int64_t qx = (int64_t)g.B * g.ldq, kx = (int64_t)g.B * g.ldkv; /* from row x to row x + 1 */
  auto gather = [&](T *dst, const T *src, const float *bias, int X, int nb, int64_t xs, int64_t bs, double n) {
    x.kernel(2.0 * n * e, bias ? n : 0.0, [&] {
      auto k = gather_heads_kernel<T, T>;
      TXL_LAUNCH(k, txl_cuda_blocks((int64_t)n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
          dst, src, bias, X, nb, g.H, g.dh, g.dhp, xs, bs);
    });
  };
  gather(at<T>(w, p.qu), q, u, g.L, g.B, qx, g.ldq, nq);
  if (g.has_bd) gather(at<T>(w, p.qv), q, vb, g.L, g.B, qx, g.ldq, nq);
  gather(at<T>(w, p.kt), kv, nullptr, g.K, g.B, kx, g.ldkv, nk);
  gather(at<T>(w, p.vt), kv + HD, nullptr, g.K, g.B, kx, g.ldkv, nk);
  if (g.has_bd) gather(at<T>(w, p.rt), r, nullptr, g.K, 1, g.ldr, 0, nr);
  if (dvec) gather(at<T>(w, p.o), dvec, nullptr, g.L, g.B, qx, g.ldq, nq);
}

/* AC and BD (fp32, alpha = scale). */
template <typename T, typename Exec>
void scores(Exec &x, const Geo &g, const Plan &p, void *w, TxlDtype act) {
  const int64_t sq = (int64_t)g.L * g.dhp, sk = (int64_t)g.K * g.dhp, ss = (int64_t)g.L * g.Kp;
  x.gemm(0, 1, g.L, g.K, g.dhp, g.scale, at<T>(w, p.qu), g.dhp, sq, at<T>(w, p.kt), g.dhp, sk, at<float>(w, p.ac),
         g.Kp, ss, g.H * g.B, act, TXL_F32);
  if (g.has_bd)
    x.gemm(0, 1, g.B * g.L, g.K, g.dhp, g.scale, at<T>(w, p.qv), g.dhp, sq * g.B, at<T>(w, p.rt), g.dhp, sk,
           at<float>(w, p.bd), g.Kp, ss * g.B, g.H, act, TXL_F32);
}

unsigned int row_blocks(const Geo &g) {
  return txl_cuda_blocks((int64_t)g.H * g.B * g.L * 32, TXL_CUDA_THREADS);
}

template <typename T, typename Exec>
void forward_plan(Exec &x, const Geo &g, const Plan &p, void *w, T *vec, float *lse, const T *q, const T *kv,
                  const T *r, const float *u, const float *vb, TxlDtype act) {
  const int HD = g.H * g.dh;
  const double e = sizeof(T), ns = (double)g.H * g.B * g.L * g.K;
  gather_all<T>(x, g, p, w, q, kv, r, u, vb, (const T *)nullptr);
  scores<T>(x, g, p, w, act);
  x.kernel(ns * (8.0 + e), ns * ROW_FWD_FLOPS, [&] {
    auto k = softmax_forward_kernel<T>;
    TXL_LAUNCH(k, row_blocks(g), TXL_CUDA_THREADS, 0)(at<T>(w, p.pd), lse, at<float>(w, p.ac), at<float>(w, p.bd), g);
  });
  const int64_t sq = (int64_t)g.L * g.dhp, sk = (int64_t)g.K * g.dhp, ss = (int64_t)g.L * g.Kp;
  x.gemm(0, 0, g.L, g.dhp, g.K, 1.0f, at<T>(w, p.pd), g.Kp, ss, at<T>(w, p.vt), g.dhp, sk, at<T>(w, p.o), g.dhp, sq,
         g.H * g.B, act, act);
  const double nv = (double)g.L * g.B * HD;
  x.kernel(2.0 * nv * e, 0.0, [&] {
    auto k = scatter_heads_kernel<T, T>;
    TXL_LAUNCH(k, txl_cuda_blocks((int64_t)nv, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
        vec, at<T>(w, p.o), (const T *)nullptr, g.L, g.B, g.H, g.dh, g.dhp, (int64_t)g.B * g.ldq, (int64_t)g.ldq);
  });
}

template <typename T, typename Exec>
void backward_plan(Exec &x, const Geo &g, const Plan &p, void *w, T *dq, T *dkv, T *dr, float *du, float *dvb,
                   float *drb, const T *dvec, const T *q, const T *kv, const T *r, const float *u, const float *vb,
                   const float *lse, TxlDtype act) {
  const int HD = g.H * g.dh;
  const double e = sizeof(T), ns = (double)g.H * g.B * g.L * g.K;
  gather_all<T>(x, g, p, w, q, kv, r, u, vb, dvec);
  scores<T>(x, g, p, w, act);
  const int64_t sq = (int64_t)g.L * g.dhp, sk = (int64_t)g.K * g.dhp, ss = (int64_t)g.L * g.Kp;
  const int HB = g.H * g.B;
  /* dP~ = dvec v^T */
  x.gemm(0, 1, g.L, g.K, g.dhp, 1.0f, at<T>(w, p.o), g.dhp, sq, at<T>(w, p.vt), g.dhp, sk, at<float>(w, p.dp), g.Kp,
         ss, HB, act, TXL_F32);
  x.kernel(ns * (12.0 + 3.0 * e), ns * ROW_BWD_FLOPS, [&] {
    auto k = softmax_backward_kernel<T>;
    TXL_LAUNCH(k, row_blocks(g), TXL_CUDA_THREADS, 0)(at<T>(w, p.pd), at<T>(w, p.ds), at<T>(w, p.dbd),
                                                      at<float>(w, p.ac), at<float>(w, p.bd), at<float>(w, p.dp),
                                                      lse, g);
  });
  /* dv = P~^T dvec;  dq halves;  dk = scale dS^T (q + u);  dr = scale dBD^T (q + vb) */
  x.gemm(1, 0, g.K, g.dhp, g.L, 1.0f, at<T>(w, p.pd), g.Kp, ss, at<T>(w, p.o), g.dhp, sq, at<float>(w, p.dvt), g.dhp,
         sk, HB, act, TXL_F32);
  x.gemm(0, 0, g.L, g.dhp, g.K, g.scale, at<T>(w, p.ds), g.Kp, ss, at<T>(w, p.kt), g.dhp, sk, at<float>(w, p.dqu),
         g.dhp, sq, HB, act, TXL_F32);
  x.gemm(1, 0, g.K, g.dhp, g.L, g.scale, at<T>(w, p.ds), g.Kp, ss, at<T>(w, p.qu), g.dhp, sq, at<float>(w, p.dkt),
         g.dhp, sk, HB, act, TXL_F32);
  if (g.has_bd) {
    x.gemm(0, 0, g.B * g.L, g.dhp, g.K, g.scale, at<T>(w, p.dbd), g.Kp, ss * g.B, at<T>(w, p.rt), g.dhp, sk,
           at<float>(w, p.dqv), g.dhp, sq * g.B, g.H, act, TXL_F32);
    x.gemm(1, 0, g.K, g.dhp, g.B * g.L, g.scale, at<T>(w, p.dbd), g.Kp, ss * g.B, at<T>(w, p.qv), g.dhp, sq * g.B,
           at<float>(w, p.drt), g.dhp, sk, g.H, act, TXL_F32);
  }
  if (g.rb) {
    const double n = (double)g.H * g.B * g.L * g.K;
    x.kernel(n * e + (double)g.H * g.K * 4.0, n, [&] {
      auto k = rb_colsum_kernel<T>;
      TXL_LAUNCH(k, txl_cuda_blocks((int64_t)g.H * g.K, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
          drb, at<T>(w, p.dbd), g);
    });
  }
  /* back to the model's layouts, each rounded once */
  auto scatter = [&](T *dst, const float *a, const float *a2, int X, int nb, int64_t xs, int64_t bs) {
    const double n = (double)X * nb * HD;
    x.kernel(n * ((a2 ? 8.0 : 4.0) + e), a2 ? n : 0.0, [&] {
      auto k = scatter_heads_kernel<T, float>;
      TXL_LAUNCH(k, txl_cuda_blocks((int64_t)n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(dst, a, a2, X, nb, g.H,
                                                                                      g.dh, g.dhp, xs, bs);
    });
  };
  const int64_t qx = (int64_t)g.B * g.ldq, kx = (int64_t)g.B * g.ldkv; /* from row x to row x + 1 */
  scatter(dq, at<float>(w, p.dqu), g.has_bd ? at<float>(w, p.dqv) : nullptr, g.L, g.B, qx, g.ldq);
  scatter(dkv, at<float>(w, p.dkt), nullptr, g.K, g.B, kx, g.ldkv);
  scatter(dkv + HD, at<float>(w, p.dvt), nullptr, g.K, g.B, kx, g.ldkv);
  if (g.has_bd) scatter(dr, at<float>(w, p.drt), nullptr, g.K, 1, g.ldr, 0);
  if (!du && !dvb) return;
  const double nq = (double)g.B * g.L * HD, halves = (du ? 1.0 : 0.0) + (dvb ? 1.0 : 0.0);
  x.kernel(halves * nq * 4.0, halves * nq, [&] {
    TXL_LAUNCH(head_colsum_kernel, dim3((unsigned int)g.H, (unsigned int)((g.dh + 31) / 32)), TXL_CUDA_THREADS, 0)(
        du, dvb, at<float>(w, p.dqu), at<float>(w, p.dqv), (int64_t)g.B * g.L, g.dh, g.dhp);
  });
}

/* ---- entry points ------------------------------------------------------------------------------ */

bool no_query(const TxlAttnShape &s) { return s.L <= 0 || s.B <= 0 || s.H <= 0 || s.dh <= 0; }

/* The call's arguments as ops.def asks (txl_attn_check_call), and, backward, a gradient exactly
 * where its input is. */
void check_grads(const TxlAttnShape &s, const void *r, const float *u, const float *vb, const float *rb,
                 const void *dr, const float *du, const float *dvb, const float *drb) {
  txl_attn_check_call(&s, r, vb, rb);
  if (!r != !dr || !u != !du || !vb != !dvb || !rb != !drb)
    txl_fatal("internal: rel_attn_backward's gradients (dr %d du %d dvb %d drb %d) do not match its inputs "
              "(r %d u %d vb %d rb %d)", !!dr, !!du, !!dvb, !!drb, !!r, !!u, !!vb, !!rb);
}

template <typename T>
void rel_attn_forward(T *vec, float *saved, const T *q, const T *kv, const T *r, const float *u, const float *vb,
                      const float *rb, const TxlAttnShape &s, const TxlDropout &drop, void *work, TxlDtype act) {
  txl_attn_check_call(&s, r, vb, rb);
  if (no_query(s)) return;
  if constexpr (sizeof(T) == 2) {
    if (g_attn_impl == TXL_ATTN_FUSED && rel_attn_fused_fits(s, sizeof(T))) {
      rel_attn_fused_forward<T>(vec, saved, q, kv, r, u, vb, rb, s, drop);
      return;
    }
  }
  const Geo g = make_geo(s, drop, r != nullptr, rb);
  const Plan p = make_plan(s.L, g.K, s.B, s.H, s.dh, sizeof(T), 0);
  Run x;
  forward_plan<T>(x, g, p, work, vec, saved, q, kv, r, u, vb, act);
}

template <typename T>
void rel_attn_backward(T *dq, T *dkv, T *dr, float *du, float *dvb, float *drb, const T *dvec, const T *vec, const T *q,
                       const T *kv, const T *r, const float *u, const float *vb, const float *rb, const float *saved,
                       const TxlAttnShape &s, const TxlDropout &drop, void *work, TxlDtype act) {
  check_grads(s, r, u, vb, rb, dr, du, dvb, drb);
  const int K = s.M + s.L, HD = s.H * s.dh;
  if (no_query(s)) { /* no query: zero gradients of the inputs, row by row (not the gaps) */
    if (dr && K > 0 && HD > 0) txl_cuda_zero_rows(dr, K, (size_t)HD * sizeof(T), (size_t)s.ldr * sizeof(T));
    if (drb && K > 0 && s.H > 0) txl_cuda_zero(drb, (size_t)K * s.H * sizeof(float));
    if (K > 0 && s.B > 0 && HD > 0)
      txl_cuda_zero_rows(dkv, (int64_t)K * s.B, (size_t)2 * HD * sizeof(T), (size_t)s.ldkv * sizeof(T));
    return;
  }
  if constexpr (sizeof(T) == 2) {
    if (g_attn_impl == TXL_ATTN_FUSED && rel_attn_fused_backward_fits(s, sizeof(T))) {
      rel_attn_fused_backward<T>(dq, dkv, dr, du, dvb, drb, dvec, vec, q, kv, r, u, vb, rb, saved, s, drop, work);
      return;
    }
  }
  const Geo g = make_geo(s, drop, r != nullptr, rb);
  const Plan p = make_plan(s.L, K, s.B, s.H, s.dh, sizeof(T), 1);
  Run x;
  backward_plan<T>(x, g, p, work, dq, dkv, dr, du, dvb, drb, dvec, q, kv, r, u, vb, saved, act);
}

/* The plan walked with a Count: nothing is launched and no memory touched, so every pointer is
 * one fake address (not null: the plan does arithmetic on them). */
template <typename T>
void count_plan(Count &x, const Geo &g, const Plan &p, int backward, TxlDtype act) {
  static char mark[1];
  void *w = mark;
  T *t = reinterpret_cast<T *>(mark);
  float *f = reinterpret_cast<float *>(mark);
  if (backward)
    backward_plan<T>(x, g, p, w, t, t, t, g.has_bd ? f : nullptr, g.has_bd && !g.rb ? f : nullptr,
                     g.rb ? f : nullptr, t, t, t, t, f, f, f, act);
  else
    forward_plan<T>(x, g, p, w, t, f, t, t, t, g.has_bd ? f : nullptr, g.has_bd && !g.rb ? f : nullptr, act);
}

/* The GEMM route's plan, or the fused backward's buffers where they are larger (either route may
 * run: txl_cuda_set_attn_impl). */
size_t workspace(int L, int K, int B, int H, int dh, int backward, size_t act) {
  if (L <= 0 || K <= 0 || B <= 0 || H <= 0 || dh <= 0) return 0;
  const size_t gemm = make_plan(L, K, B, H, dh, act, backward).bytes;
  if (!backward || act != 2) return gemm;
  TxlAttnShape s = {};
  s.L = L, s.M = K - L, s.B = B, s.H = H, s.dh = dh;
  const size_t fused = rel_attn_fused_backward_workspace(s);
  return fused > gemm ? fused : gemm;
}

} // namespace

extern "C" void txl_cuda_set_attn_impl(TxlAttnImpl impl) {
  if (impl != TXL_ATTN_GEMM && impl != TXL_ATTN_FUSED) txl_fatal("internal: attention route %d", (int)impl);
  g_attn_impl = impl;
}

extern "C" size_t txl_cuda_rel_attn_saved_floats(int L, int K, int B, int H) {
  (void)K;
  return (size_t)B * H * L;
}

/* Every buffer of the plan grows with each argument, so the size covers all smaller shapes. */
template <TxlDtype AT> size_t txl_act_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward) {
  return workspace(L, K, B, H, dh, backward, sizeof(typename TxlAct<AT>::T));
}
TXL_CUDA_ACT_ENTRIES(rel_attn_workspace)

extern "C" void txl_cuda_rel_attn_cost(TxlAttnShape s, TxlDtype act, int tf32, int backward, int bd, int rb,
                                       TxlCudaCost *c) {
  if (no_query(s)) return;
  const TxlDropout none = {0.0f, 0u, 0u, 0u, nullptr};
  static const float mark_rb[1] = {0.0f}; /* a stand-in: the count reads no memory */
  const Geo g = make_geo(s, none, bd, rb ? mark_rb : nullptr);
  const size_t e = txl_dtype_size(act);
  if (!backward && g_attn_impl == TXL_ATTN_FUSED && rel_attn_fused_shape_fits(s, e)) {
    double bytes = 0.0, tensor = 0.0, core = 0.0;
    rel_attn_fused_cost(s, e, bd, &bytes, &tensor, &core);
    c->bytes += bytes;
    c->tensor_flops += tensor;
    c->core_flops += core;
    c->launches += 1.0;
    return;
  }
  if (backward && g_attn_impl == TXL_ATTN_FUSED && rel_attn_fused_backward_shape_fits(s, e)) {
    double bytes = 0.0, tensor = 0.0, core = 0.0, launches = 0.0;
    rel_attn_fused_backward_cost(s, e, bd, rb, &bytes, &tensor, &core, &launches);
    c->bytes += bytes;
    c->tensor_flops += tensor;
    c->core_flops += core;
    c->launches += launches;
    return;
  }
  const Plan p = make_plan(s.L, g.K, s.B, s.H, s.dh, e, backward);
  Count x = {c, act != TXL_F32 || tf32 != 0};
  if (act == TXL_BF16)
    count_plan<txl_bf16>(x, g, p, backward, act);
  else if (act == TXL_F16)
    count_plan<txl_fp16>(x, g, p, backward, act);
  else
    count_plan<float>(x, g, p, backward, act);
}

template <TxlDtype AT>
void txl_act_rel_attn_forward(void *vec, float *saved, const void *q, const void *kv, const void *r, const float *u,
                              const float *vb, const float *rb, TxlAttnShape s, TxlDropout drop, void *work) {
  using T = typename TxlAct<AT>::T;
  rel_attn_forward((T *)vec, saved, (const T *)q, (const T *)kv, (const T *)r, u, vb, rb, s, drop, work, AT);
}
TXL_CUDA_ACT_ENTRIES(rel_attn_forward)

template <TxlDtype AT>
void txl_act_rel_attn_backward(void *dq, void *dkv, void *dr, float *du, float *dvb, float *drb, const void *dvec,
                               const void *vec, const void *q, const void *kv, const void *r, const float *u,
                               const float *vb, const float *rb, const float *saved, TxlAttnShape s, TxlDropout drop,
                               void *work) {
  /* vec: the fused route's D_i = dvec_i . vec_i (the GEMM route sums the fp32 P~ dP~ instead) */
  using T = typename TxlAct<AT>::T;
  rel_attn_backward((T *)dq, (T *)dkv, (T *)dr, du, dvb, drb, (const T *)dvec, (const T *)vec, (const T *)q, (const T *)kv,
                    (const T *)r, u, vb, rb, saved, s, drop, work, AT);
}
TXL_CUDA_ACT_ENTRIES(rel_attn_backward)
