/* How the host waits for the device (kernels/cuda/cuda_ops.h: txl_cuda_set_host_wait). */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static TxlCudaHostWait g_wait = NULL;
/* Recorded by txl_cuda_wait_stream on the stream it waits for when a host wait is set (made on
 * first use, on the device current then: txl drives one device per process). */
static cudaEvent_t g_mark = NULL;

extern "C" void txl_cuda_set_host_wait(TxlCudaHostWait fn) { g_wait = fn; }

int txl_cuda_host_wait_set(void) { return g_wait != NULL; }

int txl_cuda_event_done(void *event) {
  const cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (rc == cudaErrorNotReady) {
    (void)cudaGetLastError(); /* "not ready" is an answer, not an error: cleared so that no later check sees it */
    return 0;
  }
  CUDA_CHECK(rc);
  return 1;
}

extern "C" void txl_cuda_wait_event(void *event, const char *what) {
  cudaEvent_t ev = static_cast<cudaEvent_t>(event);
  if (g_wait) g_wait(txl_cuda_event_done, ev, what);
  CUDA_CHECK(cudaEventSynchronize(ev)); /* after g_wait, the work is complete: no wait here */
}

extern "C" void txl_cuda_wait_stream(void *stream, const char *what) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (g_wait) {
    if (!g_mark) CUDA_CHECK(cudaEventCreateWithFlags(&g_mark, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(g_mark, s));
    g_wait(txl_cuda_event_done, g_mark, what);
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
}

void txl_cuda_host_wait_release(void) {
  if (g_mark) CUDA_CHECK(cudaEventDestroy(g_mark));
  g_mark = NULL;
}
