/* The bucketed gradient reducer (dist/reduce.h) against sums computed locally, nccl-tests style.
 * Run under mpirun with any number of ranks.
 *
 * Every rank fills the buffer with small integers that depend on (rank, index, step), so every
 * partial sum is an integer below 2^24 and exact in float whatever the summation order; the
 * result must therefore equal the locally computed sum bit for bit. Slices are announced last
 * first (as the backward pass announces the last layer first), at odd boundaries; each reducer
 * runs two steps (it is reused from one step to the next), and a guard past the end of the
 * buffer must stay untouched. Each case runs twice: with the reducer's own MPI path, and through
 * a transport (txl_reducer_create_with, the path the GPU's NCCL transport takes) that only
 * queues each bucket when it is started and sums the queue in its finish, as an asynchronous
 * device transport may. All ranks agree on each verdict; rank 0 prints
 *   size N bucket B overlap O [transport]: PASS|FAIL
 * then ZeRO-1's reduce to each slice's owner, sum of doubles and share (txl_reducer_set_owners),
 *   shard size N bucket B overlap O [transport]: PASS|FAIL
 * then the gather of blocks of bytes (txl_reducer_gather) both ways,
 *   gather N bytes [transport]: PASS|FAIL
 * and "allreduce: P passed, F failed"; every rank exits 0 only if nothing failed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "dist/dist.h"
#include "dist/reduce.h"

#define GUARD 16
#define GUARD_VALUE 12345.5f
#define MAX_SLICES 7

static TxlDist g_d;

/* An integer in [-1023, 1023]: |sum over ranks| < 2^20 for up to 1024 ranks. */
static int32_t value(int rank, int64_t i, int step) {
  uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)(rank + 1) * 0xBF58476D1CE4E5B9ull +
               (uint64_t)(step + 1) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return (int32_t)(h % 2047) - 1023;
}

/* Up to MAX_SLICES slices of [0, n) at odd places, the same on every rank: cut[0] = 0 < cut[1]
 * < ... < cut[k] = n. Returns k. */
static int make_slices(int64_t n, int64_t *cut) {
  int k = n < MAX_SLICES ? (int)n : MAX_SLICES;
  uint64_t s = (uint64_t)n * 6364136223846793005ull + 1442695040888963407ull;
  cut[0] = 0;
  for (int j = 1; j < k; j++) {
    /* somewhere in the j-th of k equal parts, never on a round number on purpose */
    int64_t lo = n * j / k - n / (2 * k), span = n / k;
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int64_t c = lo + (span > 1 ? (int64_t)((s >> 33) % (uint64_t)span) : 0);
    if (c <= cut[j - 1]) c = cut[j - 1] + 1;
    if (c > n - (k - j)) c = n - (k - j);
    cut[j] = c;
  }
  cut[k] = n;
  return k;
}

/* A transport that defers every sum to its finish (MPI underneath). */
typedef struct {
  float *p[4096];
  int64_t n[4096];
  int root[4096]; /* -1: to every rank (start), else a reduce to that rank */
  int queued;
  int overflow;
} Deferred;

static void deferred_start(void *ctx, float *p, int64_t n) {
  Deferred *q = ctx;
  if (q->queued == 4096) {
    q->overflow = 1;
    return;
  }
  q->p[q->queued] = p;
  q->root[q->queued] = -1;
  q->n[q->queued++] = n;
}

static void deferred_reduce(void *ctx, float *p, int64_t n, int root) {
  Deferred *q = ctx;
  deferred_start(ctx, p, n);
  if (!q->overflow) q->root[q->queued - 1] = root;
}

