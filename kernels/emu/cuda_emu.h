/* A CPU emulator of the CUDA runtime subset and the cuBLAS and cuBLASLt subsets that txl's kernels
 * (the .cu files of kernels/cuda) use, so that the kernels themselves run, unchanged, on a machine without a
 * GPU (tests only; see README.md here for what it checks and what it cannot).
 *
 * kernels/cuda/cuda_check.h includes this header instead of <cuda_runtime.h>, <cublas_v2.h> and
 * <cublasLt.h> when TXL_CUDA_EMU is defined; the .cu files are then compiled by the host C++ compiler as
 * C++17 (kernels/emu/CMakeLists.txt). No real CUDA header is included.
 *
 * Execution model. A launch, TXL_LAUNCH(kernel, grid, block, shared)(args...) (kernels/cuda/
 * cuda_util.h), runs the whole grid before it returns: blocks one after the other (x fastest,
 * then y, then z); inside a block every thread is a fiber with its own stack, scheduled
 * round-robin in thread order, each running until it reaches a barrier (__syncthreads,
 * __syncwarp, a shuffle) or returns. Blocks run one at a time, so a function-static array is
 * the block's shared memory (__shared__ is `static`). threadIdx, blockIdx, blockDim and gridDim
 * are globals that the scheduler sets before it resumes a fiber. Everything is synchronous:
 * streams and events are ordering no-ops, memory is host memory; except that the work enqueued on
 * a capturing stream is recorded, and run by cudaGraphLaunch (README.md, "Stream capture and
 * graphs").
 *
 * Only one host thread may launch kernels (the emulator is not thread-safe; txl drives one
 * device from one host thread anyway). */
#ifndef TXL_KERNELS_EMU_CUDA_EMU_H
#define TXL_KERNELS_EMU_CUDA_EMU_H

#ifndef __cplusplus
#error "kernels/emu/cuda_emu.h is C++ (the kernels are compiled as C++17 under the emulator)"
#endif

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---- CUDA keywords --------------------------------------------------------------------- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* Blocks run one at a time and all fibers of a block run the same function: a function-static
 * variable is one per block, as shared memory is. (It keeps its value from one block to the
 * next, where a GPU would leave garbage: reading shared memory before writing it is NOT caught
 * for static __shared__ arrays; it is for the dynamic shared memory, poisoned per block.) */
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
/* __restrict__ is g++'s own keyword already. __noinline__ is deliberately not defined: glibc
 * headers spell __attribute__((__noinline__)). */

/* ---- vector types -------------------------------------------------------------------------- */
struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

struct __attribute__((aligned(8))) float2 {
  float x, y;
};
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) int2 {
  int x, y;
};
struct __attribute__((aligned(16))) int4 {
  int x, y, z, w;
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

/* ---- built-in variables (set by the scheduler for the running fiber) ------------------------ */
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
static constexpr int warpSize = 32;

/* ---- device functions ---------------------------------------------------------------------- */
/* rsqrtf is a CUDA device function, not a C one (CUDA's has 2 ulp of error; this one 1/sqrt,
 * two roundings). */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

/* Barriers. __syncthreads: all threads of the block; __syncwarp: the 32 lanes of the warp
 * (lane = linear thread index % 32). Only the full mask 0xffffffff is supported: a warp
 * operation needs all 32 lanes of a full warp. A barrier that can never complete (a thread
 * returned while others wait, lanes at different warp operations, the block split between
 * __syncthreads and a warp operation) ends the process with a message naming the kernel. */
void __syncthreads(void);
void __syncwarp(unsigned int mask = 0xffffffffu);

/* The shuffles exchange the value as raw bits through a per-warp slot. kind: 0 xor, 1 down,
 * 2 index (see emu_fibers.cpp). Returns the bits of the partner lane's value. */
uint64_t txl_emu_shuffle(int kind, unsigned int mask, uint64_t bits, int arg, int width);

template <class T>
static inline T txl_emu_shuffle_t(int kind, unsigned int mask, T var, int arg, int width) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "shuffles move 4- or 8-byte values");
  uint64_t bits = 0;
  memcpy(&bits, &var, sizeof(T));
  bits = txl_emu_shuffle(kind, mask, bits, arg, width);
  T out;
  memcpy(&out, &bits, sizeof(T));
  return out;
}
template <class T>
static inline T __shfl_xor_sync(unsigned int mask, T var, int lane_mask, int width = 32) {
  return txl_emu_shuffle_t(0, mask, var, lane_mask, width);
}
template <class T>
static inline T __shfl_down_sync(unsigned int mask, T var, unsigned int delta, int width = 32) {
  return txl_emu_shuffle_t(1, mask, var, (int)delta, width);
}
template <class T>
static inline T __shfl_sync(unsigned int mask, T var, int src_lane, int width = 32) {
  return txl_emu_shuffle_t(2, mask, var, src_lane, width);
}

