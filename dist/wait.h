/* How dist/ waits for its collectives: every one is started non-blocking and polled, first
 * without pause, then with short naps, against the deadline set by txl_dist_set_timeout. A rank
 * whose deadline passes tells the others; those that are waiting in a collective answer; after a
 * short grace the lowest rank that answered prints one line naming the ranks that did not, and
 * every rank that answered exits with status 1 (mpirun then ends the rest of the job).
 * For dist/'s own files: it needs mpi.h, which the rest of txl never includes. */
#ifndef TXL_DIST_WAIT_H
#define TXL_DIST_WAIT_H

#include <mpi.h>

/* After MPI_Init: the notices' own communicator (a duplicate of the world). collective: all ranks */
void txl_dist_wait_init(int rank, int world);

/* txl_dist_set_timeout's and txl_dist_set_step's settings (dist.h), which dist.c takes: the
 * deadline (returns the old one) and the step the timeout's message names. */
double txl_dist_wait_set_timeout(double seconds);
void txl_dist_wait_set_step(int step);

/* Returns once the n requests of one collective are complete. `what` names the collective in
 * the message, e.g. "the gradient all-reduce". Every rank waits for the same collectives in the
 * same order (each wait is one number in a count kept on every rank). */
void txl_dist_wait(int n, MPI_Request *req, const char *what);

/* Returns once ready(ctx) returns 1 (a poll of the GPU's work: cudaEventQuery), under the same
 * deadline and notices; `what` names what the host waits for, e.g. "a read to the host". With
 * NCCL, the GPU's work waits for collectives that need every rank, and a rank that waits for it
 * waits for them. Not a collective: it takes no number in the count (ranks with uneven shards wait
 * for their GPUs a different number of times). dist/nccl.c makes it the CUDA backend's host wait
 * (txl_cuda_set_host_wait) while a communicator of several ranks is open. */
void txl_dist_wait_device(int (*ready)(void *ctx), void *ctx, const char *what);

/* fn (NULL: none) is called between two tests of every wait: the emulated GPU (kernels/emu), which
 * runs its queued work only inside CUDA calls, runs it there, as a GPU would meanwhile by itself
 * (dist/nccl.c sets it in the emulator's build). */
void txl_dist_wait_set_progress(void (*fn)(void));

#endif
