#include "dist/reduce.h"

#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "dist/wait.h"
#include "src/base/timer.h"

struct TxlReducer {
  float *buf;
  int64_t n, bucket;
  int overlap, world;
  int64_t announced;    /* elements announced this step */
  MPI_Request *req;     /* outstanding buckets (overlap) */
  int n_req, cap_req;
  int64_t *pend_begin;  /* slices waiting for finish (no overlap) */
  int64_t *pend_end;
  int n_pend, cap_pend;
  double wait_s;
  double gathered;      /* bytes sent to txl_reducer_gather */
  int64_t *owner_lo;    /* [world + 1] txl_reducer_set_owners's, or NULL: every rank gets every sum */
  int rank;
  TxlReduceTransport transport; /* start == NULL: MPI on host memory */
};

TxlReducer *txl_reducer_create(float *buf, int64_t n, int64_t bucket_elems, int overlap) {
  TxlReducer *r = txl_calloc(1, sizeof *r, "reducer");
  r->buf = buf;
  r->n = n;
  r->bucket = bucket_elems > 0 && bucket_elems < n ? bucket_elems : n;
  if (r->bucket > (int64_t)1 << 30) r->bucket = (int64_t)1 << 30; /* MPI counts are int */
  if (r->bucket < 1) r->bucket = 1;
  r->overlap = overlap;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &r->world));
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &r->rank));
  return r;
}

TxlReducer *txl_reducer_create_with(const TxlReduceTransport *t, float *buf, int64_t n, int64_t bucket_elems,
                                    int overlap) {
  TxlReducer *r = txl_reducer_create(buf, n, bucket_elems, overlap);
  r->transport = *t;
  return r;
}

static MPI_Request *next_request(TxlReducer *r) {
  if (r->n_req == r->cap_req) {
    r->cap_req = r->cap_req ? 2 * r->cap_req : 64;
    r->req = realloc(r->req, (size_t)r->cap_req * sizeof *r->req);
    ALLOC_CHECK(r->req);
  }
  return &r->req[r->n_req++];
}

/* The sum of buf[b, b + len) to every rank, or to `root` alone (root >= 0). */
static void post_one(TxlReducer *r, int64_t b, int64_t len, int root) {
  float *p = r->buf + b;
  if (r->transport.start) {
    if (root < 0) r->transport.start(r->transport.ctx, p, len);
    else r->transport.reduce(r->transport.ctx, p, len, root);
    return;
  }
  /* without overlap: one bucket after another, as blocking calls would, but under the deadline */
  MPI_Request one, *req = r->overlap ? next_request(r) : &one;
  if (root < 0)
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, p, (int)len, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, req));
  else /* the root sums in place; another rank's p is only sent */
    MPI_CHECK(MPI_Ireduce(r->rank == root ? MPI_IN_PLACE : p, p, (int)len, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD, req));
  if (!r->overlap) txl_dist_wait(1, req, "the gradient all-reduce");
}

static void post(TxlReducer *r, int64_t begin, int64_t end) {
  for (int64_t b = begin; b < end; b += r->bucket) {
    const int64_t e = end - b < r->bucket ? end : b + r->bucket;
    if (!r->owner_lo) {
      post_one(r, b, e - b, -1);
      continue;
    }
    for (int k = 0; k < r->world; k++) { /* the bucket's part in each owner's slice */
      const int64_t lo = b > r->owner_lo[k] ? b : r->owner_lo[k];
      const int64_t hi = e < r->owner_lo[k + 1] ? e : r->owner_lo[k + 1];
      if (hi > lo) post_one(r, lo, hi - lo, k);
    }
  }
}

void txl_reducer_set_owners(TxlReducer *r, const int64_t *lo) {
  if (lo[0] != 0 || lo[r->world] != r->n) txl_fatal("internal: reducer: owners of [%lld, %lld), the buffer is [0, %lld)",
                                                    (long long)lo[0], (long long)lo[r->world], (long long)r->n);
  for (int k = 0; k < r->world; k++)
    if (lo[k + 1] < lo[k]) txl_fatal("internal: reducer: rank %d's slice ends before it starts", k);
  if (r->transport.start && (!r->transport.reduce || !r->transport.share || !r->transport.sum_f64))
    txl_fatal("internal: the reducer's transport cannot reduce to owners");
  if (r->world == 1) return;
  free(r->owner_lo);
  r->owner_lo = txl_malloc((size_t)(r->world + 1) * sizeof *r->owner_lo, "reducer: the slices' owners");
  memcpy(r->owner_lo, lo, (size_t)(r->world + 1) * sizeof *lo);
}

