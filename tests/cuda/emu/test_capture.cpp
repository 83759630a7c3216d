/* The emulator's stream capture and graph replay tested on their own (ctest
 * cuda_emu_selftest_capture; README.md, "Stream capture and graphs"):
 *   - a captured sequence (kernels, one with dynamic shared memory and barriers, memcpyAsync,
 *     memsetAsync, cublasSgemm, cublasGemmEx, cublasGemmStridedBatchedEx, cublasLtMatmul) runs
 *     nothing while it is captured and replays to the same bits as the same calls run directly;
 *   - a replay sees the kernel arguments and GEMM scalars of capture time (a host value changed
 *     since is not seen) and the memory behind pointers at replay time (device pointer mode);
 *   - replaying twice gives twice the effect of an increment;
 *   - the counts: a graph launch is one graph launch, its kernels are not host launches;
 *   - fork and join through events, and the unjoined fork;
 *   - each call a capture forbids fails with the runtime's code, invalidates the capture, and
 *     cudaStreamEndCapture then fails with a NULL graph; the legacy stream's rule for blocking
 *     and non-blocking capturing streams.
 * Prints one line per check; exits 1 if any failed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "tests/cuda/emu/selftest.h"


/* TXL_LAUNCH launches on the backend's stream (txl_cuda_stream); these tests pick the stream. */
#define LAUNCH_ON(stream, kernel, grid, block, shared) \
  txl_emu_launch((grid), (block), (shared), (stream), kernel, #kernel)

/* ---- kernels --------------------------------------------------------------------------------- */
/* y[i] = a x[i] + y[i] (a: a host value passed by value) */
static __global__ void axpy_kernel(float *y, const float *x, float a, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

/* out[i] = in[n - 1 - i] within each block of n = blockDim.x, through the dynamic shared memory
 * and a barrier */
static __global__ void reverse_kernel(float *out, const float *in) {
  TXL_DYNAMIC_SHARED(float, tile);
  const int n = (int)blockDim.x, t = (int)threadIdx.x, base = (int)blockIdx.x * n;
  tile[t] = in[base + t];
  __syncthreads();
  out[base + t] = tile[n - 1 - t];
}

/* y[i] += *s (s read through a device pointer when the kernel runs) */
static __global__ void add_scalar_kernel(float *y, const float *s, int n) {
  const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += *s;
}

static __global__ void increment_kernel(int *c) {
  if (threadIdx.x == 0) c[0] += 1;
}

/* ---- one sequence of every kind of captured work ----------------------------------------------- */
enum { N = 64, TILE = 16, M = 8, K = 8 }; /* N = M * K: the vectors are also M x K matrices */

struct Bufs {
  float *pin_in, *pin_out;                  /* page-locked host memory [N], [5 N] */
  float *x, *y, *z, *b, *c, *c0, *bias, *bt; /* device memory */
  cublasHandle_t h;
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld;
};

static void bufs_create(Bufs *u, cudaStream_t s) {
  CUDA_CHECK(cudaMallocHost(&u->pin_in, N * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&u->pin_out, 5 * N * sizeof(float)));
  float **dev[] = {&u->x, &u->y, &u->z, &u->b, &u->c, &u->c0, &u->bias, &u->bt};
  for (float **p : dev) CUDA_CHECK(cudaMalloc(p, 4 * N * sizeof(float)));
  /* inputs: multiples of 1/8 in [-2, 2): every product and short sum is exact in float */
  std::vector<float> v(4 * N);
  for (int i = 0; i < 4 * N; i++) v[(size_t)i] = (float)((i * 37) % 32 - 16) / 8.0f;
  for (int i = 0; i < N; i++) u->pin_in[i] = v[(size_t)i];
  CUDA_CHECK(cudaMemcpy(u->b, v.data(), 4 * N * sizeof(float), cudaMemcpyHostToDevice));
  for (int i = 0; i < 4 * N; i++) v[(size_t)i] = (float)((i * 11) % 16 - 8) / 4.0f;
  CUDA_CHECK(cudaMemcpy(u->c0, v.data(), 4 * N * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(u->bias, v.data() + 3, M * sizeof(float), cudaMemcpyHostToDevice));
  CUBLAS_CHECK(cublasCreate(&u->h));
  CUBLAS_CHECK(cublasSetStream(u->h, s));
  CUBLAS_CHECK(cublasLtCreate(&u->lt));
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&u->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(u->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(u->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &u->bias, sizeof u->bias));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&u->la, CUDA_R_32F, M, K, M));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&u->lb, CUDA_R_32F, K, M, K));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&u->ld, CUDA_R_32F, M, M, M));
}

