/* Memory of the CUDA backend: device memory from cudaMalloc (256-byte aligned), and the
 * copies between it and the host. Every copy and memset is queued on the compute stream
 * (txl_cuda_stream), after all earlier work of the backend; to_host returns once the copy is
 * complete (the host waits for the stream), to_device once the host buffer may be reused. Also the
 * scratch buffers of the reductions: reserved (made) by txl_cuda_reserve, handed out by
 * txl_cuda_scratch, freed by txl_cuda_release. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

extern "C" int txl_cuda_device_count(void) {
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    /* cudaErrorNoDevice, cudaErrorInsufficientDriver (no driver at all, or too old), ...:
     * no usable device. These errors are not sticky: clear them so that no later
     * cudaGetLastError reports them. */
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

extern "C" void txl_cuda_device_bus_id(int gpu, char *out, int n) { CUDA_CHECK(cudaDeviceGetPCIBusId(out, n, gpu)); }

extern "C" void txl_cuda_set_device(int gpu, TxlCudaDevice *info) {
  CUDA_CHECK(cudaSetDevice(gpu));
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, gpu));
  int clock_khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, gpu));
  snprintf(info->name, sizeof info->name, "%s", p.name);
  info->memory = p.totalGlobalMem;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  info->free_memory = free_b;
  info->sms = p.multiProcessorCount;
  info->major = p.major;
  info->minor = p.minor;
  const TxlGpuPeaks *row = txl_gpu_peaks_find(p.major, p.minor, p.name);
  for (int k = 0; k < TXL_PEAK_KINDS; k++)
    info->peak[k] = txl_gpu_peak_flops(row, (TxlPeakKind)k, p.multiProcessorCount, clock_khz * 1e3);
  int mem_khz = 0, bus_bits = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, gpu));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, gpu));
  info->dram_peak = row && row->dram_gbs > 0.0 ? row->dram_gbs * 1e9 : 2.0 * mem_khz * 1e3 * bus_bits / 8.0;
}

extern "C" double txl_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int warmup, int iters) {
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < warmup; i++) fn(ctx);
  CUDA_CHECK(cudaEventRecord(e0, txl_cuda_stream()));
  for (int i = 0; i < iters; i++) fn(ctx);
  CUDA_CHECK(cudaEventRecord(e1, txl_cuda_stream()));
  txl_cuda_wait_event(e1, "a timed call");
  float ms = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  return iters > 0 ? (double)ms / iters : 0.0;
}

extern "C" int txl_cuda_api_counts(long *launches, long *syncs) {
#ifdef TXL_CUDA_EMU
  txl_emu_counts(launches, syncs);
  return 1;
#else
  *launches = *syncs = -1;
  return 0;
#endif
}

/* The bytes of the blocks txl_cuda_alloc holds (txl_cuda_memory_held): a list of the
 * live blocks, so that a free knows its size. Blocks are taken at start and given back at the end,
 * never inside a step, so the list stays short and its linear search costs nothing that matters. */
typedef struct {
  void *p;
  size_t bytes;
} Block;
static Block *g_blocks = NULL;
static size_t g_nblocks = 0, g_cap = 0, g_live = 0;

static void blocks_add(void *p, size_t bytes) {
  if (g_nblocks == g_cap) {
    const size_t cap = g_cap ? 2 * g_cap : 64;
    Block *b = (Block *)realloc(g_blocks, cap * sizeof *b);
    if (!b) txl_fatal("out of host memory for the list of GPU blocks");
    g_blocks = b, g_cap = cap;
  }
  g_blocks[g_nblocks++] = Block{p, bytes};
  g_live += bytes;
}

static void blocks_remove(void *p) {
  for (size_t i = 0; i < g_nblocks; i++)
    if (g_blocks[i].p == p) {
      g_live -= g_blocks[i].bytes;
      g_blocks[i] = g_blocks[--g_nblocks];
      return;
    }
}

extern "C" size_t txl_cuda_memory_held(void) { return g_live; }

extern "C" void *txl_cuda_alloc(size_t bytes, const char *what) {
  void *p = NULL;
  const size_t n = bytes ? bytes : 1; /* a real, distinct pointer even for 0 bytes */
  const cudaError_t rc = cudaMalloc(&p, n);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
    txl_fatal("out of GPU memory allocating %zu bytes for %s: %s (%zu of %zu MiB free)", bytes,
              what ? what : "(unnamed)", cudaGetErrorString(rc), free_b >> 20, total_b >> 20);
  }
  /* on the compute stream: a non-blocking stream is not ordered after a memset of stream 0 */
  CUDA_CHECK(cudaMemsetAsync(p, 0, n, txl_cuda_stream()));
  blocks_add(p, n);
  return p;
}

extern "C" void txl_cuda_free(void *p) {
  if (!p) return;
  blocks_remove(p);
  CUDA_CHECK(cudaFree(p));
}

extern "C" void txl_cuda_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, txl_cuda_stream()));
}

/* From pageable host memory the runtime stages the bytes before it returns, so host_src may be
 * reused at once; the copy to dst is ordered on the stream like every op. */
extern "C" void txl_cuda_to_device(void *dst, const void *host_src, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, txl_cuda_stream()));
}

