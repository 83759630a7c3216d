/* Collectives without a deadline (dist/dist.h): for the checkpoints, whose ranks wait on one
 * another's file I/O for as long as the disk takes. Plain blocking MPI on MPI_COMM_WORLD; they
 * work in a program that called MPI_Init itself (the fuzz harness) as well as after
 * txl_dist_init. */
#include <mpi.h>
#include <stdint.h>

#include "dist/dist.h"

int txl_dist_rank(void) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  return rank;
}

int txl_dist_world(void) {
  int world = 1;
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  return world;
}

int txl_dist_min_i32_blocking(int v) {
  int m = 0;
  MPI_CHECK(MPI_Allreduce(&v, &m, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return m;
}

void txl_dist_bcast_blocking(void *buf, int bytes, int root) {
  MPI_CHECK(MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD));
}

void txl_dist_allgather_i64_blocking(const int64_t *mine, int n, int64_t *all) {
  MPI_CHECK(MPI_Allgather(mine, n, MPI_INT64_T, all, n, MPI_INT64_T, MPI_COMM_WORLD));
}

void txl_dist_barrier_blocking(void) { MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }
