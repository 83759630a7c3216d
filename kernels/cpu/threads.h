/* Threads of the CPU backend: OpenMP (row-wise and element-wise ops) and OpenBLAS (gemm). */
#ifndef TXL_KERNELS_CPU_THREADS_H
#define TXL_KERNELS_CPU_THREADS_H

/* Use n threads for both OpenMP and OpenBLAS (n >= 1). */
void txl_cpu_set_threads(int n);

/* The number of threads an OpenMP parallel region of the CPU backend uses. */
int txl_cpu_threads(void);

#endif
