/* Element-wise ops, column sums and the sum of squares, as the CPU backend (kernels/cpu/elementwise.c):
 *   to_act         dst = src in the act type         dst, src [n]
 *   bias_fill      x[r, :] = b                       x [rows, n], b [n]
 *   bias_backward  db += sum_r dy[r, :]  (+=)        db [n], dy [rows, n]
 *   add            out = a + b (out may alias a, b)  [n]
 *   sumsq          sum x^2 in double, to the host    [n]
 *   sumsq_segments sumsq over the span of segments whose gaps are zero (the padded gradient)
 *   norm_parts, sumsq_parts, grad_clip_parts  that sum in its chunks (a rank's share of them)
 *   digest         the parameters' 64-bit fingerprint (kernels/common/digest.h), to the host
 * The element-wise ops are one thread per element (grid-stride loops) doing the same single
 * float operation as the CPU, so their fp32 results are the same bits; their bf16 / fp16 results are
 * those bits rounded once (kernels are templates on the storage type, see cuda_util.h). db and
 * the sum of squares are fp32 in every table (parameter gradients).
 *
 * bias_backward, deterministic without atomics: the rows are cut into P chunks fixed by (rows,
 * n); kernel 1 (grid [column tiles, P]) sums each chunk's rows in increasing order in double into
 * a partial [P, n]; kernel 2 adds the P partials of each column in increasing p (in double) to
 * db and rounds once. P is capped so that the partials take at most TXL_EW_PART_DOUBLES doubles
 * (16 MiB) for wide outputs (n = 3 * 10^5 columns: P = 6), and at most TXL_EW_MAX_CHUNKS.
 *
 * sumsq, deterministic whatever the launch: the elements are cut into chunks of a size fixed by
 * n (at least TXL_SUMSQ_MIN_CHUNK, at most TXL_SUMSQ_MAX_CHUNKS chunks); kernel 1 gives each
 * chunk to one block, whose threads take the elements tid, tid + 256, ... of it in order and are
 * then summed by a fixed shared-memory tree; kernel 2 (one block) sums the chunk partials the
 * same way and writes the total, which is copied to the host. Squares of floats are exact in
 * double, so the only rounding is that of the double additions.
 *
 * Scratch (the partials of both reductions) is one device buffer owned by this file, made by
 * txl_cuda_elementwise_reserve for the largest call to come; txl_cuda_elementwise_release frees it. */
#include "kernels/common/digest.h"
#include "kernels/cuda/act.h"

#define TXL_EW_MIN_CHUNK_ROWS 16              /* rows of one bias_backward chunk, at least */
#define TXL_EW_MAX_CHUNKS 512                 /* bias_backward chunks P, at most           */
#define TXL_EW_PART_DOUBLES ((int64_t)1 << 21) /* P * n at most, unless n alone is larger   */
#define TXL_SUMSQ_MIN_CHUNK 8192              /* elements of one sumsq chunk, at least      */
#define TXL_SUMSQ_MAX_CHUNKS 4096             /* sumsq chunks, at most                      */
static_assert(TXL_SUMSQ_MAX_CHUNKS <= TXL_NORM_PARTS_MAX, "the norm's parts are sumsq's chunks");

/* ---- scratch ------------------------------------------------------------------------------ */

static TxlCudaScratch g_scratch = {NULL, 0, "element-wise reduction scratch"};

static double *scratch(size_t doubles) { return (double *)txl_cuda_scratch(&g_scratch, doubles * sizeof(double)); }

/* Doubles of the partials for bias_backward calls of at most `rows` rows and bias_n columns, and
 * for sumsq. bias_backward's P * n (see there) is at most min(C * n, TXL_EW_PART_DOUBLES), C its
 * chunk count before the cap on P * n, or n when that cap leaves one chunk; C and n grow with rows
 * and n. */
