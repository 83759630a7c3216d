#include "dist/gpu.h"

#include <stdarg.h>
#include <stdio.h>

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int txl_dist_gpu_for_rank(int local_rank, int local_size, int n_gpus, const char *host,
                          char *err, size_t errlen) {
  if (!host || !host[0]) host = "?";
  if (err && errlen > 0) err[0] = '\0';
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return fail(err, errlen, "host %s: local rank %d of %d ranks is not a valid rank", host,
                local_rank, local_size);
  if (n_gpus <= 0)
    return fail(err, errlen, "host %s: no CUDA device visible to this rank; check the driver "
                "and CUDA_VISIBLE_DEVICES", host);
  if (local_size > n_gpus)
    return fail(err, errlen, "host %s: %d ranks on this node but %d GPU%s; run at most %d rank%s "
                "per node (mpirun --map-by ppr:%d:node)", host, local_size, n_gpus,
                n_gpus == 1 ? "" : "s", n_gpus, n_gpus == 1 ? "" : "s", n_gpus);
  return local_rank;
}
