/* MPI_CHECK: an MPI call that fails ends the job with the library's message. Below the rest of
 * dist/ (dist.c and wait.c both check their calls with it). */
#ifndef TXL_DIST_MPI_CHECK_H
#define TXL_DIST_MPI_CHECK_H

#define MPI_CHECK(call) do { int mpi_rc_ = (call); if (mpi_rc_ != 0) \
    txl_dist_mpi_fail(__FILE__, __LINE__, #call, mpi_rc_); } while (0)

/* Reports an MPI failure with the library's message, then ends the job. */
void txl_dist_mpi_fail(const char *file, int line, const char *call, int rc) __attribute__((noreturn));

#endif
