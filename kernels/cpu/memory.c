/* Memory of the CPU backend: host memory, 256-byte aligned like cudaMalloc's (at least a cache
 * line, an AVX-512 vector): the model's layouts (the parameter table's padding, the per-layer
 * memory slices) align their tensors relative to a buffer start of that alignment. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "src/base/error.h"

#define TXL_CPU_ALIGN 256

void *txl_cpu_alloc(size_t bytes, const char *what) {
  size_t rounded = (bytes + TXL_CPU_ALIGN - 1) / TXL_CPU_ALIGN * TXL_CPU_ALIGN;
  if (rounded < bytes) txl_fatal("allocation size %zu bytes for %s overflows", bytes, what);
  if (rounded == 0) rounded = TXL_CPU_ALIGN;
  void *p = aligned_alloc(TXL_CPU_ALIGN, rounded);
  if (!p) txl_fatal("out of memory allocating %zu bytes for %s", bytes, what ? what : "(unnamed)");
  memset(p, 0, rounded);
  return p;
}

void txl_cpu_free(void *p) { free(p); }

void txl_cpu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
}

void txl_cpu_to_device(void *dst, const void *host_src, size_t bytes) {
  txl_cpu_copy(dst, host_src, bytes);
}

void txl_cpu_to_host(void *host_dst, const void *src, size_t bytes) {
  txl_cpu_copy(host_dst, src, bytes);
}

void txl_cpu_upload(void *dst, const void *host_src, size_t bytes) { txl_cpu_copy(dst, host_src, bytes); }

/* upload copies at once: no staging. */
void txl_cpu_upload_reserve(size_t bytes) {}

void txl_cpu_to_act(void *dst, const float *src, int64_t n) {
  txl_cpu_copy(dst, src, (size_t)n * sizeof(float));
}

void txl_cpu_zero(void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}

/* The CPU ops keep no scratch of their own: nothing to reserve. */
void txl_cpu_reserve(int64_t rows, int bias_n, int norm_d) {}

/* Nothing to mark: the CPU table is not the profiling one. */
void txl_cpu_mark(int region) { (void)region; }
