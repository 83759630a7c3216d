/* Layer norm over the last dimension, as torch.nn.LayerNorm and the CPU backend:
 *   mean = sum(x) / d,  var = sum((x - mean)^2) / d (biased),  rstd = 1 / sqrt(var + eps),
 *   out = (x - mean) * rstd * w + b.
 * The backward adds into dinp (+=, residual stream) and into dw, db (+=, parameters).
 *
 * Shapes: out, inp, dout, dinp [n, d]; mean, rstd [n]; w, b, dw, db [d].
 *
 * Forward and dinp: one warp per row (lanes stride over the d features, warp-shuffle sums).
 * dw, db: deterministic, no atomics. The rows are cut into P fixed chunks; kernel 1 (grid
 * [column tiles, P]) sums each chunk's rows in order into a partial [P, d]; kernel 2 sums the P
 * partials of each column in order (in double) and adds the total to dw / db. The result depends
 * only on n and d, never on scheduling. The partials live in a scratch buffer owned by this
 * file, made on the first call and grown only if d grows (2 * TXL_LN_MAX_CHUNKS * d floats at
 * most: 4 MiB for d = 1024), so steady-state training does not allocate. */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

#define TXL_LN_WARPS (TXL_CUDA_THREADS / 32) /* rows per block in the row-wise kernels */
#define TXL_LN_MIN_CHUNK_ROWS 16             /* rows summed by one thread of kernel 1, at least */
#define TXL_LN_MAX_CHUNKS 512                /* P at most                                        */

/* ---- forward --------------------------------------------------------------------------- */

static __global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd,
                                                const float *inp, const float *w, const float *b,
                                                int64_t n, int d, float eps) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * TXL_LN_WARPS;
  /* r is the same for the 32 lanes of a warp, so the shuffles below see full warps */
  for (int64_t r = (int64_t)blockIdx.x * TXL_LN_WARPS + threadIdx.x / 32; r < n; r += nwarps) {
    const float *x = inp + r * d;
    float *y = out + r * d;
    float s = 0.0f;
    for (int j = lane; j < d; j += 32) s += x[j];
    const float mu = txl_warp_sum(s) / (float)d;
    float ss = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float c = x[j] - mu;
      ss += c * c;
    }
    const float rs = 1.0f / sqrtf(txl_warp_sum(ss) / (float)d + eps);
    for (int j = lane; j < d; j += 32) y[j] = (x[j] - mu) * rs * w[j] + b[j];
    if (lane == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

extern "C" void txl_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                           const float *w, const float *b, int64_t n, int d,
                                           float eps) {
  if (n <= 0 || d <= 0) return;
  layernorm_forward_kernel<<<txl_cuda_blocks(n * 32, TXL_CUDA_THREADS), TXL_CUDA_THREADS>>>(
      out, mean, rstd, inp, w, b, n, d, eps);
  CUDA_LAUNCH_CHECK();
}

/* ---- backward -------------------------------------------------------------------------- */

/* dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w,  xhat = (x - mean) rstd */
static __global__ void layernorm_backward_input_kernel(float *dinp, const float *dout,
                                                       const float *inp, const float *w,
                                                       const float *mean, const float *rstd,
                                                       int64_t n, int d) {
  const int lane = threadIdx.x & 31;
  const int64_t nwarps = (int64_t)gridDim.x * TXL_LN_WARPS;
  for (int64_t r = (int64_t)blockIdx.x * TXL_LN_WARPS + threadIdx.x / 32; r < n; r += nwarps) {
    const float *x = inp + r * d, *dy = dout + r * d;
    float *dx = dinp + r * d;
    const float mu = mean[r], rs = rstd[r];
    float sg = 0.0f, sgx = 0.0f;
    for (int j = lane; j < d; j += 32) {
      const float g = dy[j] * w[j];
      sg += g;
      sgx += g * ((x[j] - mu) * rs);
    }
    const float mg = txl_warp_sum(sg) / (float)d, mgx = txl_warp_sum(sgx) / (float)d;
    for (int j = lane; j < d; j += 32) {
      const float xhat = (x[j] - mu) * rs;
      dx[j] += rs * (dy[j] * w[j] - mg - xhat * mgx);
    }
  }
}

/* Kernel 1: part_w[p, j] = sum over the rows r of chunk p (in order) of dout[r,j] * xhat[r,j],
 * part_b[p, j] = the same of dout[r, j].   grid (ceil(d / threads), P); part_* [P, d] */
static __global__ void layernorm_backward_partial_kernel(float *part_w, float *part_b,
                                                         const float *dout, const float *inp,
                                                         const float *mean, const float *rstd,
                                                         int64_t n, int d, int64_t chunk_rows) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < n ? r0 + chunk_rows : n;
  float aw = 0.0f, ab = 0.0f;
  for (int64_t r = r0; r < r1; r++) {
    const float dy = dout[r * d + j];
    aw += dy * ((inp[r * d + j] - mean[r]) * rstd[r]);
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

/* The partials' scratch: [2, TXL_LN_MAX_CHUNKS, d] floats at most, grown on demand. */
static float *g_scratch = NULL;
static size_t g_scratch_floats = 0;

static float *scratch(size_t floats) {
  if (floats > g_scratch_floats) {
    /* cudaFree waits for the device, so no earlier kernel still reads the old buffer */
    if (g_scratch) CUDA_CHECK(cudaFree(g_scratch));
    g_scratch = NULL;
    g_scratch_floats = 0;
    g_scratch = (float *)txl_cuda_alloc(floats * sizeof(float), "layer-norm backward scratch");
    g_scratch_floats = floats;
  }
  return g_scratch;
}

void txl_cuda_layernorm_release(void) {
  if (g_scratch) CUDA_CHECK(cudaFree(g_scratch));
  g_scratch = NULL;
  g_scratch_floats = 0;
}

extern "C" void txl_cuda_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                            const float *inp, const float *w, const float *mean,
                                            const float *rstd, int64_t n, int d) {
  if (n <= 0 || d <= 0) return;
  layernorm_backward_input_kernel<<<txl_cuda_blocks(n * 32, TXL_CUDA_THREADS),
                                    TXL_CUDA_THREADS>>>(dinp, dout, inp, w, mean, rstd, n, d);
  CUDA_LAUNCH_CHECK();

  int64_t nchunks = (n + TXL_LN_MIN_CHUNK_ROWS - 1) / TXL_LN_MIN_CHUNK_ROWS;
  if (nchunks > TXL_LN_MAX_CHUNKS) nchunks = TXL_LN_MAX_CHUNKS;
  const int64_t chunk_rows = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk_rows - 1) / chunk_rows; /* no empty chunk at the end */
  float *part = scratch((size_t)2 * TXL_LN_MAX_CHUNKS * (size_t)d);
  float *part_w = part, *part_b = part + nchunks * (int64_t)d;

  const int tiles = (d + TXL_CUDA_THREADS - 1) / TXL_CUDA_THREADS;
  const dim3 grid1((unsigned int)tiles, (unsigned int)nchunks);
  layernorm_backward_partial_kernel<<<grid1, TXL_CUDA_THREADS>>>(part_w, part_b, dout, inp, mean,
                                                                 rstd, n, d, chunk_rows);
  CUDA_LAUNCH_CHECK();
  layernorm_backward_final_kernel<<<tiles, TXL_CUDA_THREADS>>>(dw, db, part_w, part_b,
                                                               (int)nchunks, d);
  CUDA_LAUNCH_CHECK();
}