static void bufs_destroy(Bufs *u) {
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(u->la));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(u->lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(u->ld));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(u->desc));
  CUBLAS_CHECK(cublasLtDestroy(u->lt));
  CUBLAS_CHECK(cublasDestroy(u->h));
  float *dev[] = {u->x, u->y, u->z, u->b, u->c, u->c0, u->bias, u->bt};
  for (float *p : dev) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFreeHost(u->pin_in));
  CUDA_CHECK(cudaFreeHost(u->pin_out));
}

/* The work, enqueued on s: 4 kernels and 4 GEMMs (8 launches), 5 copies, 1 memset. It starts from
 * the inputs (pin_in, b, c0, bias) and rewrites everything it reads after, so running it again
 * gives the same bits. */
static const long SEQ_LAUNCHES = 8;
static void sequence(Bufs *u, cudaStream_t s, float a) {
  CUDA_CHECK(cudaMemcpyAsync(u->x, u->pin_in, N * sizeof(float), cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaMemsetAsync(u->y, 0, N * sizeof(float), s));
  LAUNCH_ON(s, axpy_kernel, 2, 32, 0)(u->y, u->x, a, (int)N); /* y = a x */
  CUDA_LAUNCH_CHECK();
  LAUNCH_ON(s, axpy_kernel, 2, 32, 0)(u->y, u->b, 0.5f, (int)N); /* y += b / 2 */
  CUDA_LAUNCH_CHECK();
  LAUNCH_ON(s, reverse_kernel, N / TILE, TILE, TILE * sizeof(float))(u->z, u->y);
  CUDA_LAUNCH_CHECK();
  LAUNCH_ON(s, add_scalar_kernel, 1, N, 0)(u->z, u->b + 5, (int)N);
  CUDA_LAUNCH_CHECK();
  CUDA_CHECK(cudaMemcpyAsync(u->c, u->c0, 4 * N * sizeof(float), cudaMemcpyDeviceToDevice, s));
  const float one = 1.0f, half = 0.5f, quarter = 0.25f;
  /* c[M x M] = z[M x K] b[K x M] + c / 2 */
  CUBLAS_CHECK(cublasSgemm(u->h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, K, &one, u->z, M, u->b, K, &half, u->c, M));
  /* c + N: z^T [K x M]^T ... as GemmEx: c2[M x M] = 0.25 z^T(as K x M read transposed) b^T + c2 */
  CUBLAS_CHECK(cublasGemmEx(u->h, CUBLAS_OP_T, CUBLAS_OP_T, M, M, K, &quarter, u->z, CUDA_R_32F, K, u->b, CUDA_R_32F,
                            M, &one, u->c + N, CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  /* 2 batches of c[M x M] = z b + c on c + 2N and c + 3N (A, B strides N) */
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(u->h, CUBLAS_OP_N, CUBLAS_OP_N, M, M, K, &one, u->z, CUDA_R_32F, M, 0,
                                          u->b, CUDA_R_32F, K, N, &half, u->c + 2 * N, CUDA_R_32F, M, N, 2,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  /* cuBLASLt with a bias epilogue, in place on c (C == D) */
  CUBLAS_CHECK(cublasLtMatmul(u->lt, u->desc, &one, u->z, u->la, u->b, u->lb, &half, u->c, u->ld, u->c, u->ld, NULL,
                              NULL, 0, s));
  CUDA_CHECK(cudaMemcpyAsync(u->pin_out, u->z, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaMemcpyAsync(u->pin_out + N, u->c, 4 * N * sizeof(float), cudaMemcpyDeviceToHost, s));
}

/* Every output (the device buffers and the page-locked copy) overwritten with 0xAB bytes. */
static void poison(Bufs *u) {
  CUDA_CHECK(cudaMemset(u->x, 0xAB, 4 * N * sizeof(float)));
  CUDA_CHECK(cudaMemset(u->y, 0xAB, 4 * N * sizeof(float)));
  CUDA_CHECK(cudaMemset(u->z, 0xAB, 4 * N * sizeof(float)));
  CUDA_CHECK(cudaMemset(u->c, 0xAB, 4 * N * sizeof(float)));
  memset(u->pin_out, 0xAB, 5 * N * sizeof(float));
}

static bool poisoned(const float *p, size_t n) {
  const unsigned char *b = reinterpret_cast<const unsigned char *>(p);
  for (size_t i = 0; i < n * sizeof(float); i++)
    if (b[i] != 0xAB) return false;
  return true;
}

static cudaGraphExec_t capture_end(cudaStream_t s, cudaGraph_t *graph) {
  CUDA_CHECK(cudaStreamEndCapture(s, graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, *graph, 0));
  return exec;
}

static void test_replay_bits(void) {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  Bufs u;
  bufs_create(&u, s);
  poison(&u);
  sequence(&u, s, 0.75f);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> direct(u.pin_out, u.pin_out + 5 * N);
  check(!poisoned(direct.data(), 5 * N), "the sequence run directly wrote its outputs");

  poison(&u);
  long l0, s0, l1, s1, g0, k0, g1, k1;
  txl_emu_counts(&l0, &s0);
  txl_emu_graph_counts(&g0, &k0);
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus st;
  CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  sequence(&u, s, 0.75f);
  cudaGraph_t graph;
  cudaGraphExec_t exec = capture_end(s, &graph);
  txl_emu_counts(&l1, &s1);
  txl_emu_graph_counts(&g1, &k1);
  check(st == cudaStreamCaptureStatusActive, "cudaStreamIsCapturing during the capture: %d", (int)st);
  check(poisoned(u.pin_out, 5 * N) && poisoned(u.x, N) && poisoned(u.y, N) && poisoned(u.z, N) &&
            poisoned(u.c, 4 * N),
        "captured work does not run (every output still poisoned)");
  check(l1 == l0 && s1 == s0 && g1 == g0 && k1 == k0,
        "capturing counts nothing: %ld launches, %ld syncs, %ld graph launches, %ld graph kernels", l1 - l0,
        s1 - s0, g1 - g0, k1 - k0);
  CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  check(st == cudaStreamCaptureStatusNone, "after cudaStreamEndCapture the stream is not capturing");

  CUDA_CHECK(cudaGraphDestroy(graph)); /* the executable graph stands on its own */
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  txl_emu_counts(&l0, &s0);
  txl_emu_graph_counts(&g0, &k0);
  check(memcmp(direct.data(), u.pin_out, 5 * N * sizeof(float)) == 0,
        "the replay gives the bits of the direct run (kernels, copies, memset, 4 GEMMs)");
  check(l0 == l1 && s0 == s1 + 1 && g0 == g1 + 1 && k0 == k1 + SEQ_LAUNCHES,
        "a replay: %ld host launches, %ld graph launch, %ld kernels and GEMMs in it (want 0, 1, %ld); %ld host "
        "synchronisation (the cudaStreamSynchronize)",
        l0 - l1, g0 - g1, k0 - k1, SEQ_LAUNCHES, s0 - s1);
  poison(&u);
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  check(memcmp(direct.data(), u.pin_out, 5 * N * sizeof(float)) == 0, "a second replay: the same bits again");
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  bufs_destroy(&u);
  CUDA_CHECK(cudaStreamDestroy(s));
}

/* ---- values of capture time, memory of replay time --------------------------------------------- */
static void test_replay_values(void) {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *y, *sc, *a, *b, *c, *alpha_dev, *beta_dev;
  CUDA_CHECK(cudaMalloc(&y, 32 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&sc, sizeof(float)));
  CUDA_CHECK(cudaMalloc(&a, 4 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, 4 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&c, 8 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&alpha_dev, sizeof(float)));
  CUDA_CHECK(cudaMalloc(&beta_dev, sizeof(float)));
  for (int i = 0; i < 4; i++) a[i] = (float)(i + 1), b[i] = 1.0f; /* [1 3; 2 4] times ones */
  CUDA_CHECK(cudaMemset(c, 0, 8 * sizeof(float)));
  const float ones[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                          1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  cublasHandle_t h, hd;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasCreate(&hd));
  CUBLAS_CHECK(cublasSetStream(h, s));
  CUBLAS_CHECK(cublasSetStream(hd, s));
  CUBLAS_CHECK(cublasSetPointerMode(hd, CUBLAS_POINTER_MODE_DEVICE));

  float scale = 2.0f, alpha = 1.0f, beta = 0.0f; /* host values, changed after the capture */
  *sc = 5.0f, *alpha_dev = 1.0f, *beta_dev = 0.0f;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaMemcpyAsync(y, y + 16, 16 * sizeof(float), cudaMemcpyDeviceToDevice, s)); /* y = 1 */
  LAUNCH_ON(s, axpy_kernel, 1, 16, 0)(y, y + 16, scale, 16); /* y = 1 + scale */
  LAUNCH_ON(s, add_scalar_kernel, 1, 16, 0)(y, sc, 16);     /* y += *sc */
  CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, a, 2, b, 2, &beta, c, 2));
  CUBLAS_CHECK(cublasSgemm(hd, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, alpha_dev, a, 2, b, 2, beta_dev, c + 4, 2));
  cudaGraph_t graph;
  cudaGraphExec_t exec = capture_end(s, &graph);
  CUDA_CHECK(cudaMemcpy(y + 16, ones, 16 * sizeof(float), cudaMemcpyHostToDevice));
  /* after the capture: the host values change, and the device values (outside any capture) */
  scale = 100.0f, alpha = 100.0f, beta = 100.0f;
  const float seven = 7.0f, three = 3.0f;
  CUDA_CHECK(cudaMemcpy(sc, &seven, sizeof seven, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(alpha_dev, &three, sizeof three, cudaMemcpyHostToDevice));
  CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE)); /* a setting changed since */
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  /* y = 1 + 2 (the captured scale) + 7 (*sc at replay) = 10; row sums of [1 3; 2 4]: 4, 6 */
  int bad = 0;
  for (int i = 0; i < 16; i++) bad += y[i] != 10.0f;
  check(bad == 0, "kernel arguments: the host scale of capture time (2, not 100), *sc at replay (7): y[0] = %g, "
        "%d of 16 wrong", (double)y[0], bad);
  check(c[0] == 4.0f && c[1] == 6.0f && c[2] == 4.0f && c[3] == 6.0f,
        "cublasSgemm in host pointer mode: alpha and beta of capture time (1, 0): %g %g %g %g", (double)c[0],
        (double)c[1], (double)c[2], (double)c[3]);
  check(c[4] == 12.0f && c[5] == 18.0f && c[6] == 12.0f && c[7] == 18.0f,
        "cublasSgemm in device pointer mode: *alpha at replay (3): %g %g %g %g", (double)c[4], (double)c[5],
        (double)c[6], (double)c[7]);
  (void)scale, (void)alpha, (void)beta;
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUBLAS_CHECK(cublasDestroy(h));
  CUBLAS_CHECK(cublasDestroy(hd));
  float *all[] = {y, sc, a, b, c, alpha_dev, beta_dev};
  for (float *p : all) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaStreamDestroy(s));
}