/* A small page-locked buffer for to_host's short reads (a step's gradient norm, its loss), made by
 * txl_cuda_reserve (never in a step), freed by txl_cuda_release. */
enum { TXL_READBACK_BYTES = 4096 };
static void *g_readback = NULL;

static void readback_reserve(void) {
  if (g_readback) return;
  const cudaError_t rc = cudaMallocHost(&g_readback, TXL_READBACK_BYTES);
  if (rc != cudaSuccess)
    txl_fatal("out of page-locked host memory allocating %d bytes for the reads to the host: %s",
              (int)TXL_READBACK_BYTES, cudaGetErrorString(rc));
}

/* The copy after every op queued before it, then the host waits for the stream (a synchronous
 * cudaMemcpy would run on stream 0, which does not wait for a non-blocking stream). A read that
 * fits goes through the page-locked buffer: the copy from there does not make the host wait, so
 * cudaStreamSynchronize is the read's one wait. Into pageable memory (a longer read, or before
 * txl_cuda_reserve) the copy itself returns only once it is complete (the runtime's "API
 * synchronization behavior"), and the synchronise then finds the stream idle. */
extern "C" void txl_cuda_to_host(void *host_dst, const void *src, size_t bytes) {
  if (!bytes) return;
  const int staged = g_readback && bytes <= TXL_READBACK_BYTES;
  /* a copy into pageable memory waits inside the runtime: with a host wait set, the work before it
   * is waited for first (the copy then waits for nothing that needs another rank) */
  if (!staged && txl_cuda_host_wait_set()) txl_cuda_wait_stream(txl_cuda_stream(), "a read to the host");
  CUDA_CHECK(cudaMemcpyAsync(staged ? g_readback : host_dst, src, bytes, cudaMemcpyDeviceToHost, txl_cuda_stream()));
  txl_cuda_wait_stream(txl_cuda_stream(), "a read to the host");
  if (staged) memcpy(host_dst, g_readback, bytes);
}

extern "C" void txl_cuda_zero(void *p, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, txl_cuda_stream()));
}

/* Byte i of row r of the zero_rows below (a grid-stride loop over rows x row_bytes). */
static __global__ void zero_rows_kernel(unsigned char *p, int64_t rows, int64_t row_bytes, int64_t pitch) {
  const int64_t n = rows * row_bytes;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i / row_bytes * pitch + i % row_bytes] = 0;
}

/* A kernel on the compute stream rather than cudaMemset2D, which runs on stream 0 (its Async form
 * is not in the emulator of the tests, kernels/emu). Used by the attention backward of a call
 * with no query (rel_attn.cu: L, B, H or dh 0). */
void txl_cuda_zero_rows(void *p, int64_t rows, size_t row_bytes, size_t pitch) {
  if (pitch < row_bytes) txl_fatal("internal: zero_rows with rows %zu bytes apart, %zu wide", pitch, row_bytes);
  if (rows <= 0 || !row_bytes) return;
  const int64_t n = rows * (int64_t)row_bytes;
  TXL_LAUNCH(zero_rows_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      static_cast<unsigned char *>(p), rows, (int64_t)row_bytes, (int64_t)pitch);
  CUDA_LAUNCH_CHECK();
}

static long g_scratch_moves; /* scratch buffers made or freed since the process started */

extern "C" long txl_cuda_scratch_moves(void) { return g_scratch_moves; }

void txl_cuda_scratch_reserve(TxlCudaScratch *s, size_t bytes) {
  if (bytes > s->bytes) {
    txl_cuda_scratch_release(s); /* cudaFree waits for the device: no kernel still uses it */
    s->p = txl_cuda_alloc(bytes, s->what);
    s->bytes = bytes;
    g_scratch_moves++;
  }
}

void *txl_cuda_scratch(TxlCudaScratch *s, size_t bytes) {
  if (bytes > s->bytes)
    txl_fatal("internal: %s of %zu bytes asked, %zu reserved (txl_cuda_reserve)", s->what, bytes, s->bytes);
  return s->p;
}

void txl_cuda_scratch_release(TxlCudaScratch *s) {
  if (s->p) {
    CUDA_CHECK(cudaFree(s->p));
    g_scratch_moves++;
  }
  s->p = NULL;
  s->bytes = 0;
}

extern "C" void txl_cuda_reserve(int64_t rows, int bias_n, int norm_d) {
  readback_reserve();
  txl_cuda_elementwise_reserve(rows, bias_n);
  txl_cuda_layernorm_reserve(norm_d);
  txl_cuda_embedding_reserve(rows);
  txl_cuda_gemm_lt_reserve(bias_n);
}

extern "C" void txl_cuda_release(void) {
  txl_cuda_gemm_release();
  txl_cuda_gemm_lt_release();
  txl_cuda_layernorm_release();
  txl_cuda_elementwise_release();
  txl_cuda_embedding_release();
  txl_cuda_upload_release();
  txl_cuda_host_wait_release();
  if (g_readback) CUDA_CHECK(cudaFreeHost(g_readback)); /* waits for the device: no copy still writes it */
  g_readback = NULL;
  txl_cuda_stream_release();
}

/* Nothing to mark: this is not the profiling table (kernels/profile.h wraps it). */
extern "C" void txl_cuda_mark(int region) { (void)region; }
