#include "dist/dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "dist/wait.h"

static int g_world = 1;
static MPI_Comm g_node = MPI_COMM_NULL; /* the ranks of this node (MPI_COMM_TYPE_SHARED) */

/* x[0, n) combined in place across ranks under the deadline (dist/wait.h). */
static void allreduce(void *x, int n, MPI_Datatype type, MPI_Op op, const char *what) {
  if (g_world == 1) return;
  MPI_Request req;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, x, n, type, op, MPI_COMM_WORLD, &req));
  txl_dist_wait(1, &req, what);
}

/* txl_fatal_if_any's agreement: the smallest of v over the ranks, under the deadline. */
static int min_over_ranks(int v) {
  allreduce(&v, 1, MPI_INT, MPI_MIN, "the agreement on an error");
  return v;
}

static int mpi_running(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

/* How src/base/error.c ends the job. */
static void abort_all(void) {
  if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, 1);
}
static void finalize_if_running(void) {
  if (mpi_running()) MPI_Finalize();
}

void txl_dist_init(TxlDist *d, int *argc, char ***argv) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  memset(d, 0, sizeof *d);
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &d->world));
  int len = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_CHECK(MPI_Get_processor_name(name, &len));
  snprintf(d->host, sizeof d->host, "%.63s", name);
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &g_node));
  MPI_CHECK(MPI_Comm_set_errhandler(g_node, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(g_node, &d->local_rank));
  MPI_CHECK(MPI_Comm_size(g_node, &d->local_size));
  txl_error_set_rank(d->rank, d->world, d->host);
  g_world = d->world;
  txl_dist_wait_init(d->rank, d->world);
  const TxlErrorJob job = {abort_all, finalize_if_running, min_over_ranks};
  txl_error_set_job(&job);
}

void txl_dist_finalize(void) { MPI_Finalize(); }

void txl_dist_node_allgather(const void *mine, size_t bytes, void *all) {
  MPI_CHECK(MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, g_node));
}

void txl_dist_allreduce_sum_f64(double *x, int n) { allreduce(x, n, MPI_DOUBLE, MPI_SUM, "a sum across ranks"); }

void txl_dist_allreduce_max_i32(int *x, int n) { allreduce(x, n, MPI_INT, MPI_MAX, "a maximum across ranks"); }

void txl_dist_allreduce_max_f64(double *x, int n) { allreduce(x, n, MPI_DOUBLE, MPI_MAX, "a maximum across ranks"); }

void txl_dist_share(void *base, const int64_t *lo, size_t elem_bytes, const char *what) {
  if (g_world == 1) return;
  int counts[g_world], displs[g_world]; /* a few KiB at most: no allocation in a step */
  const int64_t e = (int64_t)elem_bytes;
  for (int k = 0; k < g_world; k++) {
    if (lo[k + 1] > INT_MAX / e) /* MPI's counts and displacements are int */
      txl_fatal("%s: %lld bytes, more than MPI's %d in one call", what, (long long)(lo[k + 1] * e), INT_MAX);
    counts[k] = (int)((lo[k + 1] - lo[k]) * e);
    displs[k] = (int)(lo[k] * e);
  }
  MPI_Request req;
  MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, counts, displs, MPI_BYTE, MPI_COMM_WORLD, &req));
  txl_dist_wait(1, &req, what);
}

void txl_dist_barrier(void) {
  if (g_world == 1) return;
  MPI_Request req;
  MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &req));
  txl_dist_wait(1, &req, "a barrier");
}

double txl_dist_set_timeout(double seconds) {
  txl_dist_barrier(); /* under the old setting: work one rank did before does not count */
  return txl_dist_wait_set_timeout(seconds);
}

void txl_dist_set_step(int step) { txl_dist_wait_set_step(step); }

int txl_dist_all_equal_u64(uint64_t v) {
  uint64_t m[2] = {v, ~v}; /* one minimum gives both: max(v) = ~min(~v) */
  allreduce(m, 2, MPI_UINT64_T, MPI_MIN, "a comparison across ranks");
  return m[0] == ~m[1];
}