/* ---- replays add up ------------------------------------------------------------------------------ */
static void test_replay_twice(void) {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  int *cnt;
  CUDA_CHECK(cudaMalloc(&cnt, sizeof(int)));
  CUDA_CHECK(cudaMemset(cnt, 0, sizeof(int)));
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  LAUNCH_ON(s, increment_kernel, 1, 32, 0)(cnt);
  LAUNCH_ON(s, increment_kernel, 1, 32, 0)(cnt);
  cudaGraph_t graph;
  cudaGraphExec_t exec = capture_end(s, &graph);
  const int after_capture = *cnt;
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  const int once = *cnt;
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  check(after_capture == 0 && once == 2 && *cnt == 4,
        "two increments captured: %d after the capture, %d after one replay, %d after two (want 0, 2, 4)",
        after_capture, once, *cnt);
  /* a graph launched into a capture: its nodes run where the outer graph runs them */
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  LAUNCH_ON(s, increment_kernel, 1, 32, 0)(cnt);
  cudaGraph_t outer;
  cudaGraphExec_t outer_exec = capture_end(s, &outer);
  const int before = *cnt;
  CUDA_CHECK(cudaGraphLaunch(outer_exec, s));
  check(before == 4 && *cnt == 7, "a graph launched into a capture: %d -> %d (want 4 -> 7)", before, *cnt);
  CUDA_CHECK(cudaGraphExecDestroy(outer_exec));
  CUDA_CHECK(cudaGraphDestroy(outer));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaFree(cnt));
  CUDA_CHECK(cudaStreamDestroy(s));
}

