#include "dist/gpu.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

void txl_dist_gpu_advice(const char *launcher, int n_gpus, char *out, size_t n) {
  if (!strcmp(launcher, "srun"))
    snprintf(out, n, "srun --gpus-per-task=1 (or --gpu-bind=single:1) gives each rank its own, or run at most %d "
             "task%s per node (srun --ntasks-per-node=%d)", n_gpus, n_gpus == 1 ? "" : "s", n_gpus);
  else if (!strcmp(launcher, "mpirun"))
    snprintf(out, n, "run at most %d rank%s per node (mpirun --map-by ppr:%d:node)", n_gpus, n_gpus == 1 ? "" : "s",
             n_gpus);
  else
    snprintf(out, n, "run at most %d rank%s per node, or set CUDA_VISIBLE_DEVICES for each", n_gpus,
             n_gpus == 1 ? "" : "s");
}

int txl_dist_gpu_for_rank(int local_rank, int local_size, int n_gpus, const char *host, const char *launcher,
                          char *err, size_t errlen) {
  if (!host || !host[0]) host = "?";
  if (!launcher || !launcher[0]) launcher = "no launcher";
  if (err && errlen > 0) err[0] = '\0';
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
    return fail(err, errlen, "host %s: local rank %d of %d ranks is not a valid rank", host,
                local_rank, local_size);
  if (n_gpus <= 0)
    return fail(err, errlen, "host %s (%s): no CUDA device visible to this rank; check the driver, "
                "CUDA_VISIBLE_DEVICES and the job's GPU request", host, launcher);
  if (n_gpus == 1) return 0;
  if (local_size > n_gpus) {
    char how[256];
    txl_dist_gpu_advice(launcher, n_gpus, how, sizeof how);
    return fail(err, errlen, "host %s (%s): %d ranks on this node and each sees %d GPUs, so some would share one: "
                "%s", host, launcher, local_size, n_gpus, how);
  }
  return local_rank;
}

const char *txl_dist_gpu_rule(int n_gpus) {
  return n_gpus == 1 ? "each rank uses the one GPU it sees" : "each rank uses the GPU of its node-local rank";
}

int txl_dist_gpu_shared(const char *ids, int n, size_t stride, int *a, int *b) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (!strcmp(ids + (size_t)i * stride, ids + (size_t)j * stride)) {
        *a = i, *b = j;
        return 1;
      }
  return 0;
}
