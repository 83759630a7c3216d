/* An MPI call that failed: see mpi_check.h. */
#include "dist/mpi_check.h"

#include <mpi.h>
#include <stdio.h>

#include "src/base/error.h"

void txl_dist_mpi_fail(const char *file, int line, const char *call, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
  txl_fatal("%s:%d: MPI call %s failed: %s", file, line, call, msg);
}
