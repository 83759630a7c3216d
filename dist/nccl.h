/* The GPU gradient all-reduce: one NCCL communicator over all ranks (one GPU per rank) and a
 * communication stream of its own, so reductions overlap the compute stream's work, and the gather of the embedding's gradient rows (ncclAllGather).
 * Built only with the CUDA backend (TXL_HAVE_CUDA). CUDA handles cross this header as void *
 * (a cudaEvent_t, a cudaStream_t), so that callers need no CUDA or NCCL headers. */
#ifndef TXL_DIST_NCCL_H
#define TXL_DIST_NCCL_H

#include <stdint.h>

#include "dist/reduce.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TxlNccl TxlNccl;

/* Makes `gpu` this thread's current device (cudaSetDevice), joins the communicator of the
 * `world` ranks of MPI_COMM_WORLD (rank 0 makes the id, MPI_Bcast hands it out) and creates
 * the communication stream. compute_stream (a cudaStream_t on that device, not NULL: the legacy
 * default stream is no compute stream here) is where the transport's buckets wait for the
 * gradients and what waits for the reductions. MPI must be initialised. collective: all ranks */
TxlNccl *txl_nccl_create(int rank, int world, int gpu, void *compute_stream);

/* Sums dev[0, n) (device memory, float) in place across ranks on the communication stream.
 * If wait_event (a cudaEvent_t recorded by the caller on its compute stream once dev[0, n) was
 * final) is not NULL, the reduction first waits for it on the GPU; the host never blocks.
 * Every rank queues the same reductions in the same order. collective: all ranks */
void txl_nccl_allreduce_sum(TxlNccl *c, float *dev, int64_t n, void *wait_event);

/* Makes compute_stream (a cudaStream_t, not NULL) wait for every reduction queued so far, without
 * blocking the host. */
void txl_nccl_join(TxlNccl *c, void *compute_stream);

/* Blocks the host until every reduction queued so far is done; reports asynchronous NCCL errors. */
void txl_nccl_wait(TxlNccl *c);

/* The gradient reducer's transport over this communicator (dist/reduce.h): each bucket waits
 * on the GPU for the compute work queued before it (an event recorded on the compute stream of
 * txl_nccl_create, where every op runs), then is summed on the communication stream; finish makes
 * the compute stream wait for all of them (the host does not block); its gather runs on the
 * communication stream after the compute work queued before it, and the compute stream waits for
 * it. Neither stream synchronises implicitly with the other (both are non-blocking): these events
 * are the whole ordering. */
TxlReduceTransport txl_nccl_transport(TxlNccl *c);

/* Waits for the queued reductions, then frees the communicator and the stream (NULL: nothing).
 * collective: all ranks */
void txl_nccl_destroy(TxlNccl *c);

#ifdef __cplusplus
}
#endif

#endif