/* ---- fork and join --------------------------------------------------------------------------------- */
static void test_fork_join(void) {
  cudaStream_t s, s2;
  CUDA_CHECK(cudaStreamCreate(&s));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  float *x, *one;
  CUDA_CHECK(cudaMalloc(&x, 32 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&one, sizeof(float)));
  CUDA_CHECK(cudaMemset(x, 0, 32 * sizeof(float)));
  *one = 1.0f;

  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  LAUNCH_ON(s, add_scalar_kernel, 1, 32, 0)(x, one, 32); /* x = 1 */
  CUDA_CHECK(cudaEventRecord(fork, s));
  CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
  cudaStreamCaptureStatus st2;
  CUDA_CHECK(cudaStreamIsCapturing(s2, &st2));
  LAUNCH_ON(s2, axpy_kernel, 1, 32, 0)(x, x, 2.0f, 32); /* x = 3 x = 3 */
  CUDA_CHECK(cudaEventRecord(join, s2));
  CUDA_CHECK(cudaStreamWaitEvent(s, join, 0));
  LAUNCH_ON(s, add_scalar_kernel, 1, 32, 0)(x, one, 32); /* x = 4 */
  cudaGraph_t graph;
  cudaGraphExec_t exec = capture_end(s, &graph);
  cudaStreamCaptureStatus after;
  CUDA_CHECK(cudaStreamIsCapturing(s2, &after));
  const float before = x[0];
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  check(st2 == cudaStreamCaptureStatusActive && after == cudaStreamCaptureStatusNone && before == 0.0f &&
            x[0] == 4.0f && x[31] == 4.0f,
        "fork and join: the waiting stream joins the capture (status %d, %d after the end), its work replayed "
        "in order: %g -> %g (want 0 -> 4)",
        (int)st2, (int)after, (double)before, (double)x[0]);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));

  /* forked, never joined: cudaStreamEndCapture fails with cudaErrorStreamCaptureUnjoined */
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaEventRecord(fork, s));
  CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
  LAUNCH_ON(s2, add_scalar_kernel, 1, 32, 0)(x, one, 32);
  cudaError_t e = cudaStreamEndCapture(s2, &graph); /* not where it began */
  const bool unmatched = e == cudaErrorStreamCaptureUnmatched;
  e = cudaStreamEndCapture(s, &graph);
  CUDA_CHECK(cudaStreamIsCapturing(s2, &after));
  (void)cudaGetLastError();
  check(unmatched && e == cudaErrorStreamCaptureInvalidated && graph == NULL && after == cudaStreamCaptureStatusNone,
        "cudaStreamEndCapture on the forked stream: cudaErrorStreamCaptureUnmatched (invalidates), then on the "
        "origin: %s, NULL graph, both streams out of capture",
        cudaGetErrorName(e));
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CUDA_CHECK(cudaEventRecord(fork, s));
  CUDA_CHECK(cudaStreamWaitEvent(s2, fork, 0));
  LAUNCH_ON(s2, add_scalar_kernel, 1, 32, 0)(x, one, 32);
  graph = reinterpret_cast<cudaGraph_t>(&e);
  e = cudaStreamEndCapture(s, &graph);
  (void)cudaGetLastError();
  check(e == cudaErrorStreamCaptureUnjoined && graph == NULL && x[0] == 4.0f,
        "work forked and never joined: %s, NULL graph, nothing ran", cudaGetErrorName(e));

  CUDA_CHECK(cudaEventDestroy(fork));
  CUDA_CHECK(cudaEventDestroy(join));
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(one));
  CUDA_CHECK(cudaStreamDestroy(s));
  CUDA_CHECK(cudaStreamDestroy(s2));
}

