#include "dist/dist.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

void txl_dist_mpi_fail(const char *file, int line, const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
  txl_fatal("%s:%d: MPI call %s failed: %s", file, line, call, msg);
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
  MPI_Comm node;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &d->local_rank));
  MPI_CHECK(MPI_Comm_size(node, &d->local_size));
  MPI_CHECK(MPI_Comm_free(&node));
  txl_error_set_rank(d->rank, d->world, d->host);
}

void txl_dist_finalize(void) { MPI_Finalize(); }

void txl_dist_allreduce_sum_f64(double *x, int n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
}

void txl_dist_allreduce_max_i32(int *x, int n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
}

void txl_dist_barrier(void) { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }

int txl_dist_all_equal_u64(uint64_t v) {
  uint64_t lo = v, hi = v;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  return lo == hi;
}

void txl_dist_allreduce_max_f64(double *x, int n) {
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
}
