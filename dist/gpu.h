/* Which GPU a rank drives. Plain C, no CUDA headers: built with or without the CUDA backend.
 *
 * The rule, as clusters hand GPUs out: a rank that sees exactly one GPU (srun --gpus-per-task=1
 * or --gpu-bind, per-task cgroups, CUDA_VISIBLE_DEVICES set per rank) uses it; a rank that sees
 * several (all the node's: mpirun, srun without binding) uses the one of its node-local rank.
 * Two ranks of a node must not end up on one GPU: their choices are compared by PCI bus id
 * (txl_dist_gpu_shared) after each rank picked one. */
#ifndef TXL_DIST_GPU_H
#define TXL_DIST_GPU_H

#include <stddef.h>

/* The GPU of the rank that is local_rank of local_size ranks on node `host`, which has n_gpus
 * visible GPUs; `launcher` (dist/launcher.h's name) is what advice names. Returns -1 and writes a
 * one-line message (no trailing newline) into err[0, errlen) when the rank sees no GPU, or sees
 * several but fewer than the node's ranks, or the arguments are inconsistent. Pure: no MPI, no
 * CUDA; err may be NULL when errlen is 0. */
int txl_dist_gpu_for_rank(int local_rank, int local_size, int n_gpus, const char *host, const char *launcher,
                          char *err, size_t errlen);

/* How to give each of a node's ranks a GPU of its own with `launcher` when each rank sees n_gpus:
 * one line (no newline) into out. */
void txl_dist_gpu_advice(const char *launcher, int n_gpus, char *out, size_t n);

/* Which rule txl_dist_gpu_for_rank applied for n_gpus visible GPUs, for the start-up line. */
const char *txl_dist_gpu_rule(int n_gpus);

/* Two node-local ranks whose GPUs have the same id: ids holds n ids of `stride` bytes each (NUL
 * terminated), one per node-local rank. Returns 1 with the first pair in *a < *b, else 0. */
int txl_dist_gpu_shared(const char *ids, int n, size_t stride, int *a, int *b);

#endif