/* ---- what a capture forbids ------------------------------------------------------------------------ */
struct Forbid {
  cudaStream_t s;            /* the capturing stream */
  float *dev, *dev2, *pin;   /* device memory, page-locked host memory */
  float pageable[16];
  cudaEvent_t captured;      /* recorded in the capture */
  cudaEvent_t outside;       /* recorded before it */
  cublasHandle_t legacy;     /* a handle on the legacy stream */
  int *cnt;
};

/* One forbidden call in a fresh capture of one increment (on f.s): it must return `want`, leave the
 * capture invalidated (later work on the stream: cudaErrorStreamCaptureInvalidated), and
 * cudaStreamEndCapture must fail with cudaErrorStreamCaptureInvalidated and a NULL graph, the
 * stream out of capture; nothing of the capture ran. */
static void forbidden(Forbid &f, const char *what, cudaError_t want, cudaError_t (*call)(Forbid &)) {
  const int before = *f.cnt;
  long l0, s0, l1, s1;
  CUDA_CHECK(cudaStreamBeginCapture(f.s, cudaStreamCaptureModeGlobal));
  LAUNCH_ON(f.s, increment_kernel, 1, 32, 0)(f.cnt);
  CUDA_CHECK(cudaEventRecord(f.captured, f.s));
  txl_emu_counts(&l0, &s0);
  const cudaError_t got = call(f);
  txl_emu_counts(&l1, &s1);
  const cudaError_t last = cudaGetLastError();
  cudaStreamCaptureStatus st;
  CUDA_CHECK(cudaStreamIsCapturing(f.s, &st));
  const cudaError_t later = cudaMemsetAsync(f.dev, 0, 4, f.s);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&f);
  const cudaError_t end = cudaStreamEndCapture(f.s, &graph);
  (void)cudaGetLastError();
  cudaStreamCaptureStatus after;
  CUDA_CHECK(cudaStreamIsCapturing(f.s, &after));
  check(got == want && last == want && st == cudaStreamCaptureStatusInvalidated &&
            later == cudaErrorStreamCaptureInvalidated && end == cudaErrorStreamCaptureInvalidated && graph == NULL &&
            after == cudaStreamCaptureStatusNone && *f.cnt == before && l1 == l0 && s1 == s0,
        "during a capture, %s: %s (want %s), then %s, %s from cudaStreamEndCapture, NULL graph, nothing counted",
        what, cudaGetErrorName(got), cudaGetErrorName(want), cudaGetErrorName(later), cudaGetErrorName(end));
}

