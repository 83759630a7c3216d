/* The backend's compute stream (cuda_util.h: txl_cuda_stream). Every op is ordered on it. */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

/* One non-blocking stream, made on the current device by the first call (as the cuBLAS handle is
 * made on first use, gemm.cu), destroyed by txl_cuda_release (a later op makes a new one).
 * Non-blocking: it does not synchronise implicitly with the legacy default stream 0, so nothing
 * of the backend may use stream 0 (tests/cuda/test_one_stream.sh checks the sources), and a host
 * read of its results waits for this stream (to_host: cudaStreamSynchronize). A stream other than
 * 0 is also what a CUDA graph capture needs. */
static cudaStream_t g_stream = NULL;

cudaStream_t txl_cuda_stream(void) {
  if (!g_stream) CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
  return g_stream;
}

extern "C" void *txl_cuda_compute_stream(void) { return (void *)txl_cuda_stream(); }

void txl_cuda_stream_release(void) {
  if (!g_stream) return;
  CUDA_CHECK(cudaStreamDestroy(g_stream)); /* work still queued completes first (the runtime's rule) */
  g_stream = NULL;
}
