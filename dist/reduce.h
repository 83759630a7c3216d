/* The gradient all-reduce: the one gradient buffer summed across ranks in buckets, each bucket
 * started as soon as the backward pass has finished its slice (last layer first), so the
 * communication overlaps the rest of the backward pass. CPU backend: MPI_Iallreduce on host
 * memory; GPU backend: a device transport (NCCL, dist/nccl.h) given to txl_reducer_create_with. */
#ifndef TXL_DIST_REDUCE_H
#define TXL_DIST_REDUCE_H

#include <stddef.h>
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
  /* As start, but the sum of p[0, n) reaches rank `root` alone (the others' p keeps its values). */
  void (*reduce)(void *ctx, float *p, int64_t n, int root);
  /* p[0, n) (device memory, doubles) summed in place across ranks, ordered as gather. */
  void (*sum_f64)(void *ctx, double *p, int n);
  /* The elements base[lo[k], lo[k + 1]) (of elem_bytes bytes each, device memory) copied from
   * rank k to every rank, for each of the `world` ranks k, in place; ordered as gather. */
  void (*share)(void *ctx, void *base, const int64_t *lo, size_t elem_bytes, int world);
} TxlReduceTransport;

/* The same reducer summing through `t` instead of MPI; with overlap 0 every bucket is started in
 * txl_reducer_finish. collective: all ranks */
TxlReducer *txl_reducer_create_with(const TxlReduceTransport *t, float *buf, int64_t n, int64_t bucket_elems,
                                    int overlap);
/* ZeRO-1 (dist.shard_optimizer, src/optim/shard.h): rank k owns buf[lo[k], lo[k + 1]) (lo
 * [world + 1], lo[0] = 0, lo[world] = n, increasing; kept by value). From now on each bucket is
 * summed onto its owners alone: each part of it is reduced to the rank owning it; the rest of buf
 * holds no sum (its contents are unspecified: nobody reads them). With one rank nothing changes. */
void txl_reducer_set_owners(TxlReducer *r, const int64_t *lo);
/* p[0, n) (doubles, in the memory the reducer sums) summed in place across ranks, after the work
 * before it (as the gather). collective: all ranks */
void txl_reducer_sum_f64(TxlReducer *r, double *p, int n);
/* Each owner's slice of base (elements of elem_bytes, laid out as buf: rank k's at
 * [lo[k], lo[k + 1]) elements) from its owner to every rank, in place (an all-gather of the
 * updated parameters). collective: all ranks */
void txl_reducer_share(TxlReducer *r, void *base, size_t elem_bytes);

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
/* Seconds spent blocked in txl_reducer_finish (and the shard's sum and share) since create. */
double txl_reducer_wait_seconds(const TxlReducer *r);
/* 1 when that time is the communication's cost (MPI on the host); 0 for a device transport,
 * whose finish only orders the device's work (the host does not wait there). */
int txl_reducer_host_waits(const TxlReducer *r);
/* Elements summed per step. */
int64_t txl_reducer_size(const TxlReducer *r);
void txl_reducer_destroy(TxlReducer *r);

#endif
