/* Layer norm over the last dimension, as torch.nn.LayerNorm and the CPU backend:
 *   mean = sum(x) / d,  var = sum((x - mean)^2) / d (biased),  rstd = 1 / sqrt(var + eps),
 *   out = (x - mean) * rstd * w + b.
 * Four ops:
 *   layernorm_forward           out, mean, rstd of inp
 *   add_layernorm_forward       res = x + y, then out, mean, rstd of res (res may alias x or y)
 *   layernorm_backward          dinp += (residual stream; skipped when dinp is NULL), dw, db +=
 *   layernorm_backward_dropout  dinp = (OVERWRITTEN) d(input), dbranch = dropout(dinp) keyed by
 *                               (row i = r / cols, column col0 + r % cols, feature), dw, db +=
 *
 * Shapes: out, inp, res, x, y, dout, dinp, dbranch [n, d] with rows ld >= d apart (n = rows * cols
 * for the dropout one; the features ld - d past each row are neither read nor written);
 * mean, rstd [n]; w, b, dw, db [d].
 * Types: the activations (out, inp, res, x, y, dout, dinp, dbranch) are of type T (float,
 * txl_bf16 or txl_fp16, see cuda_util.h: widened when read, rounded once when stored); mean, rstd, w, b, dw, db
 * are fp32. With bf16 or fp16, the statistics and out are those of res as stored (rounded), which the
 * backward reads back as its input, and dbranch is the dropout of dinp as stored.
 *
 * Forward and d(input): one warp per row (lanes stride over the d features, warp-shuffle sums),
 * through one row helper per direction that every op shares. The forward holds the lane's values
 * of the row in registers for d <= 1024 (one read of the input, the sum of x + y made once) and
 * re-reads them for wider rows, with the same operations in the same order either way.
 * dw, db: deterministic, no atomics. The rows are cut into P fixed chunks; kernel 1 (grid
 * [column tiles, P]) sums each chunk's rows in order into a partial [P, d]; kernel 2 sums the P
 * partials of each column in order (in double) and adds the total to dw / db. The result depends
 * only on n and d, never on scheduling. The partials live in a scratch buffer owned by this
 * file, made by txl_cuda_layernorm_reserve for the widest d (2 * TXL_LN_MAX_CHUNKS * d floats:
 * 4 MiB for d = 1024), so the ops do not allocate. */
#include "kernels/common/dropout.h"
#include "kernels/cuda/act.h"

#define TXL_LN_WARPS (TXL_CUDA_THREADS / 32) /* rows per block in the row-wise kernels */
#define TXL_LN_MIN_CHUNK_ROWS 16             /* rows summed by one thread of kernel 1, at least */
#define TXL_LN_MAX_CHUNKS 512                /* P at most                                        */

/* ---- forward --------------------------------------------------------------------------- */

/* *res = x + y, stored; returns the value stored (rounded when T is bf16). res may alias x or y. */
template <typename T>
static __device__ __forceinline__ float add_stored(T *res, T x, T y) {
  T a;
  txl_st(&a, txl_ld(&x) + txl_ld(&y));
  *res = a;
  return txl_ld(&a);
}

/* One row by one warp (every lane calls it): the input value of feature j is x[j], or with ADD
 * a = x[j] + y[j] as stored to res[j]; then mean and rstd (stored by lane 0) and out.
 * NV > 0: the lane's values a[lane + 32 k], k < NV, stay in registers (d <= 32 NV); NV == 0: any
 * d, the values are re-read from x (or res). The arithmetic and its order are the same. */