/* Fibers of one block never run at the same time and never switch inside these: plain
 * read-modify-write is atomic here. Each returns the old value. */
static inline int atomicAdd(int *p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
static inline unsigned int atomicAdd(unsigned int *p, unsigned int v) {
  const unsigned int old = *p;
  *p = old + v;
  return old;
}
static inline float atomicAdd(float *p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}

/* ---- runtime API ------------------------------------------------------------------------- */
/* The codes the emulator returns, with the real runtime's numbers. */
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  /* stream capture (README.md, "Stream capture and graphs") */
  cudaErrorStreamCaptureUnsupported = 900, /* not permitted when the stream is capturing      */
  cudaErrorStreamCaptureInvalidated = 901, /* the capture was invalidated by an earlier error  */
  cudaErrorStreamCaptureMerge = 902,       /* would merge two independent captures           */
  cudaErrorStreamCaptureUnmatched = 903,   /* the capture was not begun in this stream        */
  cudaErrorStreamCaptureUnjoined = 904,    /* a forked stream was not joined to the origin    */
  cudaErrorStreamCaptureIsolation = 905,   /* a dependency would cross the capture's boundary */
  cudaErrorStreamCaptureImplicit = 906,    /* the legacy stream during a blocking capture     */
  cudaErrorCapturedEvent = 907,            /* an event last recorded in a capturing stream    */
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMaxRegistersPerBlock = 12,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrClockRate = 13,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

/* The fields of the real struct that describe what the emulator models. */
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;      /* 48 KiB: the default limit of a launch          */
  size_t sharedMemPerBlockOptin; /* with cudaFuncSetAttribute: 64 KiB to 227 KiB   */
  size_t sharedMemPerMultiprocessor;
  int regsPerBlock, regsPerMultiprocessor;
  int warpSize;
  int maxThreadsPerBlock, maxThreadsPerMultiProcessor;
  int memoryBusWidth;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major, minor;
  int multiProcessorCount;
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
template <class T>
static inline cudaError_t cudaMalloc(T **ptr, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
cudaError_t cudaFree(void *ptr);
/* page-locked host memory (an ordinary aligned allocation here, remembered as page-locked: the
 * counts below tell copies from and to it apart from those of pageable memory) */
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
template <class T>
static inline cudaError_t cudaMallocHost(T **ptr, size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void **>(ptr), bytes);
}
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = 0);
/* height rows of width bytes, pitch bytes apart (the pitch unused for one row) */
cudaError_t cudaMemset2D(void *ptr, size_t pitch, int value, size_t width, size_t height);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event); /* cudaSuccess: everything is complete here */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

/* Stream capture and graphs (README.md, "Stream capture and graphs"): the work enqueued on a
 * capturing stream, and on the streams that join its capture through an event, is recorded in
 * enqueue order instead of run; cudaGraphLaunch runs the list. The calls a capture forbids
 * fail with the runtime's codes and invalidate it. */
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1, /* the same as Global for one host thread */
  cudaStreamCaptureModeRelaxed = 2,     /* not emulated: ends the process */
};
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus);
/* flags: 0 only (any other ends the process: not emulated) */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);

/* Per-kernel limit of the dynamic shared memory (default 48 KiB, at most the architecture's
 * opt-in limit: 64 KiB on sm_75 ... 227 KiB on sm_90). */
cudaError_t txl_emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value);
template <class F>
static inline cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
  return txl_emu_func_set_attribute(reinterpret_cast<const void *>(kernel), attr, value);
}

/* What the emulated runtime counted since the process started (README.md, "Counts"): launches,
 * the kernels that ran (TXL_LAUNCH with a valid configuration) and the cuBLAS / cuBLASLt GEMM
 * calls that succeeded, one each (a batched GEMM is one); syncs, the calls that make the host wait
 * for the device on a GPU, by the rule of the runtime's "API synchronization behavior"
 * (TXL_EMU_TRACE_SYNC=1 prints each on stderr). */
extern "C" void txl_emu_counts(long *launches, long *syncs);
/* The graph launches since the process started (cudaGraphLaunch calls that ran a graph, one each),
 * and the kernels and GEMMs those replays ran (counted here, not in txl_emu_counts' launches,
 * which are the launches the host issued). */
