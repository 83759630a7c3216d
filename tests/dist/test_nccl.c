/* txl_nccl (dist/nccl.h) on real GPUs (test_nccl), and on the CPU emulator's CUDA and NCCL
 * (test_nccl_emu: this file compiled as C++ against kernels/emu, where the collectives wait on
 * their stream as on a GPU, so the orderings below are what makes the results right): each rank drives the GPU txl_dist_gpu_for_rank picks and
 * sums a buffer of small integers in place, as test_allreduce does on the CPU, through both
 * ways of ordering it against a compute stream (an event to wait for, then txl_nccl_join; and
 * txl_nccl_wait). Sizes 1, 1000 and 2^20 + 3; bit-for-bit comparison.
 * Where a rank finds no CUDA device (or no driver), or its node has more ranks than GPUs,
 * every rank prints "SKIPPED: ..." and exits 77 (skipped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "dist/dist.h"
#include "dist/gpu.h"
#include "dist/launcher.h"
#ifdef __cplusplus
}
#endif
#include "dist/nccl.h"
#include "kernels/cuda/cuda_check.h" /* the CUDA runtime's header, or the emulator's */

static int32_t value(int rank, int64_t i) { return (int32_t)((i * 7919 + rank * 104729) % 2047) - 1023; }

int main(int argc, char **argv) {
  TxlDist d;
  txl_dist_init(&d, &argc, &argv);
  int n_gpus = 0;
  if (cudaGetDeviceCount(&n_gpus) != cudaSuccess) n_gpus = 0;
  char err[256];
  int gpu = txl_dist_gpu_for_rank(d.local_rank, d.local_size, n_gpus, d.host, txl_launcher_name(txl_launcher_detect()),
                                  err, sizeof err);
  if (n_gpus == 1 && d.local_size > 1) gpu = -1; /* one GPU seen by several ranks: maybe the same one */
  int skip = gpu < 0;
  txl_dist_allreduce_max_i32(&skip, 1);
  if (skip) {
    if (d.rank == 0) printf("SKIPPED: %s\n", n_gpus ? err : "no CUDA device");
    txl_dist_finalize();
    return 77; /* skipped */
  }

  cudaStream_t compute;
  cudaEvent_t ready;
  CUDA_CHECK(cudaSetDevice(gpu));
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  TxlNccl *c = txl_nccl_create(d.rank, d.world, gpu, compute);
  CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  const int64_t sizes[] = {1, 1000, ((int64_t)1 << 20) + 3};
  int failed = 0;
  for (int s = 0; s < 3; s++)
    for (int mode = 0; mode < 2; mode++) {
      const int64_t n = sizes[s];
      const size_t bytes = (size_t)n * sizeof(float);
      float *host = (float *)malloc(bytes), *want = (float *)malloc(bytes), *dev = NULL;
      if (!host || !want) txl_fatal("test_nccl: out of memory");
      for (int64_t i = 0; i < n; i++) {
        host[i] = (float)value(d.rank, i);
        int64_t sum = 0;
        for (int q = 0; q < d.world; q++) sum += value(q, i);
        want[i] = (float)sum;
      }
      CUDA_CHECK(cudaMalloc((void **)&dev, bytes));
      if (mode == 0) { /* the gradients come from the compute stream: event, reduce, join */
        CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, compute));
        CUDA_CHECK(cudaEventRecord(ready, compute));
        txl_nccl_allreduce_sum(c, dev, n, ready);
        txl_nccl_join(c, compute);
        CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, compute));
        CUDA_CHECK(cudaStreamSynchronize(compute));
      } else {         /* synchronous: copy (complete before the host goes on), reduce in two halves, wait */
        CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, compute));
        CUDA_CHECK(cudaStreamSynchronize(compute));
        txl_nccl_allreduce_sum(c, dev + n / 2, n - n / 2, NULL);
        txl_nccl_allreduce_sum(c, dev, n / 2, NULL);
        txl_nccl_wait(c);
        CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
      }
      int bad = memcmp(host, want, bytes) != 0;
      txl_dist_allreduce_max_i32(&bad, 1);
      failed += bad;
      if (d.rank == 0)
        printf("nccl size %lld %s: %s\n", (long long)n, mode ? "wait" : "event+join", bad ? "FAIL" : "PASS");
      CUDA_CHECK(cudaFree(dev));
      free(want);
      free(host);
    }
  CUDA_CHECK(cudaEventDestroy(ready));
  CUDA_CHECK(cudaStreamDestroy(compute));
  txl_nccl_destroy(c);
  txl_dist_finalize();
  return failed ? 1 : 0;
}
