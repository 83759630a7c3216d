/* The gradient all-reduce: the one gradient buffer summed across ranks in buckets, each bucket
 * started as soon as the backward pass has finished its slice (last layer first), so the
 * communication overlaps the rest of the backward pass. CPU backend: MPI_Iallreduce on host
 * memory; GPU backend: a device transport (NCCL, dist/nccl.h) given to txl_reducer_create_with. */
#ifndef TXL_DIST_REDUCE_H
#define TXL_DIST_REDUCE_H

#include <stdint.h>

typedef struct TxlReducer TxlReducer;

/* Sums buf[0, n) across all ranks in buckets of at most bucket_elems, in the order the slices
 * are announced. overlap: 1 = start each bucket as soon as its slice is announced
 * (MPI_Iallreduce), 0 = reduce them one after another in txl_reducer_finish.
 * With one rank every call returns at once. collective: all ranks (every function) */
TxlReducer *txl_reducer_create(float *buf, int64_t n, int64_t bucket_elems, int overlap);
/* A transport that sums device memory: start queues the sum of p[0, n) across ranks (it may
 * return before the sum is done); finish returns once every queued sum is in place, or ordered
 * before any later device work (a GPU transport need not block the host). */
typedef struct {
  void *ctx;
  void (*start)(void *ctx, float *p, int64_t n);
  void (*finish)(void *ctx);
  /* recv[r * bytes, (r + 1) * bytes) = rank r's send[0, bytes) (device memory), ordered after the
   * device work queued before the call and before any queued after it (the host need not block) */
  void (*gather)(void *ctx, const void *send, void *recv, int64_t bytes);
} TxlReduceTransport;

/* The same reducer summing through `t` instead of MPI; with overlap 0 every bucket is started in
 * txl_reducer_finish. collective: all ranks */
TxlReducer *txl_reducer_create_with(const TxlReduceTransport *t, float *buf, int64_t n, int64_t bucket_elems,
                                    int overlap);
/* [begin, end) is final on this rank (every rank announces the same slices in the same order). */
void txl_reducer_ready(TxlReducer *r, int64_t begin, int64_t end);
/* Every element announced exactly once; returns when all sums are in buf, ready for the next step.
 * The MPI path waits under dist.timeout_s (dist/dist.h); a transport's finish is its own. */
void txl_reducer_finish(TxlReducer *r);
/* The gather of the row-sparse gradients (src/train/step.c): recv[r * bytes, (r + 1) * bytes) =
 * rank r's send[0, bytes), on every rank, in the memory the reducer sums (host memory on the MPI
 * path, device memory through a transport); after txl_reducer_finish of the same step. The MPI
 * path waits under dist.timeout_s, like the sums. collective: all ranks */
void txl_reducer_gather(TxlReducer *r, const void *send, void *recv, int64_t bytes);
/* Bytes this rank sent to the gathers since create (the --bench figure). */
double txl_reducer_gathered_bytes(const TxlReducer *r);
/* Seconds spent blocked in txl_reducer_finish since create. */
double txl_reducer_wait_seconds(const TxlReducer *r);
/* 1 when that time is the communication's cost (MPI on the host); 0 for a device transport,
 * whose finish only orders the device's work (the host does not wait there). */
int txl_reducer_host_waits(const TxlReducer *r);
/* Elements summed per step. */
int64_t txl_reducer_size(const TxlReducer *r);
void txl_reducer_destroy(TxlReducer *r);

#endif
