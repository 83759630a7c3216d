/* Error checks of the CUDA code (kernels/cuda and dist/nccl.c; C, C++ and CUDA).
 *
 *   CUDA_CHECK(call)     a CUDA runtime call that must return cudaSuccess
 *   CUBLAS_CHECK(call)   a cuBLAS call that must return CUBLAS_STATUS_SUCCESS
 *   CUDA_LAUNCH_CHECK()  after every kernel launch: reports a bad launch configuration at the
 *                        launch site (errors raised while the kernel runs surface at the next
 *                        synchronising call, which is itself checked)
 *
 * Each is a do { } while (0) that prints file:line, the failed call and the library's message
 * through txl_fatal (which adds the rank) and ends the whole job. */
#ifndef TXL_KERNELS_CUDA_CHECK_H
#define TXL_KERNELS_CUDA_CHECK_H

#ifdef TXL_CUDA_EMU
/* The CPU emulator of the kernels (kernels/emu): the same kernels, compiled as C++ by the host
 * compiler, with no CUDA toolkit. */
#include "kernels/emu/cuda_emu.h"
#else
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif
#include "src/base/error.h"
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                                      \
  do {                                                                                        \
    const cudaError_t txl_cuda_rc_ = (call);                                                  \
    if (txl_cuda_rc_ != cudaSuccess)                                                          \
      txl_fatal("%s:%d: CUDA: %s failed: %s (%s)", __FILE__, __LINE__, #call,                 \
                cudaGetErrorString(txl_cuda_rc_), cudaGetErrorName(txl_cuda_rc_));            \
  } while (0)

#define CUBLAS_CHECK(call)                                                                    \
  do {                                                                                        \
    const cublasStatus_t txl_cublas_rc_ = (call);                                             \
    if (txl_cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                              \
      txl_fatal("%s:%d: cuBLAS: %s failed: %s (%s)", __FILE__, __LINE__, #call,               \
                cublasGetStatusString(txl_cublas_rc_), cublasGetStatusName(txl_cublas_rc_));  \
  } while (0)

#define CUDA_LAUNCH_CHECK()                                                                   \
  do {                                                                                        \
    const cudaError_t txl_cuda_rc_ = cudaGetLastError();                                      \
    if (txl_cuda_rc_ != cudaSuccess)                                                          \
      txl_fatal("%s:%d: CUDA: kernel launch failed: %s (%s)", __FILE__, __LINE__,             \
                cudaGetErrorString(txl_cuda_rc_), cudaGetErrorName(txl_cuda_rc_));            \
  } while (0)

#endif
