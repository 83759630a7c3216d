/* cuBLAS and cuBLASLt, opened on first use instead of at program start.
 *
 * Loading libcublasLt costs a process about 150 MB of resident memory before main() runs (its
 * data, relocated; an empty C program takes 2.0 MB, 153 MB linked with -lcublasLt, on the 2-core
 * AMD EPYC of issue 19), so a CUDA-enabled txl training on the CPU paid it for nothing: the tiny
 * benchmark's process peaked at 237 MiB there. The CUDA backend therefore does not link either
 * library. Each function of theirs it calls is defined here with the library's own prototype (the
 * headers are included, so a signature that differs does not compile) and forwards to the library,
 * which the first call opens with dlopen: libcublas.so.N and libcublasLt.so.N, N the major version
 * of the headers built against, found as the dynamic loader finds any library (the toolkit's
 * folder is on the executables' run path, as before). All the functions are looked up at that
 * moment, so one that the library lacks is an error at the first GEMM, not later; either error is
 * one line naming the library or the function. The CPU emulator (kernels/emu) brings its own
 * cuBLAS and does not build this file. */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "src/base/error.h"

#define TXL_STR2(x) #x
#define TXL_STR(x) TXL_STR2(x)
#define TXL_CUBLAS_SONAME "libcublas.so." TXL_STR(CUBLAS_VER_MAJOR)
#define TXL_CUBLASLT_SONAME "libcublasLt.so." TXL_STR(CUBLAS_VER_MAJOR)

/* Every function the backend calls: X(library: 0 cuBLAS, 1 cuBLASLt; return type; name (the
 * symbol: cublas_v2.h maps cublasCreate to cublasCreate_v2 and so on); parameters; arguments). */
#define TXL_CUBLAS_FUNCTIONS(X)                                                                            \
  X(0, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * h), (h))                                        \
  X(0, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t h), (h))                                         \
  X(0, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s), (h, s))                     \
  X(0, cublasStatus_t, cublasSetPointerMode_v2, (cublasHandle_t h, cublasPointerMode_t m), (h, m))         \
  X(0, cublasStatus_t, cublasSetMathMode, (cublasHandle_t h, cublasMath_t m), (h, m))                      \
  X(0, const char *, cublasGetStatusString, (cublasStatus_t s), (s))                                      \
  X(0, const char *, cublasGetStatusName, (cublasStatus_t s), (s))                                        \
  X(0, cublasStatus_t, cublasGemmEx,                                                                       \
    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha, \
     const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, const void *beta,   \
     void *C, cudaDataType ct, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo),              \
    (h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo))                  \
  X(0, cublasStatus_t, cublasGemmStridedBatchedEx,                                                         \
    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha, \
     const void *A, cudaDataType at, int lda, long long int sa, const void *B, cudaDataType bt, int ldb,   \
     long long int sb, const void *beta, void *C, cudaDataType ct, int ldc, long long int sc, int batch,   \
     cublasComputeType_t compute, cublasGemmAlgo_t algo),                                                  \
    (h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc, batch, compute, algo)) \
  X(1, cublasStatus_t, cublasLtCreate, (cublasLtHandle_t * h), (h))                                       \
  X(1, cublasStatus_t, cublasLtDestroy, (cublasLtHandle_t h), (h))                                        \
  X(1, cublasStatus_t, cublasLtMatmul,                                                                     \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha, const void *A,                     \
     cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd, const void *beta, const void *C, \
     cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd, const cublasLtMatmulAlgo_t *algo,      \
     void *work, size_t work_bytes, cudaStream_t s),                                                       \
    (h, desc, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, work, work_bytes, s))                         \
  X(1, cublasStatus_t, cublasLtMatrixLayoutCreate,                                                         \
    (cublasLtMatrixLayout_t * l, cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld),               \
    (l, t, rows, cols, ld))                                                                                \
  X(1, cublasStatus_t, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t l), (l))                       \
  X(1, cublasStatus_t, cublasLtMatmulDescCreate,                                                           \
    (cublasLtMatmulDesc_t * d, cublasComputeType_t compute, cudaDataType_t scale), (d, compute, scale))    \
  X(1, cublasStatus_t, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t d), (d))                           \
  X(1, cublasStatus_t, cublasLtMatmulDescSetAttribute,                                                     \
    (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf, size_t bytes),            \
    (d, a, buf, bytes))                                                                                    \
  X(1, cublasStatus_t, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * p), (p))             \
  X(1, cublasStatus_t, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t p), (p))              \
  X(1, cublasStatus_t, cublasLtMatmulPreferenceSetAttribute,                                               \
    (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void *buf, size_t bytes), \
    (p, a, buf, bytes))                                                                                    \
  X(1, cublasStatus_t, cublasLtMatmulAlgoGetHeuristic,                                                     \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Ad, cublasLtMatrixLayout_t Bd,  \
     cublasLtMatrixLayout_t Cd, cublasLtMatrixLayout_t Dd, cublasLtMatmulPreference_t pref, int wanted,   \
     cublasLtMatmulHeuristicResult_t results[], int *found),                                               \
    (h, desc, Ad, Bd, Cd, Dd, pref, wanted, results, found))

typedef struct {
#define TXL_FIELD(lib, ret, name, params, args) ret(*name) params;
  TXL_CUBLAS_FUNCTIONS(TXL_FIELD)
#undef TXL_FIELD
} CublasTable;

static CublasTable g_table;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void *open_library(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) txl_fatal("cannot open %s, which the CUDA backend needs: %s", soname, dlerror());
  return h;
}

/* dlsym's object pointer into a function pointer field, through memcpy (POSIX guarantees that
 * the two have one representation; ISO C has no cast between them). */
static void resolve(void *field, size_t bytes, void *lib, const char *soname, const char *name) {
  void *f = dlsym(lib, name);
  if (!f) txl_fatal("%s has no function %s (the CUDA backend was built against cuBLAS %d)", soname, name,
                    CUBLAS_VER_MAJOR);
  memcpy(field, &f, bytes);
}

static void load(void) {
  void *lib[2] = {open_library(TXL_CUBLAS_SONAME), open_library(TXL_CUBLASLT_SONAME)};
  const char *soname[2] = {TXL_CUBLAS_SONAME, TXL_CUBLASLT_SONAME};
#define TXL_RESOLVE(l, ret, name, params, args) \
  resolve(&g_table.name, sizeof g_table.name, lib[l], soname[l], #name);
  TXL_CUBLAS_FUNCTIONS(TXL_RESOLVE)
#undef TXL_RESOLVE
}

#define TXL_FORWARD(l, ret, name, params, args) \
  ret CUBLASWINAPI name params {                \
    pthread_once(&g_once, load);                \
    return g_table.name args;                   \
  }
TXL_CUBLAS_FUNCTIONS(TXL_FORWARD)
#undef TXL_FORWARD