extern "C" void txl_emu_graph_counts(long *graph_launches, long *graph_kernels);
/* Runs the queued work that can run now (README.md, "Work that waits"), as a GPU goes on by itself:
 * for a host that waits outside the emulator (in MPI) while its streams wait for a collective. */
extern "C" void txl_emu_progress(void);

/* ---- cuBLAS ------------------------------------------------------------------------------ */
typedef struct cublasContext *cublasHandle_t;

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13, /* its kernel could not be launched (README.md, capture) */
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasPointerMode_t { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 };
/* TF32 GEMMs are emulated by rounding the fp32 operands A and B before an fp32 product (what
 * tensor cores compute, up to the order of the fp32 sums): to nearest, ties away from zero, as
 * cvt.rna.tf32.f32 (10-bit mantissa). cuBLAS does not document its own rounding of the operands,
 * so results under the emulator may differ from a GPU's in the last bit of the rounded operands
 * (a test's tolerance for this mode must allow a full unit of the reduced mantissa anyway). */
enum cublasMath_t {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3, /* cublasSgemm and COMPUTE_32F on TF32 operands */
};
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,           /* fp32, or TF32 under CUBLAS_TF32_TENSOR_OP_MATH (fp32 operands) */
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,  /* fp32 */
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77, /* operands rounded to TF32 */
};
/* The types of the emulated cublasGemmEx (the real values of library_types.h). CUDA_R_16BF is
 * bfloat16, stored as kernels/common/bf16.h stores it (the upper half of an fp32); CUDA_R_16F is
 * IEEE binary16, as kernels/common/fp16.h stores it. */
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
const char *cublasGetStatusString(cublasStatus_t status);
const char *cublasGetStatusName(cublasStatus_t status);
/* Column-major C[m,n] = alpha op(A)[m,k] op(B)[k,n] + beta C (cblas_sgemm of OpenBLAS). */
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
/* The same with the arithmetic chosen by computeType; alpha and beta are floats. The type
 * combinations (Atype = Btype, Ctype; computeType), a subset of those cuBLAS supports:
 *   CUDA_R_32F,  CUDA_R_32F;                 any of the three compute types above
 *   CUDA_R_16BF, CUDA_R_16BF or CUDA_R_32F;  CUBLAS_COMPUTE_32F or _32F_PEDANTIC
 *   CUDA_R_16F,  CUDA_R_16F or CUDA_R_32F;   CUBLAS_COMPUTE_32F or _32F_PEDANTIC
 * bf16 and fp16 operands are widened to fp32 (exact), the products summed in fp32 as for fp32
 * operands, a bf16 / fp16 C read widened (beta != 0) and rounded to nearest even when stored
 * (fp16: past 65504 to infinity, below 2^-14 to a subnormal; kernels/common/fp16.h). Any other
 * combination returns CUBLAS_STATUS_NOT_SUPPORTED, as cuBLAS does for an unsupported one. */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
/* batchCount GEMMs as cublasGemmEx, the b-th on A + b strideA, B + b strideB, C + b strideC
 * (strides in elements of each operand's type), one after the other in batch order. A negative
 * batchCount or stride is refused (CUBLAS_STATUS_INVALID_VALUE); batchCount 0 does nothing. */
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

/* ---- cuBLASLt ---------------------------------------------------------------------------- */
/* The subset of <cublasLt.h> (CUDA 13.0) that txl's GEMM with an epilogue calls, with the real
 * names, values, struct shapes and signatures, so that the same source compiles against both.
 * The descriptors are the real semi-opaque structs; the emulator keeps its state inside them.
 * What is emulated (emu_cublaslt.cpp, README.md): D = alpha op(A) op(B) + beta C, column-major, with
 * the arithmetic of cublasGemmEx (the DEFAULT epilogue gives its bits), C == D (same pointer and
 * layout: another D is refused with CUBLAS_STATUS_NOT_SUPPORTED), the epilogues below, the bias
 * vector of D's type. TXL_EMU_LT_EPILOGUES=off makes every epilogue but DEFAULT unsupported. */
typedef struct cublasLtContext *cublasLtHandle_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  uint64_t data[32];
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;

typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,          /* int32_t cublasOperation_t, default CUBLAS_OP_N */
  CUBLASLT_MATMUL_DESC_TRANSB = 4,          /* int32_t cublasOperation_t, default CUBLAS_OP_N */
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,        /* uint32_t cublasLtEpilogue_t, default DEFAULT */
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,    /* void *, default NULL */
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26, /* int32_t cudaDataType, default -1 (D's type) */
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,       /* D += bias[i] (length rows of D) before D is stored */
  CUBLASLT_EPILOGUE_RELU_BIAS = 6,  /* (CUBLASLT_EPILOGUE_RELU = 2) | BIAS: then max(x, 0) */
  CUBLASLT_EPILOGUE_BGRADA = 256,   /* bias[i] = sum over k of op(A)[i, k] (length rows of D) */
  CUBLASLT_EPILOGUE_BGRADB = 512,   /* bias[j] = sum over k of op(B)[k, j] (length cols of D) */
} cublasLtEpilogue_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, /* uint64_t, default 0 */
} cublasLtMatmulPreferenceAttributes_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
const char *cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
/* CUBLAS_STATUS_INVALID_VALUE if buf is NULL or sizeInBytes is not the attribute's size (as
 * cuBLASLt), or for an attribute outside the subset above. */
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes);

/* One algorithm (workspaceSize 0, state CUBLAS_STATUS_SUCCESS) for a problem cublasLtMatmul
 * would run; CUBLAS_STATUS_NOT_SUPPORTED with *returnAlgoCount = 0 for one it would refuse as
 * unsupported, CUBLAS_STATUS_INVALID_VALUE (0 results) for invalid arguments. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount);

/* algo: NULL or one that cublasLtMatmulAlgoGetHeuristic returned (anything else is
 * CUBLAS_STATUS_INVALID_VALUE); the workspace is not used. */
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream);

/* ---- launches ------------------------------------------------------------------------------ */
/* What the scheduler needs of one launch; `run` calls the kernel with this thread's copy of the
 * arguments. */
struct TxlEmuLaunchDesc {
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  const void *kernel; /* key of cudaFuncSetAttribute */
  const char *name;   /* as written at the launch site */
  void (*run)(void *ctx);
  void *ctx;
  /* a copy of *ctx on the heap, and its release: a capture keeps the launch's argument values */
  void *(*clone)(const void *ctx);
  void (*destroy)(void *ctx);
};

/* Checks the configuration as a GPU would, then runs the whole grid. On a violation the kernel
 * does not run and cudaGetLastError returns, as the CUDA runtime does,
 * cudaErrorInvalidConfiguration for the block or grid dimensions, cudaErrorInvalidValue for
 * more dynamic shared memory than the kernel's limit. On a capturing stream the launch is
 * recorded instead (with a copy of its arguments), after the same checks. */
void txl_emu_run(const TxlEmuLaunchDesc &desc);

/* This launch's dynamic shared memory: `shared` bytes, 16-byte aligned, every byte 0xFF (a NaN
 * as float) at the start of each block. */
void *txl_emu_dynamic_shared(void);

/* The way fibers switch stacks in this process: "asm" or "ucontext" (see emu_fibers.cpp). */
extern "C" const char *txl_emu_fiber_backend(void);

/* The order the threads of a block run in each round: "forward" (increasing thread index, the
 * default) or "reverse" (TXL_EMU_ORDER=reverse). */
extern "C" const char *txl_emu_order(void);

/* A kernel argument converts to its parameter type as in a call (implicitly). */
template <class T>
static inline T txl_emu_implicit(T v) {
  return v;
}

template <class... P>
struct TxlEmuLaunch {
  dim3 grid, block;
  size_t shared;
  cudaStream_t stream;
  void (*kernel)(P...);
  const char *name;

  template <class... A>
  void operator()(A &&...args) const {
    static_assert(sizeof...(A) == sizeof...(P), "wrong number of kernel arguments");
    struct Ctx {
      void (*kernel)(P...);
      std::tuple<P...> args;
    } ctx{kernel, std::tuple<P...>(txl_emu_implicit<P>(std::forward<A>(args))...)};
    /* each thread gets its own copy of the parameters (by-value parameters of the call) */
    auto run = [](void *c) {
      Ctx *x = static_cast<Ctx *>(c);
      std::apply(x->kernel, x->args);
    };
    auto clone = [](const void *c) -> void * { return new Ctx(*static_cast<const Ctx *>(c)); };
    auto destroy = [](void *c) { delete static_cast<Ctx *>(c); };
    TxlEmuLaunchDesc d{grid, block, shared, stream, reinterpret_cast<const void *>(kernel), name, run,
                       &ctx, clone, destroy};
    txl_emu_run(d);
  }
};

template <class... P>
static inline TxlEmuLaunch<P...> txl_emu_launch(dim3 grid, dim3 block, size_t shared,
                                                cudaStream_t stream, void (*kernel)(P...),
                                                const char *name) {
  return TxlEmuLaunch<P...>{grid, block, shared, stream, kernel, name};
}

#endif
