/* bench_cuda_kernels --count: what one training step and one evaluation step of a recipe execute
 * on the CUDA backend, per kernel family, counted by running the real model code (config loader,
 * model and run creation, forward, backward, clipping and Adam) over the counting backend
 * (count_ops.h). Needs no GPU. Counts and an estimate from them, never measurements. */
#ifndef TXL_TESTS_CUDA_COUNT_STEP_H
#define TXL_TESTS_CUDA_COUNT_STEP_H

/* argv: what follows --count: [--ranks P] [CONFIG.ini ...]; no config: the four paper recipes
 * of configs/. Prints the tables; returns the exit status (2: a usage error, one line). */
int txl_count_main(int argc, char **argv);

#endif