static __global__ void noop_kernel(int *x) { (void)x; }

static cudaError_t f_malloc(Forbid &) {
  void *p = &p;
  const cudaError_t e = cudaMalloc(&p, 64);
  return p == NULL ? e : cudaSuccess;
}
static cudaError_t f_malloc_host(Forbid &) {
  void *p = &p;
  const cudaError_t e = cudaMallocHost(&p, 64);
  return p == NULL ? e : cudaSuccess;
}
static cudaError_t f_free(Forbid &f) { return cudaFree(f.dev2); }
static cudaError_t f_free_host(Forbid &f) { return cudaFreeHost(f.pin); }
static cudaError_t f_device_sync(Forbid &) { return cudaDeviceSynchronize(); }
static cudaError_t f_stream_sync(Forbid &f) { return cudaStreamSynchronize(f.s); }
static cudaError_t f_event_sync(Forbid &f) { return cudaEventSynchronize(f.captured); }
static cudaError_t f_event_query(Forbid &f) { return cudaEventQuery(f.captured); }
static cudaError_t f_memcpy(Forbid &f) { return cudaMemcpy(f.dev, f.pin, 16, cudaMemcpyHostToDevice); }
static cudaError_t f_memset(Forbid &f) { return cudaMemset(f.dev, 0, 16); }
static cudaError_t f_memset2d(Forbid &f) { return cudaMemset2D(f.dev, 16, 0, 16, 2); }
static cudaError_t f_pageable_h2d(Forbid &f) {
  return cudaMemcpyAsync(f.dev, f.pageable, 16, cudaMemcpyHostToDevice, f.s);
}
static cudaError_t f_pageable_d2h(Forbid &f) {
  return cudaMemcpyAsync(f.pageable, f.dev, 16, cudaMemcpyDeviceToHost, f.s);
}
static cudaError_t f_pageable_default(Forbid &f) {
  return cudaMemcpyAsync(f.pageable, f.dev, 16, cudaMemcpyDefault, f.s);
}
static cudaError_t f_launch_legacy(Forbid &f) {
  LAUNCH_ON((cudaStream_t)0, noop_kernel, 1, 32, 0)(f.cnt);
  return cudaPeekAtLastError();
}
static cudaError_t f_launch_bad(Forbid &f) {
  LAUNCH_ON(f.s, noop_kernel, 1, 2048, 0)(f.cnt); /* more threads than a block may have */
  return cudaPeekAtLastError();
}
static cudaError_t f_copy_legacy(Forbid &f) {
  return cudaMemcpyAsync(f.dev, f.dev2, 16, cudaMemcpyDeviceToDevice, 0);
}
static cudaError_t f_sync_legacy(Forbid &) { return cudaStreamSynchronize(0); }
static cudaError_t f_record_legacy(Forbid &f) { return cudaEventRecord(f.outside, 0); }
static cudaError_t f_wait_outside(Forbid &f) { return cudaStreamWaitEvent(f.s, f.outside, 0); }
static cudaError_t f_gemm_legacy(Forbid &f) {
  const float one = 1.0f;
  const cublasStatus_t st =
      cublasSgemm(f.legacy, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, f.dev, 2, f.dev, 2, &one, f.dev2, 2);
  /* cuBLAS cannot launch its kernel: CUBLAS_STATUS_EXECUTION_FAILED, the runtime's error behind it */
  return st == CUBLAS_STATUS_EXECUTION_FAILED ? cudaPeekAtLastError() : cudaErrorInvalidValue;
}

