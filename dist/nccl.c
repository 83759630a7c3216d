/* NCCL behind dist/nccl.h. Note: <nccl.h> below is the library's header (angle brackets never
 * search this folder), "dist/nccl.h" ours. The emulated build (TXL_CUDA_EMU: the library
 * txl_nccl_emu) compiles this file as C++ against the emulator's CUDA and NCCL (kernels/emu), so
 * it is C that is also C++. */
#include "dist/nccl.h"

#include <mpi.h>
#include <stdlib.h>
#ifdef TXL_CUDA_EMU
#include "kernels/emu/nccl_emu.h"
#else
#include <nccl.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "dist/dist.h"
#include "dist/wait.h"
#ifdef __cplusplus
}
#endif
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

#define NCCL_CHECK(call)                                                                      \
  do {                                                                                        \
    const ncclResult_t txl_nccl_rc_ = (call);                                                 \
    if (txl_nccl_rc_ != ncclSuccess)                                                          \
      txl_fatal("%s:%d: NCCL: %s failed: %s", __FILE__, __LINE__, #call,                      \
                ncclGetErrorString(txl_nccl_rc_));                                            \
  } while (0)

/* ncclAllReduce takes a size_t count; slices keep each call to a size every NCCL handles. */
#define TXL_NCCL_SLICE ((int64_t)1 << 30)

struct TxlNccl {
  ncclComm_t comm;
  cudaStream_t stream;  /* communication stream: every reduction runs here, in call order */
  cudaEvent_t done;     /* recorded by txl_nccl_join after the last queued reduction */
  cudaEvent_t ready;    /* recorded on the compute stream before each transport bucket */
  cudaStream_t compute; /* the compute stream of the transport (txl_nccl_create's) */
  int gpu;
};

TxlNccl *txl_nccl_create(int rank, int world, int gpu, void *compute_stream) {
  if (!compute_stream) txl_fatal("internal: txl_nccl_create without a compute stream (stream 0 is not one)");
  TxlNccl *c = (TxlNccl *)txl_calloc(1, sizeof *c, "NCCL communicator");
  c->gpu = gpu;
  c->compute = (cudaStream_t)compute_stream;
  CUDA_CHECK(cudaSetDevice(gpu));
  ncclUniqueId id;
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  NCCL_CHECK(ncclCommInitRank(&c->comm, world, id, rank));
  CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
  /* from now on the GPU's work may wait for the other ranks: so do the host's waits for it,
   * under dist.timeout_s (dist/wait.h) */
  txl_cuda_set_host_wait(txl_dist_wait_device);
#ifdef TXL_CUDA_EMU
  /* the emulated GPU runs its queued work (a collective the other ranks have now reached, and what
   * waits behind it) only inside emulator calls: dist/ makes one while the host waits in MPI, as a
   * GPU goes on meanwhile by itself (else a rank waiting in MPI for a rank whose GPU waits for this
   * rank's collective would wait for ever) */
  txl_dist_wait_set_progress(txl_emu_progress);
#endif
  return c;
}

void txl_nccl_allreduce_sum(TxlNccl *c, float *dev, int64_t n, void *wait_event) {
  if (n <= 0) return;
  if (wait_event) CUDA_CHECK(cudaStreamWaitEvent(c->stream, (cudaEvent_t)wait_event, 0));
  for (int64_t off = 0; off < n; off += TXL_NCCL_SLICE) {
    const size_t count = (size_t)(n - off < TXL_NCCL_SLICE ? n - off : TXL_NCCL_SLICE);
    NCCL_CHECK(ncclAllReduce(dev + off, dev + off, count, ncclFloat, ncclSum, c->comm, c->stream));
  }
}

void txl_nccl_join(TxlNccl *c, void *compute_stream) {
  if (!compute_stream) txl_fatal("internal: txl_nccl_join without a compute stream (stream 0 is not one)");
  CUDA_CHECK(cudaEventRecord(c->done, c->stream));
  CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)compute_stream, c->done, 0));
}