void txl_reducer_sum_f64(TxlReducer *r, double *p, int n) {
  if (r->world == 1 || n <= 0) return;
  double t0 = txl_now_s();
  if (r->transport.start) {
    if (!r->transport.sum_f64) txl_fatal("internal: the reducer's transport cannot sum doubles");
    r->transport.sum_f64(r->transport.ctx, p, n);
  } else {
    txl_dist_allreduce_sum_f64(p, n);
  }
  r->wait_s += txl_now_s() - t0;
}

void txl_reducer_share(TxlReducer *r, void *base, size_t elem_bytes) {
  if (r->world == 1) return;
  if (!r->owner_lo) txl_fatal("internal: reducer: a share without owners");
  double t0 = txl_now_s();
  if (r->transport.start) r->transport.share(r->transport.ctx, base, r->owner_lo, elem_bytes, r->world);
  else txl_dist_share(base, r->owner_lo, elem_bytes, "the parameters' all-gather");
  r->wait_s += txl_now_s() - t0;
}

void txl_reducer_ready(TxlReducer *r, int64_t begin, int64_t end) {
  if (begin < 0 || end > r->n || begin > end) txl_fatal("reducer: slice [%lld, %lld) outside [0, %lld)",
                                                        (long long)begin, (long long)end, (long long)r->n);
  r->announced += end - begin;
  if (r->world == 1 || begin == end) return;
  if (r->overlap) {
    post(r, begin, end);
    if (r->transport.start) return;
    /* Open MPI advances non-blocking collectives only inside MPI calls: give it a turn. */
    int done = 0;
    MPI_CHECK(MPI_Testall(r->n_req, r->req, &done, MPI_STATUSES_IGNORE));
    return;
  }
  if (r->n_pend == r->cap_pend) {
    r->cap_pend = r->cap_pend ? 2 * r->cap_pend : 64;
    r->pend_begin = realloc(r->pend_begin, (size_t)r->cap_pend * sizeof(int64_t));
    r->pend_end = realloc(r->pend_end, (size_t)r->cap_pend * sizeof(int64_t));
    ALLOC_CHECK(r->pend_begin);
    ALLOC_CHECK(r->pend_end);
  }
  r->pend_begin[r->n_pend] = begin;
  r->pend_end[r->n_pend++] = end;
}

void txl_reducer_finish(TxlReducer *r) {
  if (r->announced != r->n)
    txl_fatal("reducer: %lld of %lld elements announced before finish", (long long)r->announced, (long long)r->n);
  r->announced = 0;
  if (r->world == 1) return;
  double t0 = txl_now_s();
  if (!r->overlap) {
    for (int i = 0; i < r->n_pend; i++) post(r, r->pend_begin[i], r->pend_end[i]);
    r->n_pend = 0;
  }
  if (r->transport.start) {
    r->transport.finish(r->transport.ctx);
  } else if (r->overlap) { /* under dist.timeout_s: a rank that never sends its gradient ends the job */
    txl_dist_wait(r->n_req, r->req, "the gradient all-reduce");
    r->n_req = 0;
  }
  r->wait_s += txl_now_s() - t0;
}

void txl_reducer_gather(TxlReducer *r, const void *send, void *recv, int64_t bytes) {
  if (bytes < 0 || bytes > INT_MAX) txl_fatal("reducer: a gather of %lld bytes per rank (at most %d)", (long long)bytes, INT_MAX);
  r->gathered += (double)bytes;
  double t0 = txl_now_s();
  if (r->transport.start) {
    if (!r->transport.gather) txl_fatal("internal: the reducer's transport cannot gather");
    r->transport.gather(r->transport.ctx, send, recv, bytes);
  } else {
    MPI_Request req;
    MPI_CHECK(MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req));
    txl_dist_wait(1, &req, "the gather of the embedding rows");
  }
  r->wait_s += txl_now_s() - t0;
}

double txl_reducer_gathered_bytes(const TxlReducer *r) { return r->gathered; }
double txl_reducer_wait_seconds(const TxlReducer *r) { return r->wait_s; }
int txl_reducer_host_waits(const TxlReducer *r) { return r->transport.start == NULL; }
int64_t txl_reducer_size(const TxlReducer *r) { return r->n; }

void txl_reducer_destroy(TxlReducer *r) {
  if (!r) return;
  free(r->req);
  free(r->pend_begin);
  free(r->pend_end);
  free(r->owner_lo);
  free(r);
}