template <typename T, int NV, bool ADD>
static __device__ __forceinline__ void ln_forward_row(T *res, T *out, float *mean, float *rstd,
                                                      const T *x, const T *y, const float *w,
                                                      const float *b, int d, float eps, int lane) {
  float v[NV > 0 ? NV : 1];
  float s = 0.0f;
  if constexpr (NV > 0) {
#pragma unroll
    for (int k = 0; k < NV; k++) {
      const int j = lane + 32 * k;
      v[k] = 0.0f;
      if (j < d) {
        const float a = ADD ? add_stored(&res[j], x[j], y[j]) : txl_ld(&x[j]);
        v[k] = a;
        s += a;
      }
    }
  } else {
    for (int j = lane; j < d; j += 32) /* res is re-read below by this same lane */
      s += ADD ? add_stored(&res[j], x[j], y[j]) : txl_ld(&x[j]);
  }
  const float mu = txl_warp_sum(s) / (float)d;
  float ss = 0.0f;
  if constexpr (NV > 0) {
#pragma unroll
    for (int k = 0; k < NV; k++)
      if (lane + 32 * k < d) {
        const float c = v[k] - mu;
        ss += c * c;
      }
  } else {
    const T *src = ADD ? res : x;
    for (int j = lane; j < d; j += 32) {
      const float c = txl_ld(&src[j]) - mu;
      ss += c * c;
    }
  }
  const float rs = 1.0f / sqrtf(txl_warp_sum(ss) / (float)d + eps);
  if constexpr (NV > 0) {
#pragma unroll
    for (int k = 0; k < NV; k++) {
      const int j = lane + 32 * k;
      if (j < d) txl_st(&out[j], (v[k] - mu) * rs * w[j] + b[j]);
    }
  } else {
    const T *src = ADD ? res : x;
    for (int j = lane; j < d; j += 32) txl_st(&out[j], (txl_ld(&src[j]) - mu) * rs * w[j] + b[j]);
  }
  if (lane == 0) {
    *mean = mu;
    *rstd = rs;
  }
}

/* One warp per row, grid-stride. res, y unused (may be NULL) without ADD. */
template <typename T, int NV, bool ADD>
static __global__ void layernorm_forward_kernel(T *res, T *out, float *mean, float *rstd,
                                                const T *x, const T *y, const float *w,
                                                const float *b, int64_t n, int d, int ld, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * TXL_LN_WARPS;
  /* r is the same for the 32 lanes of a warp, so the shuffles see full warps */
  for (int64_t r = (int64_t)blockIdx.x * TXL_LN_WARPS + threadIdx.x / 32; r < n; r += nwarps)
    ln_forward_row<T, NV, ADD>(ADD ? res + r * ld : NULL, out + r * ld, mean + r, rstd + r,
                               x + r * ld, ADD ? y + r * ld : NULL, w, b, d, eps, lane);
}