static void deferred_finish(void *ctx) {
  Deferred *q = ctx;
  for (int i = 0; i < q->queued; i++) {
    if (q->root[i] < 0) {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, q->p[i], (int)q->n[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
      continue;
    }
    const int root = q->root[i];
    MPI_CHECK(MPI_Reduce(g_d.rank == root ? MPI_IN_PLACE : q->p[i], q->p[i], (int)q->n[i], MPI_FLOAT, MPI_SUM, root,
                         MPI_COMM_WORLD));
  }
  q->queued = 0;
}

static void deferred_sum_f64(void *ctx, double *p, int n) {
  (void)ctx;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, p, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

/* one broadcast per owner, as the NCCL transport does */
static void deferred_share(void *ctx, void *base, const int64_t *lo, size_t elem_bytes, int world) {
  (void)ctx;
  const int64_t e = (int64_t)elem_bytes;
  for (int k = 0; k < world; k++)
    MPI_CHECK(MPI_Bcast((char *)base + lo[k] * e, (int)((lo[k + 1] - lo[k]) * e), MPI_BYTE, k, MPI_COMM_WORLD));
}

static void deferred_gather(void *ctx, const void *send, void *recv, int64_t bytes) {
  (void)ctx;
  MPI_CHECK(MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
}

/* A reducer of buf [n] through MPI, or (transport) through the deferring transport g_q, emptied. */
static Deferred g_q;
static TxlReducer *new_reducer(float *buf, int64_t n, int64_t bucket, int overlap, int transport) {
  memset(&g_q, 0, sizeof g_q);
  const TxlReduceTransport t = {&g_q, deferred_start, deferred_finish, deferred_gather, deferred_reduce, deferred_sum_f64,
                                deferred_share};
  return transport ? txl_reducer_create_with(&t, buf, n, bucket, overlap) : txl_reducer_create(buf, n, bucket, overlap);
}

/* The byte of rank r's block at i in `step`. */
static unsigned char gather_byte(int rank, int64_t i, int step) { return (unsigned char)(value(rank, i, step) & 0xff); }

/* txl_reducer_gather (the embedding rows' path): every rank's block in rank order, on every rank,
 * bit for bit, the send block untouched, nothing written past the end, the bytes counted; two
 * steps after a reduction of the same reducer. Returns the problems seen on this rank. */
static int gather_case(int64_t bytes, int transport) {
  int fails = 0;
  float one = 1.0f;
  TxlReducer *r = new_reducer(&one, 1, 1, 1, transport);
  unsigned char *send = malloc((size_t)bytes), *recv = malloc((size_t)(bytes * g_d.world + GUARD));
  if (!send || !recv) txl_fatal("test_allreduce: out of memory (gather of %lld bytes)", (long long)bytes);
  for (int step = 0; step < 2; step++) {
    one = 1.0f;
    txl_reducer_ready(r, 0, 1);
    txl_reducer_finish(r);
    for (int64_t i = 0; i < bytes; i++) send[i] = gather_byte(g_d.rank, i, step);
    memset(recv, 0xA5, (size_t)(bytes * g_d.world + GUARD));
    txl_reducer_gather(r, send, recv, bytes);
    for (int k = 0; k < g_d.world && !fails; k++)
      for (int64_t i = 0; i < bytes; i++)
        if (recv[k * bytes + i] != gather_byte(k, i, step)) {
          fprintf(stderr, "rank %d: gather of %lld bytes, step %d: byte %lld of rank %d's block is %d, expected %d\n",
                  g_d.rank, (long long)bytes, step, (long long)i, k, recv[k * bytes + i], gather_byte(k, i, step));
          fails++;
          break;
        }
    for (int64_t i = 0; i < bytes && !fails; i++)
      if (send[i] != gather_byte(g_d.rank, i, step)) {
        fprintf(stderr, "rank %d: the gather wrote into its send block\n", g_d.rank);
        fails++;
      }
    for (int g = 0; g < GUARD; g++)
      if (recv[bytes * g_d.world + g] != 0xA5) {
        fprintf(stderr, "rank %d: the gather wrote past the end of its blocks\n", g_d.rank);
        fails++;
        break;
      }
    if (one != (float)g_d.world) {
      fprintf(stderr, "rank %d: the reduction beside the gather gave %g\n", g_d.rank, one);
      fails++;
    }
  }
  if (txl_reducer_gathered_bytes(r) != 2.0 * (double)bytes) {
    fprintf(stderr, "rank %d: %g gathered bytes counted, %lld sent\n", g_d.rank, txl_reducer_gathered_bytes(r),
            (long long)(2 * bytes));
    fails++;
  }
  txl_reducer_destroy(r);
  free(send);
  free(recv);
  return fails;
}

/* One reducer, two steps. Returns the number of problems seen on this rank. */
static int run_case(int64_t n, int64_t bucket, int overlap, int transport) {
  int fails = 0;
  float *buf = malloc((size_t)(n + GUARD) * sizeof(float));
  float *want = malloc((size_t)n * sizeof(float));
  if (!buf || !want) txl_fatal("test_allreduce: out of memory (n = %lld)", (long long)n);
  int64_t cut[MAX_SLICES + 1];
  const int k = make_slices(n, cut);

  TxlReducer *r = new_reducer(buf, n, bucket, overlap, transport);
  double waited = 0.0;
  for (int step = 0; step < 2; step++) {
    for (int64_t i = 0; i < n; i++) {
      buf[i] = (float)value(g_d.rank, i, step);
      int64_t sum = 0;
      for (int q = 0; q < g_d.world; q++) sum += value(q, i, step);
      want[i] = (float)sum;
    }
    for (int g = 0; g < GUARD; g++) buf[n + g] = GUARD_VALUE;

    for (int j = k - 1; j >= 0; j--) txl_reducer_ready(r, cut[j], cut[j + 1]);
    txl_reducer_finish(r);
    if (g_q.overflow || g_q.queued) {
      fprintf(stderr, "rank %d: the transport's queue %s\n", g_d.rank, g_q.overflow ? "overflowed" : "was not drained");
      fails++;
    }

    for (int64_t i = 0; i < n; i++) {
      uint32_t got_bits, want_bits;
      memcpy(&got_bits, &buf[i], sizeof got_bits);
      memcpy(&want_bits, &want[i], sizeof want_bits);
      if (got_bits != want_bits) {
        fprintf(stderr, "rank %d: size %lld bucket %lld overlap %d step %d: element %lld is %.9g, "
                "expected %.9g\n", g_d.rank, (long long)n, (long long)bucket, overlap, step,
                (long long)i, buf[i], want[i]);
        fails++;
        break;
      }
    }
    for (int g = 0; g < GUARD; g++)
      if (buf[n + g] != GUARD_VALUE) {
        fprintf(stderr, "rank %d: size %lld bucket %lld overlap %d: wrote past the end (element "
                "%lld)\n", g_d.rank, (long long)n, (long long)bucket, overlap, (long long)(n + g));
        fails++;
        break;
      }
    double w = txl_reducer_wait_seconds(r);
    if (!(w >= waited) || !isfinite(w)) {
      fprintf(stderr, "rank %d: wait seconds %g after %g\n", g_d.rank, w, waited);
      fails++;
    }
    waited = w;
  }
  txl_reducer_destroy(r);
  free(want);
  free(buf);
  return fails;
}

/* Slices of [0, n) for the ranks, uneven and the same on every rank (rank k's grows with k;
 * with n < world some are empty): lo[0] = 0, lo[world] = n. */
static void make_owners(int64_t n, int64_t *lo) {
  const int64_t w = g_d.world, total = w * (w + 1) / 2;
  lo[0] = 0;
  int64_t acc = 0;
  for (int k = 0; k < g_d.world; k++) {
    acc += k + 1;
    lo[k + 1] = n * acc / total;
  }
}

/* ZeRO-1's collectives (txl_reducer_set_owners, _sum_f64, _share), two steps: each rank's slice
 * holds the sums after finish; the doubles' sum is exact; after the share every rank holds every
 * owner's slice. Returns the problems seen on this rank. */
static int shard_case(int64_t n, int64_t bucket, int overlap, int transport) {
  int fails = 0;
  float *buf = malloc((size_t)(n + GUARD) * sizeof(float));
  int64_t *lo = malloc((size_t)(g_d.world + 1) * sizeof *lo);
  if (!buf || !lo) txl_fatal("test_allreduce: out of memory (n = %lld)", (long long)n);
  make_owners(n, lo);
  int64_t cut[MAX_SLICES + 1];
  const int k = make_slices(n, cut);
  TxlReducer *r = new_reducer(buf, n, bucket, overlap, transport);
  txl_reducer_set_owners(r, lo);
  const int64_t mine0 = lo[g_d.rank], mine1 = lo[g_d.rank + 1];
  for (int step = 0; step < 2 && !fails; step++) {
    for (int64_t i = 0; i < n; i++) buf[i] = (float)value(g_d.rank, i, step);
    for (int g = 0; g < GUARD; g++) buf[n + g] = GUARD_VALUE;
    for (int j = k - 1; j >= 0; j--) txl_reducer_ready(r, cut[j], cut[j + 1]);
    txl_reducer_finish(r);
    for (int64_t i = mine0; i < mine1; i++) {
      int64_t sum = 0;
      for (int o = 0; o < g_d.world; o++) sum += value(o, i, step);
      if (buf[i] != (float)sum) {
        fprintf(stderr, "rank %d: shard size %lld bucket %lld overlap %d step %d: owned element %lld is %.9g, "
                "expected %lld\n", g_d.rank, (long long)n, (long long)bucket, overlap, step, (long long)i, buf[i],
                (long long)sum);
        fails++;
        break;
      }
    }
    /* the parts: rank o's value at o, zeros elsewhere (the norm's use), summed exactly */
    double part[9];
    for (int j = 0; j < 9; j++) part[j] = j % g_d.world == g_d.rank ? 0.1 * (j + 1) + step : 0.0;
    txl_reducer_sum_f64(r, part, 9);
    for (int j = 0; j < 9; j++)
      if (part[j] != 0.1 * (j + 1) + step) {
        fprintf(stderr, "rank %d: the sum of one rank's part and zeros changed it (%.17g)\n", g_d.rank, part[j]);
        fails++;
        break;
      }
    /* the share: the owner's (updated) slice to every rank, over what each held */
    for (int64_t i = 0; i < n; i++) buf[i] = i >= mine0 && i < mine1 ? (float)value(g_d.rank, i, step + 7) : -1.0f;
    txl_reducer_share(r, buf, sizeof(float));
    for (int o = 0; o < g_d.world && !fails; o++)
      for (int64_t i = lo[o]; i < lo[o + 1]; i++)
        if (buf[i] != (float)value(o, i, step + 7)) {
          fprintf(stderr, "rank %d: after the share element %lld (rank %d's) is %.9g\n", g_d.rank, (long long)i, o, buf[i]);
          fails++;
          break;
        }
    for (int g = 0; g < GUARD; g++)
      if (buf[n + g] != GUARD_VALUE) {
        fprintf(stderr, "rank %d: shard size %lld: wrote past the end\n", g_d.rank, (long long)n);
        fails++;
        break;
      }
  }
  txl_reducer_destroy(r);
  free(lo);
  free(buf);
  return fails;
}

int main(int argc, char **argv) {
  txl_dist_init(&g_d, &argc, &argv);
  const int64_t sizes[] = {1, 7, 1000, 12345, ((int64_t)1 << 20) + 3};
  if (g_d.rank == 0) printf("allreduce on %d rank%s\n", g_d.world, g_d.world == 1 ? "" : "s");
  int passed = 0, failed = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    const int64_t n = sizes[s];
    /* bucket 1 is one collective per element: not on the largest size */
    const int64_t buckets[] = {1, 1000, n + 17};
    for (int b = n > 100000 ? 1 : 0; b < 3; b++)
      for (int overlap = 0; overlap <= 1; overlap++)
        for (int transport = 0; transport <= 1; transport++) {
          if (transport && buckets[b] == 1 && n > 4000) continue; /* more buckets than the queue holds */
          int fails = run_case(n, buckets[b], overlap, transport);
          txl_dist_allreduce_max_i32(&fails, 1);
          if (fails) failed++; else passed++;
          if (g_d.rank == 0)
            printf("size %lld bucket %lld overlap %d%s: %s\n", (long long)n, (long long)buckets[b], overlap,
                   transport ? " transport" : "", fails ? "FAIL" : "PASS");
        }
  }
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int overlap = 0; overlap <= 1; overlap++)
      for (int transport = 0; transport <= 1; transport++) {
        const int64_t n = sizes[s], bucket = n > 1000 ? 1000 : 3;
        int fails = shard_case(n, bucket, overlap, transport);
        txl_dist_allreduce_max_i32(&fails, 1);
        if (fails) failed++; else passed++;
        if (g_d.rank == 0)
          printf("shard size %lld bucket %lld overlap %d%s: %s\n", (long long)n, (long long)bucket, overlap,
                 transport ? " transport" : "", fails ? "FAIL" : "PASS");
      }
  const int64_t gathers[] = {1, 13, 4099, ((int64_t)1 << 20) + 5};
  for (size_t s = 0; s < sizeof gathers / sizeof gathers[0]; s++)
    for (int transport = 0; transport <= 1; transport++) {
      int fails = gather_case(gathers[s], transport);
      txl_dist_allreduce_max_i32(&fails, 1);
      if (fails) failed++; else passed++;
      if (g_d.rank == 0)
        printf("gather %lld bytes%s: %s\n", (long long)gathers[s], transport ? " transport" : "", fails ? "FAIL" : "PASS");
    }
  if (g_d.rank == 0) {
    printf("allreduce: %d passed, %d failed\n", passed, failed);
    fflush(stdout);
  }
  txl_dist_finalize();
  return failed ? 1 : 0;
}
