/* The cuBLASLt workspace every CUDA rank holds (kernels/cuda/gemm_lt.cu): NVIDIA's recommended size
 * for Hopper, enough for every GEMM algorithm its heuristic picks. The memory estimate
 * (src/train/estimate.c) counts it, so it is here rather than in the .cu file alone. */
#ifndef TXL_KERNELS_COMMON_WORKSPACE_H
#define TXL_KERNELS_COMMON_WORKSPACE_H

#include <stddef.h>

#define TXL_CUDA_GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

#endif