void txl_cuda_elementwise_reserve(int64_t rows, int bias_n) {
  int64_t chunks = (rows + TXL_EW_MIN_CHUNK_ROWS - 1) / TXL_EW_MIN_CHUNK_ROWS;
  if (chunks > TXL_EW_MAX_CHUNKS) chunks = TXL_EW_MAX_CHUNKS;
  int64_t bias = chunks * bias_n < TXL_EW_PART_DOUBLES ? chunks * bias_n : TXL_EW_PART_DOUBLES;
  if (bias < bias_n) bias = bias_n;
  const int64_t sumsq = TXL_SUMSQ_MAX_CHUNKS + 1;
  txl_cuda_scratch_reserve(&g_scratch, (size_t)(bias > sumsq ? bias : sumsq) * sizeof(double));
}

void txl_cuda_elementwise_release(void) { txl_cuda_scratch_release(&g_scratch); }

/* ---- bias ---------------------------------------------------------------------------------- */

/* x [rows, n] = b [n] broadcast over the rows */
template <typename T>
static __global__ void bias_fill_kernel(T *x, const float *b, int64_t rows, int n) {
  const int64_t total = rows * n;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x)
    txl_st(&x[e], b[e % n]);
}

template <typename T>
static void bias_fill(T *x, const float *b, int64_t rows, int n) {
  if (rows <= 0 || n <= 0) return;
  TXL_LAUNCH(bias_fill_kernel<T>, txl_cuda_blocks(rows * n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      x, b, rows, n);
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT> void txl_act_bias_fill(void *x, const float *b, int64_t rows, int n) {
  bias_fill(static_cast<typename TxlAct<AT>::T *>(x), b, rows, n);
}
TXL_CUDA_ACT_ENTRIES(bias_fill)

/* Kernel 1: part[p, j] = sum of dy[r, j] over the rows r of chunk p, in increasing r, in double.
 * grid (ceil(n / threads), P); dy [rows, n] (rows ld apart), part [P, n] */
template <typename T>
static __global__ void bias_backward_partial_kernel(double *part, const T *dy, int64_t rows, int n,
                                                    int ld, int64_t chunk_rows) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return; /* no barrier in this kernel */
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * chunk_rows;
  const int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  double s = 0.0;
  for (int64_t r = r0; r < r1; r++) s += (double)txl_ld(&dy[r * ld + j]);
  part[p * n + j] = s;
}

/* Kernel 2: db[j] = (float)(db[j] + sum_p part[p, j]), p increasing, in double. db [n] */
static __global__ void bias_backward_final_kernel(float *db, const double *part, int nchunks,
                                                  int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  double s = (double)db[j];
  for (int p = 0; p < nchunks; p++) s += part[(int64_t)p * n + j];
  db[j] = (float)s;
}

template <typename T>
static void bias_backward(float *db, const T *dy, int64_t rows, int n, int ld) {
  if (rows <= 0 || n <= 0) return;
  /* P: at least TXL_EW_MIN_CHUNK_ROWS rows per chunk, at most TXL_EW_MAX_CHUNKS chunks, and
   * P * n <= TXL_EW_PART_DOUBLES (but at least one chunk) */
  int64_t nchunks = (rows + TXL_EW_MIN_CHUNK_ROWS - 1) / TXL_EW_MIN_CHUNK_ROWS;
  if (nchunks > TXL_EW_MAX_CHUNKS) nchunks = TXL_EW_MAX_CHUNKS;
  if (nchunks > TXL_EW_PART_DOUBLES / n) nchunks = TXL_EW_PART_DOUBLES / n;
  if (nchunks < 1) nchunks = 1;
  const int64_t chunk_rows = (rows + nchunks - 1) / nchunks;
  nchunks = (rows + chunk_rows - 1) / chunk_rows; /* no empty chunk at the end */
  double *part = scratch((size_t)(nchunks * n));

  const int tiles = (n + TXL_CUDA_THREADS - 1) / TXL_CUDA_THREADS;
  const dim3 grid1((unsigned int)tiles, (unsigned int)nchunks);
  TXL_LAUNCH(bias_backward_partial_kernel<T>, grid1, TXL_CUDA_THREADS, 0)(part, dy, rows, n,
                                                                          ld, chunk_rows);
  CUDA_LAUNCH_CHECK();
  TXL_LAUNCH(bias_backward_final_kernel, tiles, TXL_CUDA_THREADS, 0)(db, part, (int)nchunks, n);
  CUDA_LAUNCH_CHECK();
}

template <TxlDtype AT> void txl_act_bias_backward(float *db, const void *dy, int64_t rows, int n, int ld) {
  bias_backward(db, static_cast<const typename TxlAct<AT>::T *>(dy), rows, n, ld);
}
TXL_CUDA_ACT_ENTRIES(bias_backward)

/* ---- element-wise -------------------------------------------------------------------------- */

/* out, a, b [n]; out may alias a or b (each element is read, then written, by one thread) */
template <typename T>
static __global__ void add_kernel(T *out, const T *a, const T *b, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    txl_st(&out[i], txl_ld(&a[i]) + txl_ld(&b[i]));
}

template <typename T>
static void add(void *out, const void *a, const void *b, int64_t n) {
  if (n <= 0) return;
  TXL_LAUNCH(add_kernel<T>, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      static_cast<T *>(out), static_cast<const T *>(a), static_cast<const T *>(b), n);
  CUDA_LAUNCH_CHECK();
}

/* t the act type, or fp32 (the only type of the fp32 table, where the two are one) */
template <TxlDtype AT> void txl_act_add(void *out, const void *a, const void *b, int64_t n, TxlDtype t) {
  txl_cuda_require_dtype(t, AT, "add");
  if (t == AT)
    add<typename TxlAct<AT>::T>(out, a, b, n);
  else
    add<float>(out, a, b, n);
}
TXL_CUDA_ACT_ENTRIES(add)

/* dst [n] = src [n] rounded to T, bf16 or fp16 (the fp32 table's to_act is a plain copy) */
template <typename T>
static __global__ void to_act_kernel(T *dst, const float *src, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    txl_st(&dst[i], src[i]);
}

/* The fp32 table's to_act is a plain copy (no kernel of its own). */
template <TxlDtype AT> void txl_act_to_act(void *dst, const float *src, int64_t n) {
  if (n <= 0) return;
  if constexpr (AT == TXL_F32) {
    txl_cuda_copy(dst, src, (size_t)n * sizeof(float));
  } else {
    using T = typename TxlAct<AT>::T;
    TXL_LAUNCH(to_act_kernel<T>, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(static_cast<T *>(dst),
                                                                                            src, n);
    CUDA_LAUNCH_CHECK();
  }
}
TXL_CUDA_ACT_ENTRIES(to_act)

/* ---- sum of squares and digest ---------------------------------------------------------------
 * One chunked reduction serves both: a sum over the elements of term(i, x[i]), in T (double for
 * sumsq; uint64_t, exact, for the digest). */

/* sh[0] = sum of sh[0 .. TXL_CUDA_THREADS), by a fixed tree; every thread of the block calls it.
 * The caller has written sh[threadIdx.x]; sh[0] is valid for every thread on return. */
template <typename T>
static __device__ void block_sum(T *sh) {
  __syncthreads();
  for (int stride = TXL_CUDA_THREADS / 2; stride > 0; stride >>= 1) {
    if ((int)threadIdx.x < stride) sh[threadIdx.x] += sh[threadIdx.x + stride];
    __syncthreads();
  }
}

/* The terms: x^2 in double (an exact product: 24 + 24 bits < 53), and digest.h's. */
struct SquareTerm {
  __device__ double operator()(int64_t, float v) const { return (double)v * (double)v; }
};
struct DigestTerm {
  __device__ uint64_t operator()(int64_t i, float v) const { return txl_digest_term(i, txl_digest_bits(v)); }
};

/* Kernel 1: part[c] = sum of term(i, x[i]) over chunk c, the elements c chunk <= i < min((c+1)
 * chunk, n), for c0 <= c < c1, and 0 for the other chunks. grid-stride over the chunks, one block
 * each (blockDim.x == TXL_CUDA_THREADS); part [nchunks] */
template <typename T, typename Term>
static __global__ void chunk_sum_kernel(T *part, const float *x, int64_t n, int64_t chunk, int nchunks, int c0, int c1,
                                        Term term) {
  __shared__ T sh[TXL_CUDA_THREADS];
  for (int c = blockIdx.x; c < nchunks; c += gridDim.x) { /* c is uniform across the block */
    if (c < c0 || c >= c1) {
      if (threadIdx.x == 0) part[c] = 0;
      continue;
    }
    const int64_t i0 = (int64_t)c * chunk;
    const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
    T s = 0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += TXL_CUDA_THREADS) s += term(i, x[i]);
    sh[threadIdx.x] = s;
    block_sum(sh);
    if (threadIdx.x == 0) part[c] = sh[0];
    __syncthreads(); /* sh is rewritten by the next chunk */
  }
}

/* Kernel 2 (one block): out(sum of part[0 .. nchunks)), threads taking p = tid, tid + 256, ... in
 * order, then the fixed tree; thread 0 calls out. */
template <typename T, typename Out>
static __global__ void final_sum_kernel(Out out, const T *part, int nchunks) {
  __shared__ T sh[TXL_CUDA_THREADS];
  T s = 0;
  for (int p = threadIdx.x; p < nchunks; p += TXL_CUDA_THREADS) s += part[p];
  sh[threadIdx.x] = s;
  block_sum(sh);
  if (threadIdx.x == 0) out(sh[0]);
}

/* What kernel 2 does with the sum: stores it; or makes the clipping record of it
 * (kernels/common/clip.h), so that the gradient's norm costs no launch of its own. */
template <typename T>
struct StoreSum {
  T *total;
  __device__ void operator()(T sum) const { *total = sum; }
};
struct ClipRecord {
  TxlGradClip *r;
  float clip;
  double loss_scale;
  __device__ void operator()(double sumsq) const { txl_grad_clip_record(r, sumsq, clip, loss_scale); }
};

/* The parts of a sum over n elements (n >= 0): one per chunk (<= TXL_SUMSQ_MAX_CHUNKS), and one
 * part of nothing for n = 0, so that a sum has at least one part; *chunk, the elements of each
 * but the last. */
static int sum_parts(int64_t n, int64_t *chunk) {
  *chunk = (n + TXL_SUMSQ_MAX_CHUNKS - 1) / TXL_SUMSQ_MAX_CHUNKS;
  if (*chunk < TXL_SUMSQ_MIN_CHUNK) *chunk = TXL_SUMSQ_MIN_CHUNK;
  const int nchunks = (int)((n + *chunk - 1) / *chunk);
  return nchunks > 0 ? nchunks : 1;
}

/* Kernel 1 over the parts [c0, c1) of x [n] into part [sum_parts(n)]. */
template <typename T, typename Term>
static void chunk_sums(T *part, const float *x, int64_t n, int c0, int c1, Term term) {
  int64_t chunk;
  const int blocks = sum_parts(n, &chunk);
  auto partial = chunk_sum_kernel<T, Term>;
  TXL_LAUNCH(partial, blocks, TXL_CUDA_THREADS, 0)(part, x, n, chunk, blocks, c0, c1, term);
  CUDA_LAUNCH_CHECK();
}

/* Kernel 2 over part [nparts], the total handed to out on the device. */
template <typename T, typename Out>
static void parts_sum(Out out, const T *part, int nparts) {
  auto final = final_sum_kernel<T, Out>;
  TXL_LAUNCH(final, 1, TXL_CUDA_THREADS, 0)(out, part, nparts);
  CUDA_LAUNCH_CHECK();
}

/* The sum of term over x [n] (n >= 0) handed to out on the device: the partials in the scratch
 * (8-byte words). Nothing waits. */
template <typename T, typename Term, typename Out>
static void chunked_sum_device(const float *x, int64_t n, Term term, Out out) {
  static_assert(sizeof(T) == sizeof(double), "partials of 8 bytes, as the scratch holds");
  int64_t chunk;
  const int nparts = sum_parts(n, &chunk);
  T *part = (T *)scratch(TXL_SUMSQ_MAX_CHUNKS + 1);
  chunk_sums<T>(part, x, n, 0, nparts, term);
  parts_sum<T>(out, part, nparts);
}

/* The same sum, to the host (through the word after the partials). */
template <typename T, typename Term>
static T chunked_sum(const float *x, int64_t n, Term term) {
  T *total = (T *)scratch(TXL_SUMSQ_MAX_CHUNKS + 1) + TXL_SUMSQ_MAX_CHUNKS;
  chunked_sum_device<T>(x, n, term, StoreSum<T>{total});
  T host = 0;
  txl_cuda_to_host(&host, total, sizeof host); /* waits for the two kernels */
  return host;
}

extern "C" double txl_cuda_sumsq(const float *x, int64_t n) {
  return n > 0 ? chunked_sum<double>(x, n, SquareTerm()) : 0.0;
}

/* Integer sums are exact: the CPU's digest bit for bit, whatever the chunks. */
extern "C" uint64_t txl_cuda_digest(const float *x, int64_t n) {
  return n > 0 ? chunked_sum<uint64_t>(x, n, DigestTerm()) : 0;
}

/* The gaps between the segments hold zeros: sumsq over the span from the first to the end of the
 * last (the same sum as over the segments alone, in sumsq's order of that span); no segments, an
 * empty span at 0. */
static void segment_span(int n_seg, const int64_t *seg, int64_t *begin, int64_t *n) {
  *begin = n_seg > 0 ? seg[0] : 0;
  *n = n_seg > 0 ? seg[2 * (n_seg - 1)] + seg[2 * (n_seg - 1) + 1] - seg[0] : 0;
}

extern "C" double txl_cuda_sumsq_segments(const float *x, int n_seg, const int64_t *seg) {
  if (n_seg <= 0) return 0.0;
  int64_t begin, n;
  segment_span(n_seg, seg, &begin, &n);
  return txl_cuda_sumsq(x + begin, n);
}

/* The parts are sumsq's chunks of the span (an empty span: one part of nothing). */
extern "C" int txl_cuda_norm_parts(int64_t *bounds, int n_seg, const int64_t *seg) {
  int64_t begin, n, chunk;
  segment_span(n_seg, seg, &begin, &n);
  const int nparts = sum_parts(n, &chunk);
  for (int p = 0; p < nparts; p++) bounds[p] = begin + (int64_t)p * chunk;
  bounds[nparts] = begin + n;
  return nparts;
}

extern "C" void txl_cuda_sumsq_parts(double *part, const float *x, int n_seg, const int64_t *seg, int p0, int p1) {
  int64_t begin, n;
  segment_span(n_seg, seg, &begin, &n);
  chunk_sums<double>(part, x + begin, n, p0, p1, SquareTerm());
}

extern "C" void txl_cuda_grad_clip_parts(TxlGradClip *r, const double *part, int n_parts, float clip,
                                         double loss_scale) {
  parts_sum<double>(ClipRecord{r, clip, loss_scale}, part, n_parts);
}

/* sumsq_segments' sum made into the record on the device, by the sum's last kernel (the host never
 * waits): sumsq_parts over every part into the scratch, then grad_clip_parts. */
extern "C" void txl_cuda_grad_clip(TxlGradClip *r, const float *g, int n_seg, const int64_t *seg, float clip,
                                   double loss_scale) {
  int64_t begin, n, chunk;
  segment_span(n_seg, seg, &begin, &n);
  const int nparts = sum_parts(n, &chunk); /* norm_parts' count, without its bounds */
  double *part = scratch(TXL_SUMSQ_MAX_CHUNKS + 1);
  txl_cuda_sumsq_parts(part, g, n_seg, seg, 0, nparts);
  txl_cuda_grad_clip_parts(r, part, nparts, clip, loss_scale);
}
