#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include "src/base/error.h"

/* Declared by OpenBLAS's cblas.h; repeated so that a CBLAS header without it still builds. */
void openblas_set_num_threads(int num_threads);

void txl_cpu_set_threads(int n) {
  if (n < 1) txl_fatal("txl_cpu_set_threads: thread count %d must be >= 1", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int txl_cpu_threads(void) { return omp_get_max_threads(); }
