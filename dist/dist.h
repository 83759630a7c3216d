/* Everything that knows there is more than one rank. src/ calls these and never MPI directly.
 * With one rank every function here is a cheap no-op or copy.
 *
 * The collectives here and the gradient reducer's MPI path (dist/reduce.h) wait under a deadline
 * (txl_dist_set_timeout): one that some rank has not reached that long after this rank did ends
 * the job with one line naming those ranks, and status 1 on every rank that still answers (how:
 * dist/wait.c). A waiting rank polls, then naps, so it does not keep a core busy. Not covered:
 * the checkpoints' parallel HDF5 I/O and their collectives (the *_blocking ones below, which
 * wait as long as a rank's disk takes), and the NCCL all-reduce of the GPU backend (its wait is
 * on the device). */
#ifndef TXL_DIST_DIST_H
#define TXL_DIST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "dist/mpi_check.h"
#include "src/base/error.h"

typedef struct {
  int rank;        /* this process in the world                    */
  int world;       /* number of ranks                              */
  int local_rank;  /* this process among the ranks of its node     */
  int local_size;  /* ranks on this node                           */
  char host[64];   /* this node's name                             */
} TxlDist;

/* MPI_Init, ranks, node-local rank (MPI_Comm_split_type). collective: all ranks */
void txl_dist_init(TxlDist *d, int *argc, char ***argv);
/* collective: all ranks */
void txl_dist_finalize(void);
/* Every node-local rank's `bytes` bytes at mine, in local-rank order, into all [local_size x bytes].
 * collective: the ranks of this node */
void txl_dist_node_allgather(const void *mine, size_t bytes, void *all);

/* Sum in place across ranks (the gradient has its own bucketed reducer: dist/reduce.h).
 * collective: all ranks */
void txl_dist_allreduce_sum_f64(double *x, int n);
/* 1 when v is the same on every rank. collective: all ranks */
int txl_dist_all_equal_u64(uint64_t v);
/* Maximum in place across ranks. collective: all ranks */
void txl_dist_allreduce_max_i32(int *x, int n);
void txl_dist_allreduce_max_f64(double *x, int n);
/* Rank k's elements base[lo[k], lo[k + 1]) (of elem_bytes bytes each) to every rank, in place, for
 * each rank k (lo [world + 1], increasing; an all-gather of slices of unequal sizes, each ending
 * within 2^31 - 1 bytes of base); `what` names it if it times out. collective: all ranks */
void txl_dist_share(void *base, const int64_t *lo, size_t elem_bytes, const char *what);
/* collective: all ranks */
void txl_dist_barrier(void);

/* From now on a collective that some rank has not reached `seconds` after this rank did (more
 * exactly: in which this rank saw no part complete for that long) ends the job (0: wait for
 * ever, the setting at txl_dist_init). First a barrier under the old setting, so that work some
 * ranks did alone before the call (rank 0 scanning the corpus, or writing a sample while the
 * others wait) never counts. Returns the old setting, to restore it after a phase where ranks
 * legitimately wait for one another for long. collective: all ranks */
double txl_dist_set_timeout(double seconds);
/* The training step under way, named in the timeout's message (-1: none, the start). */
void txl_dist_set_step(int step);

/* ---- without a deadline (dist/blocking.c): the checkpoints' agreement and broadcasts ---- */
/* This process's rank and the number of ranks in MPI_COMM_WORLD (MPI must be running). */
int txl_dist_rank(void);
int txl_dist_world(void);
/* The smallest of v over the ranks. collective: all ranks */
int txl_dist_min_i32_blocking(int v);
/* buf[0, bytes) of rank root to every rank. collective: all ranks */
void txl_dist_bcast_blocking(void *buf, int bytes, int root);
/* all[r * n + i] = rank r's mine[i]; all holds world * n values. collective: all ranks */
void txl_dist_allgather_i64_blocking(const int64_t *mine, int n, int64_t *all);
/* collective: all ranks */
void txl_dist_barrier_blocking(void);

#endif