static void test_forbidden(void) {
  Forbid f;
  CUDA_CHECK(cudaStreamCreate(&f.s)); /* a blocking stream: the legacy stream waits for it */
  CUDA_CHECK(cudaMalloc(&f.dev, 64));
  CUDA_CHECK(cudaMalloc(&f.dev2, 64));
  CUDA_CHECK(cudaMalloc(&f.cnt, sizeof(int)));
  CUDA_CHECK(cudaMallocHost(&f.pin, 64));
  CUDA_CHECK(cudaMemset(f.cnt, 0, sizeof(int)));
  CUDA_CHECK(cudaEventCreate(&f.captured));
  CUDA_CHECK(cudaEventCreate(&f.outside));
  CUDA_CHECK(cudaEventRecord(f.outside, f.s));
  CUBLAS_CHECK(cublasCreate(&f.legacy));
  memset(f.pageable, 0, sizeof f.pageable);
  struct Case {
    const char *what;
    cudaError_t want;
    cudaError_t (*call)(Forbid &);
  } cases[] = {
      {"cudaMalloc", cudaErrorStreamCaptureUnsupported, f_malloc},
      {"cudaMallocHost", cudaErrorStreamCaptureUnsupported, f_malloc_host},
      {"cudaFree", cudaErrorStreamCaptureUnsupported, f_free},
      {"cudaFreeHost", cudaErrorStreamCaptureUnsupported, f_free_host},
      {"cudaDeviceSynchronize", cudaErrorStreamCaptureUnsupported, f_device_sync},
      {"cudaStreamSynchronize of the capturing stream", cudaErrorStreamCaptureUnsupported, f_stream_sync},
      {"cudaEventSynchronize of a captured event", cudaErrorCapturedEvent, f_event_sync},
      {"cudaEventQuery of a captured event", cudaErrorCapturedEvent, f_event_query},
      {"cudaMemcpy (legacy stream)", cudaErrorStreamCaptureImplicit, f_memcpy},
      {"cudaMemset (legacy stream)", cudaErrorStreamCaptureImplicit, f_memset},
      {"cudaMemset2D (legacy stream)", cudaErrorStreamCaptureImplicit, f_memset2d},
      {"cudaMemcpyAsync pageable host to device", cudaErrorStreamCaptureUnsupported, f_pageable_h2d},
      {"cudaMemcpyAsync device to pageable host", cudaErrorStreamCaptureUnsupported, f_pageable_d2h},
      {"cudaMemcpyAsync cudaMemcpyDefault to pageable host", cudaErrorStreamCaptureUnsupported, f_pageable_default},
      {"a kernel launch on the legacy stream", cudaErrorStreamCaptureImplicit, f_launch_legacy},
      {"a kernel launch with a bad configuration", cudaErrorInvalidConfiguration, f_launch_bad},
      {"cudaMemcpyAsync on the legacy stream", cudaErrorStreamCaptureImplicit, f_copy_legacy},
      {"cudaStreamSynchronize of the legacy stream", cudaErrorStreamCaptureImplicit, f_sync_legacy},
      {"cudaEventRecord on the legacy stream", cudaErrorStreamCaptureImplicit, f_record_legacy},
      {"cudaStreamWaitEvent on an event recorded outside the capture", cudaErrorStreamCaptureIsolation,
       f_wait_outside},
      {"cublasSgemm with a handle on the legacy stream", cudaErrorStreamCaptureImplicit, f_gemm_legacy},
  };
  for (const Case &c : cases) forbidden(f, c.what, c.want, c.call);
  float back[4] = {1, 2, 3, 4};
  CUDA_CHECK(cudaMemcpy(f.pin, back, sizeof back, cudaMemcpyHostToHost));
  check(f.pin[3] == 4.0f, "the refused cudaFreeHost freed nothing: the page-locked buffer is still usable");

  /* the rules of the capture calls themselves */
  cudaGraph_t graph;
  cudaError_t e = cudaStreamEndCapture(f.s, &graph);
  (void)cudaGetLastError();
  check(e == cudaErrorIllegalState, "cudaStreamEndCapture on a stream not capturing: %s", cudaGetErrorName(e));
  e = cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal);
  (void)cudaGetLastError();
  check(e == cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy stream: %s",
        cudaGetErrorName(e));
  CUDA_CHECK(cudaStreamBeginCapture(f.s, cudaStreamCaptureModeGlobal));
  e = cudaStreamBeginCapture(f.s, cudaStreamCaptureModeGlobal);
  (void)cudaGetLastError();
  cudaStreamCaptureStatus st;
  const cudaError_t q = cudaStreamIsCapturing(0, &st);
  (void)cudaGetLastError();
  CUDA_CHECK(cudaStreamEndCapture(f.s, &graph));
  check(e == cudaErrorIllegalState && q == cudaErrorStreamCaptureImplicit && graph != NULL,
        "cudaStreamBeginCapture on a capturing stream: %s; cudaStreamIsCapturing of the legacy stream during a "
        "blocking capture: %s, and the capture stays valid",
        cudaGetErrorName(e), cudaGetErrorName(q));
  CUDA_CHECK(cudaGraphDestroy(graph));

  /* a non-blocking capturing stream: the legacy stream does not wait for it, so a kernel on the
   * legacy stream runs at once and the capture stays valid; the synchronous calls are still refused
   * (cudaErrorStreamCaptureUnsupported, the global mode's rule) */
  cudaStream_t nb;
  CUDA_CHECK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  const int before = *f.cnt;
  CUDA_CHECK(cudaStreamBeginCapture(nb, cudaStreamCaptureModeGlobal));
  LAUNCH_ON((cudaStream_t)0, increment_kernel, 1, 32, 0)(f.cnt);
  const cudaError_t launch = cudaGetLastError();
  const int ran = *f.cnt - before;
  CUDA_CHECK(cudaStreamEndCapture(nb, &graph));
  check(launch == cudaSuccess && ran == 1 && graph != NULL,
        "a kernel on the legacy stream during a non-blocking capture runs (%d) and the capture ends with a graph",
        ran);
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(f.s));
  f.s = nb;
  forbidden(f, "cudaMemcpy (non-blocking capturing stream)", cudaErrorStreamCaptureUnsupported, f_memcpy);
  forbidden(f, "cudaMalloc (non-blocking capturing stream)", cudaErrorStreamCaptureUnsupported, f_malloc);
  CUDA_CHECK(cudaStreamDestroy(nb));

  CUBLAS_CHECK(cublasDestroy(f.legacy));
  CUDA_CHECK(cudaEventDestroy(f.captured));
  CUDA_CHECK(cudaEventDestroy(f.outside));
  CUDA_CHECK(cudaFree(f.dev));
  CUDA_CHECK(cudaFree(f.dev2));
  CUDA_CHECK(cudaFree(f.cnt));
  CUDA_CHECK(cudaFreeHost(f.pin));
}

int main(void) {
  printf("cuda emulator: stream capture and graphs, fibers: %s, thread order: %s\n", txl_emu_fiber_backend(),
         txl_emu_order());
  test_replay_bits();
  test_replay_values();
  test_replay_twice();
  test_fork_join();
  test_forbidden();
  return selftest_finish();
}
