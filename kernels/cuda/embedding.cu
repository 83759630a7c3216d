/* Word embedding lookup and its gradient, as the CPU backend (kernels/cpu/embedding.c):
 *   forward   out[t, :] = emb[tok[t], :] * scale       out [n, d] (rows ldo apart), tok [n], emb [V, d] (rows lde apart)
 *             one thread per output element;
 *   backward  demb[tok[t], :] += dout[t, :] * scale    demb [V, d] (rows lde apart), dout [n, d] (rows ldo apart)
 *             deterministic, see below.
 * out, emb and dout are activations of type T (float, txl_bf16 or txl_fp16, see cuda_util.h); demb is of
 * type TD (fp32 for a parameter gradient, T for an activation: the adaptive softmax's scatter-add).
 * The token ids are trusted (the corpus reader checks them against the vocabulary); one below 0 is
 * adaptive_group's padding: a row of zeros forward, nothing added backward (the sort puts those
 * last: its digits are the ids' unsigned bits). */
#include "kernels/cuda/act.h"

template <typename T>
static __global__ void embedding_forward_kernel(T *out, const int32_t *tok, const T *emb,
                                                float scale, int64_t n, int d, int lde, int ldo) {
  const int64_t total = n * d;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = e / d, j = e % d;
    const int32_t v = tok[t];
    txl_st(&out[t * ldo + j], v < 0 ? 0.0f : txl_ld(&emb[(int64_t)v * lde + j]) * scale); /* < 0: padding */
  }
}