void txl_nccl_wait(TxlNccl *c) {
  txl_cuda_wait_stream(c->stream, "NCCL's stream");
  ncclResult_t async = ncclSuccess;
  NCCL_CHECK(ncclCommGetAsyncError(c->comm, &async));
  if (async != ncclSuccess)
    txl_fatal("NCCL: asynchronous error in an all-reduce: %s (%s)", ncclGetErrorString(async),
              ncclGetLastError(c->comm));
}

/* One event serves every bucket: cudaStreamWaitEvent waits for the work captured by the most
 * recent record at the time of the call, so re-recording it afterwards is safe. */
static void transport_start(void *ctx, float *p, int64_t n) {
  TxlNccl *c = (TxlNccl *)ctx;
  CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
  txl_nccl_allreduce_sum(c, p, n, c->ready);
}

static void transport_finish(void *ctx) {
  TxlNccl *c = (TxlNccl *)ctx;
  txl_nccl_join(c, c->compute);
}

/* After the compute work queued so far (send is final), on the communication stream; then the
 * compute stream waits for it, so the rows are in recv before anything later reads them. */
static void transport_gather(void *ctx, const void *send, void *recv, int64_t bytes) {
  TxlNccl *c = (TxlNccl *)ctx;
  CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
  NCCL_CHECK(ncclAllGather(send, recv, (size_t)bytes, ncclUint8, c->comm, c->stream));
  txl_nccl_join(c, c->compute);
}

/* As transport_start, to `root` alone (in place there; NCCL reads the others' p only). */
static void transport_reduce(void *ctx, float *p, int64_t n, int root) {
  TxlNccl *c = (TxlNccl *)ctx;
  if (n <= 0) return;
  CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
  for (int64_t off = 0; off < n; off += TXL_NCCL_SLICE) {
    const size_t count = (size_t)(n - off < TXL_NCCL_SLICE ? n - off : TXL_NCCL_SLICE);
    NCCL_CHECK(ncclReduce(p + off, p + off, count, ncclFloat, ncclSum, root, c->comm, c->stream));
  }
}

/* As the gather: after the compute work so far, and before the compute work after it. */
static void transport_sum_f64(void *ctx, double *p, int n) {
  TxlNccl *c = (TxlNccl *)ctx;
  CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
  NCCL_CHECK(ncclAllReduce(p, p, (size_t)n, ncclFloat64, ncclSum, c->comm, c->stream));
  txl_nccl_join(c, c->compute);
}

/* One broadcast per owner, in one group (NCCL may run them at once), each in place. */
static void transport_share(void *ctx, void *base, const int64_t *lo, size_t elem_bytes, int world) {
  TxlNccl *c = (TxlNccl *)ctx;
  const int64_t e = (int64_t)elem_bytes;
  CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
  CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
  NCCL_CHECK(ncclGroupStart());
  for (int k = 0; k < world; k++)
    for (int64_t off = lo[k] * e, end = lo[k + 1] * e; off < end; off += TXL_NCCL_SLICE) {
      const size_t count = (size_t)(end - off < TXL_NCCL_SLICE ? end - off : TXL_NCCL_SLICE);
      char *p = (char *)base + off;
      NCCL_CHECK(ncclBroadcast(p, p, count, ncclUint8, k, c->comm, c->stream));
    }
  NCCL_CHECK(ncclGroupEnd());
  txl_nccl_join(c, c->compute);
}

TxlReduceTransport txl_nccl_transport(TxlNccl *c) {
  TxlReduceTransport t = {c, transport_start, transport_finish, transport_gather, transport_reduce, transport_sum_f64,
                          transport_share};
  return t;
}

void txl_nccl_destroy(TxlNccl *c) {
  if (!c) return;
  CUDA_CHECK(cudaSetDevice(c->gpu));
  txl_nccl_wait(c);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
  NCCL_CHECK(ncclCommFinalize(c->comm));  /* blocking communicator: returns once quiescent */
#endif
  NCCL_CHECK(ncclCommDestroy(c->comm));
  txl_cuda_set_host_wait(NULL);
#ifdef TXL_CUDA_EMU
  txl_dist_wait_set_progress(NULL);
#endif
  CUDA_CHECK(cudaEventDestroy(c->done));
  CUDA_CHECK(cudaEventDestroy(c->ready));
  CUDA_CHECK(cudaStreamDestroy(c->stream));
  free(c);
}