template <typename T, int NV, bool ADD>
static void layernorm_forward_launch(T *res, T *out, float *mean, float *rstd, const T *x,
                                     const T *y, const float *w, const float *b, int64_t n, int d, int ld,
                                     float eps) {
  auto k = layernorm_forward_kernel<T, NV, ADD>;
  TXL_LAUNCH(k, txl_cuda_blocks(n * 32, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
  CUDA_LAUNCH_CHECK();
}

/* The register capacity by d: up to 1024 features in registers, beyond that re-read. */
template <typename T, bool ADD>
static void layernorm_forward_dispatch(T *res, T *out, float *mean, float *rstd, const T *x,
                                       const T *y, const float *w, const float *b, int64_t n,
                                       int d, int ld, float eps) {
  if (n <= 0 || d <= 0) return;
  if (d <= 32 * 4)
    layernorm_forward_launch<T, 4, ADD>(res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
  else if (d <= 32 * 8)
    layernorm_forward_launch<T, 8, ADD>(res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
  else if (d <= 32 * 16)
    layernorm_forward_launch<T, 16, ADD>(res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
  else if (d <= 32 * 32)
    layernorm_forward_launch<T, 32, ADD>(res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
  else
    layernorm_forward_launch<T, 0, ADD>(res, out, mean, rstd, x, y, w, b, n, d, ld, eps);
}

template <TxlDtype AT>
void txl_act_layernorm_forward(void *out, float *mean, float *rstd, const void *inp, const float *w, const float *b,
                               int64_t n, int d, int ld, float eps) {
  using T = typename TxlAct<AT>::T;
  layernorm_forward_dispatch<T, false>(NULL, static_cast<T *>(out), mean, rstd, static_cast<const T *>(inp), NULL, w,
                                       b, n, d, ld, eps);
}
TXL_CUDA_ACT_ENTRIES(layernorm_forward)

template <TxlDtype AT>
void txl_act_add_layernorm_forward(void *res, void *out, float *mean, float *rstd, const void *x, const void *y,
                                   const float *w, const float *b, int64_t n, int d, int ld, float eps) {
  using T = typename TxlAct<AT>::T;
  layernorm_forward_dispatch<T, true>(static_cast<T *>(res), static_cast<T *>(out), mean, rstd,
                                      static_cast<const T *>(x), static_cast<const T *>(y), w, b, n, d, ld, eps);
}
TXL_CUDA_ACT_ENTRIES(add_layernorm_forward)

/* ---- backward -------------------------------------------------------------------------- */

/* mg = mean(g), mgx = mean(g * xhat) over one row, g = dout * w, xhat = (x - mu) rs; one warp
 * (every lane calls it and gets both). */
template <typename T>
static __device__ __forceinline__ void ln_backward_means(float &mg, float &mgx, const T *dy,
                                                         const T *x, const float *w, float mu,
                                                         float rs, int d, int lane) {
  float sg = 0.0f, sgx = 0.0f;
  for (int j = lane; j < d; j += 32) {
    const float g = txl_ld(&dy[j]) * w[j];
    sg += g;
    sgx += g * ((txl_ld(&x[j]) - mu) * rs);
  }
  mg = txl_warp_sum(sg) / (float)d;
  mgx = txl_warp_sum(sgx) / (float)d;
}

/* d(input) of one feature: rstd * (g - mean(g) - xhat * mean(g * xhat)) */
static __device__ __forceinline__ float ln_dx(float dy, float x, float w, float mu, float rs,
                                              float mg, float mgx) {
  const float xhat = (x - mu) * rs;
  return rs * (dy * w - mg - xhat * mgx);
}

/* dinp += d(input), one warp per row */
template <typename T>
static __global__ void layernorm_backward_input_kernel(T *dinp, const T *dout, const T *inp,
                                                       const float *w, const float *mean,
                                                       const float *rstd, int64_t n, int d, int ld) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * TXL_LN_WARPS;
  for (int64_t r = (int64_t)blockIdx.x * TXL_LN_WARPS + threadIdx.x / 32; r < n; r += nwarps) {
    const T *x = inp + r * ld, *dy = dout + r * ld;
    T *dx = dinp + r * ld;
    const float mu = mean[r], rs = rstd[r];
    float mg, mgx;
    ln_backward_means(mg, mgx, dy, x, w, mu, rs, d, lane);
    for (int j = lane; j < d; j += 32)
      txl_st(&dx[j], txl_ld(&dx[j]) + ln_dx(txl_ld(&dy[j]), txl_ld(&x[j]), w[j], mu, rs, mg, mgx));
  }
}

/* dinp = d(input), dbranch = dropout(dinp as stored), one warp per row r = (i, c); the lanes take
 * groups of 4 features (one Philox call gives the 4 words of a group, as the dropout op). */
template <typename T, bool DROP>
static __global__ void layernorm_backward_dropout_kernel(T *dinp, T *dbranch, const T *dout,
                                                         const T *inp, const float *w,
                                                         const float *mean, const float *rstd,
                                                         int rows, int cols, int d, int ld, int col0,
                                                         TxlDropout drop, uint32_t threshold,
                                                         float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t n = (int64_t)rows * cols;
  const int64_t nwarps = (int64_t)gridDim.x * TXL_LN_WARPS;
  const int groups = (d + 3) / 4;
  for (int64_t r = (int64_t)blockIdx.x * TXL_LN_WARPS + threadIdx.x / 32; r < n; r += nwarps) {
    const T *x = inp + r * ld, *dy = dout + r * ld;
    T *dx = dinp + r * ld, *dbr = dbranch + r * ld;
    const float mu = mean[r], rs = rstd[r];
    float mg, mgx;
    ln_backward_means(mg, mgx, dy, x, w, mu, rs, d, lane);
    const uint32_t i = (uint32_t)(r / cols), c = (uint32_t)(col0 + (int)(r % cols));
    for (int q = lane; q < groups; q += 32) {
      const int j0 = 4 * q;
      TxlPhilox4 words = {{0u, 0u, 0u, 0u}};
      if (DROP) words = txl_dropout_words(drop, i, c, (uint32_t)j0);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        const int j = j0 + k;
        if (j < d) {
          T g;
          txl_st(&g, ln_dx(txl_ld(&dy[j]), txl_ld(&x[j]), w[j], mu, rs, mg, mgx));
          dx[j] = g;
          if (DROP)
            txl_st(&dbr[j], txl_ld(&g) * ((words.v[k] >> 8) >= threshold ? scale : 0.0f));
          else
            dbr[j] = g;
        }
      }
    }
  }
}

/* Kernel 1: part_w[p, j] = sum over the rows r of chunk p (in order) of dout[r,j] * xhat[r,j],
 * part_b[p, j] = the same of dout[r, j].   grid (ceil(d / threads), P); part_* [P, d] */
template <typename T>
static __global__ void layernorm_backward_partial_kernel(float *part_w, float *part_b,
                                                         const T *dout, const T *inp,
                                                         const float *mean, const float *rstd,
                                                         int64_t n, int d, int ld, int64_t chunk_rows) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < n ? r0 + chunk_rows : n;
  float aw = 0.0f, ab = 0.0f;
  for (int64_t r = r0; r < r1; r++) {
    const float dy = txl_ld(&dout[r * ld + j]);
    aw += dy * ((txl_ld(&inp[r * ld + j]) - mean[r]) * rstd[r]);
    ab += dy;
  }
  part_w[p * d + j] = aw;
  part_b[p * d + j] = ab;
}

/* Kernel 2: dw[j] += sum_p part_w[p, j], db[j] += sum_p part_b[p, j], p in order, in double. */
static __global__ void layernorm_backward_final_kernel(float *dw, float *db, const float *part_w,
                                                       const float *part_b, int nchunks, int d) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  double aw = 0.0, ab = 0.0;
  for (int p = 0; p < nchunks; p++) {
    aw += (double)part_w[(int64_t)p * d + j];
    ab += (double)part_b[(int64_t)p * d + j];
  }
  dw[j] = (float)((double)dw[j] + aw);
  db[j] = (float)((double)db[j] + ab);
}

/* The partials' scratch: [2, TXL_LN_MAX_CHUNKS, d] floats at most, reserved for the widest d. */
static TxlCudaScratch g_scratch = {NULL, 0, "layer-norm backward scratch"};

static float *scratch(size_t floats) { return (float *)txl_cuda_scratch(&g_scratch, floats * sizeof(float)); }

void txl_cuda_layernorm_reserve(int norm_d) {
  txl_cuda_scratch_reserve(&g_scratch, (size_t)2 * TXL_LN_MAX_CHUNKS * (size_t)norm_d * sizeof(float));
}

void txl_cuda_layernorm_release(void) { txl_cuda_scratch_release(&g_scratch); }

/* dw += sum_r dout * xhat, db += sum_r dout, by kernels 1 and 2 (n, d > 0). */
template <typename T>
static void layernorm_param_grads(float *dw, float *db, const T *dout, const T *inp,
                                  const float *mean, const float *rstd, int64_t n, int d, int ld) {
  int64_t nchunks = (n + TXL_LN_MIN_CHUNK_ROWS - 1) / TXL_LN_MIN_CHUNK_ROWS;
  if (nchunks > TXL_LN_MAX_CHUNKS) nchunks = TXL_LN_MAX_CHUNKS;
  const int64_t chunk_rows = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk_rows - 1) / chunk_rows; /* no empty chunk at the end */
  float *part = scratch((size_t)2 * TXL_LN_MAX_CHUNKS * (size_t)d);
  float *part_w = part, *part_b = part + nchunks * (int64_t)d;

  const int tiles = (d + TXL_CUDA_THREADS - 1) / TXL_CUDA_THREADS;
  const dim3 grid1((unsigned int)tiles, (unsigned int)nchunks);
  TXL_LAUNCH(layernorm_backward_partial_kernel<T>, grid1, TXL_CUDA_THREADS, 0)(
      part_w, part_b, dout, inp, mean, rstd, n, d, ld, chunk_rows);
  CUDA_LAUNCH_CHECK();
  TXL_LAUNCH(layernorm_backward_final_kernel, tiles, TXL_CUDA_THREADS, 0)(dw, db, part_w, part_b,
                                                                          (int)nchunks, d);
  CUDA_LAUNCH_CHECK();
}

template <typename T>
static void layernorm_backward(T *dinp, float *dw, float *db, const T *dout, const T *inp,
                               const float *w, const float *mean, const float *rstd, int64_t n,
                               int d, int ld) {
  if (n <= 0 || d <= 0) return;
  if (dinp) { /* NULL: rows whose input takes no gradient, only dw and db */
    TXL_LAUNCH(layernorm_backward_input_kernel<T>, txl_cuda_blocks(n * 32, TXL_CUDA_THREADS),
               TXL_CUDA_THREADS, 0)(dinp, dout, inp, w, mean, rstd, n, d, ld);
    CUDA_LAUNCH_CHECK();
  }
  layernorm_param_grads(dw, db, dout, inp, mean, rstd, n, d, ld);
}

template <TxlDtype AT>
void txl_act_layernorm_backward(void *dinp, float *dw, float *db, const void *dout, const void *inp, const float *w,
                                const float *mean, const float *rstd, int64_t n, int d, int ld) {
  using T = typename TxlAct<AT>::T;
  layernorm_backward(static_cast<T *>(dinp), dw, db, static_cast<const T *>(dout), static_cast<const T *>(inp), w,
                     mean, rstd, n, d, ld);
}
TXL_CUDA_ACT_ENTRIES(layernorm_backward)

template <typename T>
static void layernorm_backward_dropout(T *dinp, T *dbranch, float *dw, float *db, const T *dout,
                                       const T *inp, const float *w, const float *mean,
                                       const float *rstd, int rows, int cols, int d, int ld, int col0,
                                       TxlDropout drop) {
  if (!(drop.p >= 0.0f && drop.p < 1.0f))
    txl_fatal("layernorm_backward_dropout: dropout probability %g is not in [0, 1)", (double)drop.p);
  if (rows <= 0 || cols <= 0 || d <= 0) return;
  const int64_t n = (int64_t)rows * cols;
  const unsigned int blocks = txl_cuda_blocks(n * 32, TXL_CUDA_THREADS);
  if (drop.p > 0.0f) {
    auto k = layernorm_backward_dropout_kernel<T, true>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(dinp, dbranch, dout, inp, w, mean, rstd, rows, cols,
                                              d, ld, col0, drop, txl_dropout_threshold(drop.p),
                                              txl_dropout_scale(drop.p));
  } else {
    auto k = layernorm_backward_dropout_kernel<T, false>;
    TXL_LAUNCH(k, blocks, TXL_CUDA_THREADS, 0)(dinp, dbranch, dout, inp, w, mean, rstd, rows, cols,
                                              d, ld, col0, drop, 0u, 1.0f);
  }
  CUDA_LAUNCH_CHECK();
  layernorm_param_grads(dw, db, dout, inp, mean, rstd, n, d, ld);
}

template <TxlDtype AT>
void txl_act_layernorm_backward_dropout(void *dinp, void *dbranch, float *dw, float *db, const void *dout,
                                        const void *inp, const float *w, const float *mean, const float *rstd,
                                        int rows, int cols, int d, int ld, int col0, TxlDropout drop) {
  using T = typename TxlAct<AT>::T;
  layernorm_backward_dropout(static_cast<T *>(dinp), static_cast<T *>(dbranch), dw, db, static_cast<const T *>(dout),
                             static_cast<const T *>(inp), w, mean, rstd, rows, cols, d, ld, col0, drop);
}
TXL_CUDA_ACT_ENTRIES(layernorm_backward_dropout)