template <typename T>
static void embedding_forward(T *out, const int32_t *tok, const T *emb, float scale, int64_t n,
                              int d, int lde, int ldo) {
  if (n <= 0 || d <= 0) return;
  TXL_LAUNCH(embedding_forward_kernel<T>, txl_cuda_blocks(n * d, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      out, tok, emb, scale, n, d, lde, ldo);
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT>
void txl_act_embedding_forward(void *out, const int32_t *tok, const void *emb, float scale, int64_t n, int d,
                               int lde, int ldo) {
  using T = typename TxlAct<AT>::T;
  embedding_forward(static_cast<T *>(out), tok, static_cast<const T *>(emb), scale, n, d, lde, ldo);
}
TXL_CUDA_ACT_ENTRIES(embedding_forward)

/* ---- backward ------------------------------------------------------------------------------
 * demb[tok[t], :] += dout[t, :] * scale (+=), deterministic and without float atomics, in the
 * order of the CPU backend: every element of a token's row receives the terms of its positions in
 * increasing t, each as one fused multiply-add into a float accumulator
 * (acc = fmaf(dout, scale, acc); the CPU's `g += o * scale` is contracted the same way by the
 * compiler where the CPU has FMA), so the fp32 result is the CPU's bit for bit.
 *
 *  1. A stable LSD radix sort of the positions by token (integer work only): four passes of 8-bit
 *     digits; each pass cuts the n positions into tiles of 256 (one block each): kernel a counts
 *     every digit in every tile into hist [256 digits, tiles], kernel b (one block) turns hist into
 *     exclusive prefix sums in (digit, tile) order, kernel c moves each position to its digit's
 *     offset plus its rank among the earlier positions of its tile with the same digit. The sorted
 *     tokens skey [n] and positions spos [n] have each token's positions in increasing t.
 *  2. One block per run of equal tokens in skey (the block of the run's first index; the others
 *     skip), threads over the d columns (grid y: column tiles of 256): the run's positions are
 *     staged 256 at a time in shared memory and each thread adds their dout rows, in order, into a
 *     register, written once at the end (a bf16 or fp16 demb: widened when read, rounded once when
 *     written). Distinct runs own distinct rows of demb: no races.
 *
 * Scratch (int32): two key/value buffer pairs [4, n] and hist [256, tiles], owned by this file,
 * made by txl_cuda_embedding_reserve for the largest n; txl_cuda_embedding_release frees it. */

#define TXL_EMB_TILE TXL_CUDA_THREADS /* positions per tile of the sort = threads per block */
#define TXL_EMB_DIGITS 256            /* 8-bit digits                                       */
static_assert(TXL_EMB_TILE == TXL_EMB_DIGITS, "radix_count_kernel: one thread per digit");

static TxlCudaScratch g_sort_scratch = {NULL, 0, "embedding backward sort scratch"};

static int32_t *sort_scratch(size_t ints) {
  return (int32_t *)txl_cuda_scratch(&g_sort_scratch, ints * sizeof(int32_t));
}

/* Ints of the sort's scratch for n positions: 4 n + 256 tiles (both grow with n). */
static int64_t sort_ints(int64_t n) { return 4 * n + (int64_t)TXL_EMB_DIGITS * ((n + TXL_EMB_TILE - 1) / TXL_EMB_TILE); }

void txl_cuda_embedding_reserve(int64_t rows) {
  txl_cuda_scratch_reserve(&g_sort_scratch, (size_t)sort_ints(rows) * sizeof(int32_t));
}

void txl_cuda_embedding_release(void) { txl_cuda_scratch_release(&g_sort_scratch); }

/* The digit of key k for this pass. */
static __device__ __forceinline__ int radix_digit(int32_t k, int shift) {
  return (int)(((uint32_t)k >> shift) & (TXL_EMB_DIGITS - 1));
}

/* a: hist[g, b] = number of positions of tile b whose key has digit g.
 * grid: tiles, block: TXL_EMB_TILE; keys [n], hist [TXL_EMB_DIGITS, tiles] */
static __global__ void radix_count_kernel(int32_t *hist, const int32_t *keys, int64_t n, int shift,
                                          int tiles) {
  __shared__ int dig[TXL_EMB_TILE];
  const int64_t e = (int64_t)blockIdx.x * TXL_EMB_TILE + threadIdx.x;
  dig[threadIdx.x] = e < n ? radix_digit(keys[e], shift) : -1;
  __syncthreads();
  int count = 0; /* thread g counts digit g (TXL_EMB_TILE == TXL_EMB_DIGITS) */
  for (int k = 0; k < TXL_EMB_TILE; k++) count += dig[k] == (int)threadIdx.x;
  hist[(int64_t)threadIdx.x * tiles + blockIdx.x] = count;
}

/* b: h [m] = its exclusive prefix sums, one block: thread i takes a contiguous segment. */
static __global__ void radix_scan_kernel(int32_t *h, int64_t m) {
  __shared__ int32_t seg[TXL_CUDA_THREADS];
  const int64_t per = (m + TXL_CUDA_THREADS - 1) / TXL_CUDA_THREADS;
  const int64_t i0 = per * threadIdx.x;
  const int64_t i1 = i0 + per < m ? i0 + per : m;
  int32_t s = 0;
  for (int64_t i = i0; i < i1; i++) s += h[i];
  seg[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t acc = 0;
    for (int k = 0; k < TXL_CUDA_THREADS; k++) {
      const int32_t v = seg[k];
      seg[k] = acc;
      acc += v;
    }
  }
  __syncthreads();
  int32_t acc = seg[threadIdx.x];
  for (int64_t i = i0; i < i1; i++) {
    const int32_t v = h[i];
    h[i] = acc;
    acc += v;
  }
}

/* c: (kout, vout)[hist[g, b] + rank] = (key, value) of each position of tile b, g its digit, rank
 * the number of earlier positions of the tile with digit g (stable). vin NULL: value = index.
 * grid: tiles, block: TXL_EMB_TILE; kin, vin, kout, vout [n] */
static __global__ void radix_scatter_kernel(int32_t *kout, int32_t *vout, const int32_t *kin,
                                            const int32_t *vin, const int32_t *hist, int64_t n,
                                            int shift, int tiles) {
  __shared__ int dig[TXL_EMB_TILE];
  const int64_t e = (int64_t)blockIdx.x * TXL_EMB_TILE + threadIdx.x;
  const int32_t key = e < n ? kin[e] : 0;
  dig[threadIdx.x] = e < n ? radix_digit(key, shift) : -1;
  __syncthreads();
  if (e < n) {
    const int g = dig[threadIdx.x];
    int rank = 0;
    for (int k = 0; k < (int)threadIdx.x; k++) rank += dig[k] == g;
    const int32_t at = hist[(int64_t)g * tiles + blockIdx.x] + rank;
    kout[at] = key;
    vout[at] = vin ? vin[e] : (int32_t)e;
  }
}

/* 2: for every run of equal tokens in skey, its demb row += its dout rows * scale, in order.
 * grid (runs' first indices, grid-stride; column tiles), block TXL_EMB_TILE.
 * demb [V, d] (rows lde apart), dout [n, d] (rows ldo apart), skey, spos [n] */
template <typename TD, typename T>
static __global__ void embedding_backward_rows_kernel(TD *demb, const T *dout, const int32_t *skey,
                                                      const int32_t *spos, float scale, int64_t n,
                                                      int d, int lde, int ldo) {
  __shared__ int32_t pos[TXL_EMB_TILE];
  const int j = blockIdx.y * TXL_EMB_TILE + threadIdx.x;
  for (int64_t s = blockIdx.x; s < n; s += gridDim.x) { /* s is uniform across the block */
    const int32_t v = skey[s];
    if (v < 0 || (s > 0 && skey[s - 1] == v)) continue; /* padding, or not the first of its run: uniform */
    float acc = j < d ? txl_ld(&demb[(int64_t)v * lde + j]) : 0.0f;
    for (int64_t base = s;; base += TXL_EMB_TILE) {
      /* the next TXL_EMB_TILE positions of the run (a prefix of pos; -1 after its end) */
      const int64_t u = base + threadIdx.x;
      pos[threadIdx.x] = u < n && skey[u] == v ? spos[u] : -1;
      __syncthreads();
      if (j < d)
        for (int k = 0; k < TXL_EMB_TILE && pos[k] >= 0; k++)
          acc = fmaf(txl_ld(&dout[(int64_t)pos[k] * ldo + j]), scale, acc);
      const bool more = pos[TXL_EMB_TILE - 1] >= 0;
      __syncthreads(); /* pos is rewritten by the next batch */
      if (!more) break;
    }
    if (j < d) txl_st(&demb[(int64_t)v * lde + j], acc);
  }
}

template <typename TD, typename T>
static void embedding_backward(TD *demb, const T *dout, const int32_t *tok, float scale, int64_t n,
                               int d, int lde, int ldo) {
  if (n <= 0 || d <= 0) return;
  if (n > INT32_MAX - TXL_EMB_TILE)
    txl_fatal("embedding_backward: %lld positions are too many", (long long)n);
  const int tiles = (int)((n + TXL_EMB_TILE - 1) / TXL_EMB_TILE);
  const int64_t m = (int64_t)TXL_EMB_DIGITS * tiles;
  int32_t *buf = sort_scratch((size_t)sort_ints(n)); /* 4 n + m */
  int32_t *ka = buf, *va = ka + n, *kb = va + n, *vb = kb + n, *hist = vb + n;

  /* four passes: (tok, index) -> a -> b -> a -> b */
  const int32_t *kin = tok, *vin = NULL;
  for (int pass = 0; pass < 4; pass++) {
    int32_t *kout = pass % 2 == 0 ? ka : kb, *vout = pass % 2 == 0 ? va : vb;
    TXL_LAUNCH(radix_count_kernel, tiles, TXL_EMB_TILE, 0)(hist, kin, n, 8 * pass, tiles);
    CUDA_LAUNCH_CHECK();
    TXL_LAUNCH(radix_scan_kernel, 1, TXL_CUDA_THREADS, 0)(hist, m);
    CUDA_LAUNCH_CHECK();
    TXL_LAUNCH(radix_scatter_kernel, tiles, TXL_EMB_TILE, 0)(kout, vout, kin, vin, hist, n, 8 * pass,
                                                              tiles);
    CUDA_LAUNCH_CHECK();
    kin = kout;
    vin = vout;
  }

  const unsigned int runs = (unsigned int)(n < (1 << 20) ? n : (1 << 20));
  const dim3 grid(runs, (unsigned int)((d + TXL_EMB_TILE - 1) / TXL_EMB_TILE));
  auto rows = embedding_backward_rows_kernel<TD, T>;
  TXL_LAUNCH(rows, grid, TXL_EMB_TILE, 0)(demb, dout, kb, vb, scale, n, d, lde, ldo);
  CUDA_LAUNCH_CHECK();
}

/* demb of the act type (an activation) or fp32 (a parameter gradient; the only type of the fp32
 * table, where the two are one) */
template <TxlDtype AT>
void txl_act_embedding_backward(void *demb, TxlDtype demb_type, const void *dout, const int32_t *tok, float scale,
                                int64_t n, int d, int lde, int ldo) {
  txl_cuda_require_dtype(demb_type, AT, "embedding_backward");
  using T = typename TxlAct<AT>::T;
  const T *dy = static_cast<const T *>(dout);
  if (demb_type == AT)
    embedding_backward(static_cast<T *>(demb), dy, tok, scale, n, d, lde, ldo);
  else
    embedding_backward(static_cast<float *>(demb), dy, tok, scale, n, d, lde, ldo);
}
TXL_CUDA_ACT_ENTRIES(embedding_backward)
