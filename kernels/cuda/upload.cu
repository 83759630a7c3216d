/* upload and upload_reserve (kernels/ops.def): the small host inputs of a forward pass to the
 * device without a host synchronisation.
 *
 * A ring of TXL_UPLOAD_SLOTS slots of page-locked memory (cudaMallocHost, made by upload_reserve
 * when a run is created, never in a step). Each upload copies its bytes into the current slot (a
 * host memcpy of a few KiB), then queues cudaMemcpyAsync from there on the compute stream
 * (txl_cuda_stream, as every op): from page-locked memory the copy does not wait for the device (the runtime's "API synchronization behavior"), from pageable memory it would. When an
 * upload does not fit in what is left of the slot, the host records an event after the slot's
 * copies and moves to the next slot; before it writes a slot again it asks that slot's event
 * (cudaEventQuery, which never waits) and waits for it (cudaEventSynchronize) only when the device
 * has not made those copies yet, i.e. when the host runs a whole ring ahead of the device. */
#include <string.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

enum { TXL_UPLOAD_SLOTS = 8 };

static struct {
  unsigned char *ring;                    /* [TXL_UPLOAD_SLOTS, slot] page-locked */
  size_t slot;                            /* bytes of one slot: upload_reserve's largest */
  size_t used;                            /* bytes of the current slot already taken */
  int cur;                                /* the current slot */
  cudaEvent_t left[TXL_UPLOAD_SLOTS];     /* recorded after a slot's copies, when the host left it */
  int pending[TXL_UPLOAD_SLOTS];          /* left[k] recorded and not yet seen complete */
} g_up;

void txl_cuda_upload_release(void) {
  if (!g_up.ring) return;
  CUDA_CHECK(cudaFreeHost(g_up.ring)); /* waits for the device: no copy still reads the ring */
  for (int k = 0; k < TXL_UPLOAD_SLOTS; k++) CUDA_CHECK(cudaEventDestroy(g_up.left[k]));
  memset(&g_up, 0, sizeof g_up);
}

extern "C" void txl_cuda_upload_reserve(size_t bytes) {
  if (bytes <= g_up.slot) return;
  txl_cuda_upload_release();
  void *p = NULL;
  const cudaError_t rc = cudaMallocHost(&p, (size_t)TXL_UPLOAD_SLOTS * bytes);
  if (rc != cudaSuccess)
    txl_fatal("out of page-locked host memory allocating %zu bytes for the upload staging: %s",
              (size_t)TXL_UPLOAD_SLOTS * bytes, cudaGetErrorString(rc));
  g_up.ring = static_cast<unsigned char *>(p);
  g_up.slot = bytes;
  for (int k = 0; k < TXL_UPLOAD_SLOTS; k++) CUDA_CHECK(cudaEventCreateWithFlags(&g_up.left[k], cudaEventDisableTiming));
}

/* Leaves the current slot (an event after its copies) for the next one, once the device has made
 * the copies that slot held a ring ago. */
static void next_slot(void) {
  CUDA_CHECK(cudaEventRecord(g_up.left[g_up.cur], txl_cuda_stream()));
  g_up.pending[g_up.cur] = 1;
  g_up.cur = (g_up.cur + 1) % TXL_UPLOAD_SLOTS;
  g_up.used = 0;
  if (!g_up.pending[g_up.cur]) return;
  /* asked first: a wait is a synchronisation (counted on the emulator), a query is not */
  if (!txl_cuda_event_done(g_up.left[g_up.cur])) txl_cuda_wait_event(g_up.left[g_up.cur], "the upload ring's copies");
  g_up.pending[g_up.cur] = 0;
}

extern "C" void txl_cuda_upload(void *dst, const void *host_src, size_t bytes) {
  if (!bytes) return;
  /* a captured copy would read this slot again at every replay, whatever the host put there since:
   * the inputs of a captured step are uploaded before its graph's launch (src/train/graph_step.c) */
  if (txl_cuda_capturing()) txl_fatal("internal: upload of %zu bytes while the compute stream is captured", bytes);
  if (bytes > g_up.slot)
    txl_fatal("internal: upload of %zu bytes, %zu reserved (upload_reserve)", bytes, g_up.slot);
  if (g_up.used + bytes > g_up.slot) next_slot();
  unsigned char *stage = g_up.ring + (size_t)g_up.cur * g_up.slot + g_up.used;
  memcpy(stage, host_src, bytes);
  CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, txl_cuda_stream()));
  g_up.used += bytes;
}
