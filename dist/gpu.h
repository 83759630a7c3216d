/* Which GPU a rank drives. Plain C, no CUDA headers: built with or without the CUDA backend. */
#ifndef TXL_DIST_GPU_H
#define TXL_DIST_GPU_H

#include <stddef.h>

/* The GPU of the rank that is local_rank of local_size ranks on node `host`, which has n_gpus
 * visible GPUs: local_rank itself (one rank per GPU). Returns -1 and writes a one-line message
 * (no trailing newline) into err[0, errlen) when the node has no GPU, more ranks than GPUs, or
 * the arguments are inconsistent. Pure: no MPI, no CUDA; err may be NULL when errlen is 0. */
int txl_dist_gpu_for_rank(int local_rank, int local_size, int n_gpus, const char *host,
                          char *err, size_t errlen);

#endif
