/* The CPU emulator of the CUDA kernels tested on its own (ctest cuda_emu_selftest, and
 * cuda_emu_selftest_ucontext with TXL_EMU_FIBERS=ucontext): kernels with known results for the
 * block barrier, the three shuffles and __syncwarp, the block and thread numbering, per-thread
 * parameter copies, the poisoned dynamic shared memory, the launch checks a GPU makes
 * (threads per block, grid size, dynamic shared memory with and without
 * cudaFuncSetAttribute), the runtime and cuBLAS subset (bf16 and fp16 GEMMs included), the cuBLASLt
 * matmul with its epilogues (and TXL_EMU_LT_EPILOGUES), and the detection
 * of barriers that can never complete (each in a child process that must exit 1 with a message
 * naming the kernel);
 * under AddressSanitizer also that out-of-bounds accesses in kernels are reported.
 * Prints one line per check; exits 1 if any failed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_util.h"
#include "tests/cuda/emu/selftest.h"


/* ---- block barrier, numbering, parameters -------------------------------------------------- */

/* Block sum of v(t) = 1000 * block + t over the block's threads, by a tree over a shared array
 * with a __syncthreads per level (blockDim a power of 2). Thread 0 also records the order in
 * which blocks ran; every thread writes its (x, y, z) and its copy of `bias` after adding its
 * own index to it (the parameter is per thread). */
static __global__ void block_sum_kernel(int *sums, int *order, int *counter, int *tids,
                                        int *params, int bias) {
  __shared__ int s[1024];
  const int n = (int)(blockDim.x * blockDim.y * blockDim.z);
  const int t = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int b = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  s[t] = 1000 * b + t;
  __syncthreads();
  for (int h = n / 2; h > 0; h /= 2) {
    if (t < h) s[t] += s[t + h];
    __syncthreads();
  }
  if (t == 0) {
    sums[b] = s[0];
    order[b] = atomicAdd(counter, 1);
  }
  int *tid = tids + 3 * ((int64_t)b * n + t);
  tid[0] = (int)threadIdx.x;
  tid[1] = (int)threadIdx.y;
  tid[2] = (int)threadIdx.z;
  bias += t;
  params[(int64_t)b * n + t] = bias;
}

static void test_block(void) {
  const dim3 grid(3, 2, 2), block(8, 4, 2);
  const int nb = 12, n = 64;
  int *sums, *order, *counter, *tids, *params;
  CUDA_CHECK(cudaMalloc(&sums, nb * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&order, nb * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
  CUDA_CHECK(cudaMalloc(&tids, 3 * 1024 * sizeof(int))); /* >= 3 nb n, and 3 x 1024 below */
  CUDA_CHECK(cudaMalloc(&params, 1024 * sizeof(int)));
  CUDA_CHECK(cudaMemset(counter, 0, sizeof(int)));
  TXL_LAUNCH(block_sum_kernel, grid, block, 0)(sums, order, counter, tids, params, 7);
  CUDA_LAUNCH_CHECK();
  int bad_sum = 0, bad_order = 0, bad_tid = 0, bad_param = 0;
  for (int b = 0; b < nb; b++) {
    bad_sum += sums[b] != 1000 * b * n + n * (n - 1) / 2;
    bad_order += order[b] != b; /* x fastest, then y, then z */
    for (int t = 0; t < n; t++) {
      const int *tid = tids + 3 * (b * n + t);
      bad_tid += tid[0] != t % 8 || tid[1] != (t / 8) % 4 || tid[2] != t / 32;
      bad_param += params[b * n + t] != 7 + t;
    }
  }
  check(bad_sum == 0, "block reduction with __syncthreads, block (8,4,2): %d wrong sums", bad_sum);
  check(bad_order == 0, "blocks of grid (3,2,2) run x fastest, then y, z: %d out of order",
        bad_order);
  check(bad_tid == 0, "threadIdx of a (8,4,2) block: %d wrong", bad_tid);
  check(bad_param == 0, "each thread has its own copy of a by-value parameter: %d wrong",
        bad_param);
  /* 1024 threads, the largest block */
  CUDA_CHECK(cudaMemset(counter, 0, sizeof(int)));
  TXL_LAUNCH(block_sum_kernel, 1, 1024, 0)(sums, order, counter, tids, params, 0);
  CUDA_LAUNCH_CHECK();
  check(sums[0] == 1024 * 1023 / 2, "block reduction with 1024 threads: %d", sums[0]);
  CUDA_CHECK(cudaFree(sums));
  CUDA_CHECK(cudaFree(order));
  CUDA_CHECK(cudaFree(counter));
  CUDA_CHECK(cudaFree(tids));
  CUDA_CHECK(cudaFree(params));
}

/* ---- warp operations ------------------------------------------------------------------------ */

enum { NOUT = 10 }; /* results per thread */

static __global__ void warp_kernel(float *f, double *d, int *iout, unsigned *uout) {
  __shared__ int s[64];
  const int t = (int)threadIdx.x, lane = t & 31, warp = t / 32;
  /* xor butterfly: every lane gets the sum of all lanes */
  float x = (float)lane;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  f[t] = x;
  double y = 0.5 * lane;
  for (int o = 16; o > 0; o >>= 1) y += __shfl_xor_sync(0xffffffffu, y, o);
  d[t] = y;
  int *io = iout + NOUT * t;
  io[0] = __shfl_down_sync(0xffffffffu, lane * 10, 3);          /* own value past lane 31 */
  io[1] = __shfl_down_sync(0xffffffffu, lane * 10, 3, 8);       /* ... past its group of 8 */
  io[2] = __shfl_sync(0xffffffffu, lane * 7 + 1000 * warp, 5);  /* broadcast of lane 5 */
  io[3] = __shfl_sync(0xffffffffu, lane, 2, 8);                 /* lane 2 of the group of 8 */
  io[4] = __shfl_sync(0xffffffffu, lane, 37);                   /* 37 mod 32 = 5 */
  io[5] = __shfl_xor_sync(0xffffffffu, lane, 4, 4);             /* partner in a later group: own */
  io[6] = __shfl_xor_sync(0xffffffffu, lane, 1, 4);
  /* __syncwarp orders shared memory within the warp */
  s[t] = 100 * t;
  __syncwarp();
  io[7] = s[warp * 32 + (lane + 1) % 32];
  __syncwarp();
  /* several rounds of shuffles in a row reuse the slots (double-buffered) */
  int z = lane;
  for (int r = 0; r < 5; r++) z = __shfl_sync(0xffffffffu, z, (lane + 1) & 31);
  io[8] = z;
  uout[t] = __shfl_xor_sync(0xffffffffu, 0x80000000u | (unsigned)lane, 31);
  io[9] = __shfl_down_sync(0xffffffffu, -lane, 16);
}

static void test_warp(void) {
  const int n = 64;
  float *f;
  double *d;
  int *io;
  unsigned *uo;
  CUDA_CHECK(cudaMalloc(&f, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d, n * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&io, NOUT * n * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&uo, n * sizeof(unsigned)));
  TXL_LAUNCH(warp_kernel, 1, n, 0)(f, d, io, uo);
  CUDA_LAUNCH_CHECK();
  int bad[NOUT + 2] = {0};
  for (int t = 0; t < n; t++) {
    const int lane = t & 31, warp = t / 32, g8 = lane & ~7, g4 = lane & ~3;
    const int *r = io + NOUT * t;
    bad[0] += r[0] != (lane + 3 < 32 ? (lane + 3) * 10 : lane * 10);
    bad[1] += r[1] != (lane + 3 < g8 + 8 ? (lane + 3) * 10 : lane * 10);
    bad[2] += r[2] != 35 + 1000 * warp;
    bad[3] += r[3] != g8 + 2;
    bad[4] += r[4] != 5;
    bad[5] += r[5] != ((lane ^ 4) >= g4 + 4 ? lane : (lane ^ 4));
    bad[6] += r[6] != (lane ^ 1);
    bad[7] += r[7] != 100 * (warp * 32 + (lane + 1) % 32);
    bad[8] += r[8] != (lane + 5) % 32;
    bad[9] += r[9] != (lane + 16 < 32 ? -(lane + 16) : -lane);
    bad[10] += f[t] != 496.0f || d[t] != 248.0;
    bad[11] += uo[t] != (0x80000000u | (unsigned)(lane ^ 31));
  }
  check(bad[10] == 0, "__shfl_xor_sync butterfly sums (float and double): %d wrong", bad[10]);
  check(bad[0] == 0, "__shfl_down_sync by 3: %d wrong", bad[0]);
  check(bad[1] == 0, "__shfl_down_sync by 3, width 8: %d wrong", bad[1]);
  check(bad[2] == 0, "__shfl_sync broadcast of lane 5 (per warp): %d wrong", bad[2]);
  check(bad[3] == 0, "__shfl_sync lane 2, width 8: %d wrong", bad[3]);
  check(bad[4] == 0, "__shfl_sync lane 37 = lane 5: %d wrong", bad[4]);
  check(bad[5] == 0, "__shfl_xor_sync 4, width 4 (later group: own value): %d wrong", bad[5]);
  check(bad[6] == 0, "__shfl_xor_sync 1, width 4: %d wrong", bad[6]);
  check(bad[7] == 0, "__syncwarp orders shared memory: %d wrong", bad[7]);
  check(bad[8] == 0, "5 rotations by __shfl_sync in a row: %d wrong", bad[8]);
  check(bad[9] == 0, "__shfl_down_sync of negative ints: %d wrong", bad[9]);
  check(bad[11] == 0, "__shfl_xor_sync of unsigned: %d wrong", bad[11]);
  CUDA_CHECK(cudaFree(f));
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaFree(io));
  CUDA_CHECK(cudaFree(uo));
}

/* ---- dynamic shared memory ------------------------------------------------------------------ */

/* Reads its float of the dynamic shared memory before writing it: NaN bytes in every block. */
static __global__ void poison_kernel(uint32_t *seen) {
  TXL_DYNAMIC_SHARED(float, sm);
  const int t = (int)threadIdx.x;
  uint32_t bits;
  memcpy(&bits, &sm[t], 4);
  seen[blockIdx.x * blockDim.x + t] = bits;
  __syncthreads();
  sm[t] = 1.0f; /* the next block must not see this */
}

/* Writes the last byte of `bytes` of dynamic shared memory and reports it ran. */
static __global__ void touch_shared_kernel(int *ran, size_t bytes) {
  TXL_DYNAMIC_SHARED(unsigned char, sm);
  if (threadIdx.x == 0) {
    sm[bytes - 1] = 1;
    *ran += 1;
  }
}

static void test_shared(void) {
  const int n = 96, blocks = 3;
  uint32_t *seen;
  CUDA_CHECK(cudaMalloc(&seen, n * blocks * sizeof(uint32_t)));
  TXL_LAUNCH(poison_kernel, blocks, n, n * sizeof(float))(seen);
  CUDA_LAUNCH_CHECK();
  int bad = 0;
  for (int i = 0; i < n * blocks; i++) {
    float v;
    memcpy(&v, &seen[i], 4);
    bad += seen[i] != 0xFFFFFFFFu || !isnan(v);
  }
  check(bad == 0, "dynamic shared memory is NaN bytes at the start of each of 3 blocks: %d not",
        bad);
  CUDA_CHECK(cudaFree(seen));

  int *ran;
  CUDA_CHECK(cudaMalloc(&ran, sizeof(int)));
  *ran = 0;
  const size_t k48 = 48 * 1024;
  TXL_LAUNCH(touch_shared_kernel, 1, 32, k48)(ran, k48);
  cudaError_t e = cudaGetLastError();
  check(e == cudaSuccess && *ran == 1, "48 KiB of dynamic shared memory: %s, ran %d",
        cudaGetErrorName(e), *ran);
  TXL_LAUNCH(touch_shared_kernel, 1, 32, k48 + 16)(ran, k48 + 16);
  e = cudaGetLastError();
  check(e == cudaErrorInvalidValue && *ran == 1,
        "48 KiB + 16 without the attribute: %s, kernel did not run", cudaGetErrorName(e));
  /* 60 KiB: within the opt-in limit of every architecture (64 KiB on sm_75) */
  e = cudaFuncSetAttribute(touch_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           60 * 1024);
  check(e == cudaSuccess, "cudaFuncSetAttribute 60 KiB: %s", cudaGetErrorName(e));
  TXL_LAUNCH(touch_shared_kernel, 1, 32, 56 * 1024)(ran, 56 * 1024);
  e = cudaGetLastError();
  check(e == cudaSuccess && *ran == 2, "56 KiB after raising the limit to 60 KiB: %s, ran %d",
        cudaGetErrorName(e), *ran);
  TXL_LAUNCH(touch_shared_kernel, 1, 32, 60 * 1024 + 1)(ran, 60 * 1024 + 1);
  e = cudaGetLastError();
  check(e == cudaErrorInvalidValue && *ran == 2, "60 KiB + 1 over the raised limit: %s",
        cudaGetErrorName(e));
  TXL_LAUNCH(poison_kernel, 1, 32, 56 * 1024)(seen);
  e = cudaGetLastError();
  check(e == cudaErrorInvalidValue,
        "the limit is per kernel: another kernel with 56 KiB: %s", cudaGetErrorName(e));
  CUDA_CHECK(cudaFree(ran));
}

/* A race: each thread writes its slot and reads its neighbour's with no barrier between. On a GPU
 * the result is undefined; here it depends on the order the threads run in, which is how the
 * tests expose a missing barrier (they run in both orders). */
static __global__ void race_kernel(int *out) {
  TXL_DYNAMIC_SHARED(int, sm);
  const int n = (int)blockDim.x, t = (int)threadIdx.x;
  sm[t] = t + 1;
  out[t] = sm[(t + 1) % n]; /* missing __syncthreads before this read */
}

/* A race between warps that a warp operation before the write and one after it hide from the
 * forward and reverse orders (both move every warp past one warp operation a round, so every slot
 * is written before any is read): each thread reads the slot of its partner in the other warp. */
static __global__ void warp_race_kernel(int *out) {
  TXL_DYNAMIC_SHARED(int, sm);
  const int n = (int)blockDim.x, t = (int)threadIdx.x;
  sm[t] = __shfl_xor_sync(0xffffffffu, t ^ 1, 1); /* t, from the partner lane */
  (void)__shfl_xor_sync(0xffffffffu, t, 1);
  out[t] = sm[(t + 32) % n]; /* missing __syncthreads before this read */
}

static void test_order(void) {
  const int n = 64;
  int *out;
  CUDA_CHECK(cudaMalloc(&out, n * sizeof(int)));
  TXL_LAUNCH(race_kernel, 1, n, n * sizeof(int))(out);
  CUDA_LAUNCH_CHECK();
  const bool reverse = strcmp(txl_emu_order(), "reverse") == 0, warps = strcmp(txl_emu_order(), "warps") == 0;
  /* forward (and warps: warp 0 runs first): thread 0 reads slot 1 before thread 1 wrote it (the
   * 0xFF poison, -1) and the last thread reads slot 0 written; reverse: the other way round */
  const int want0 = reverse ? 2 : -1, want_last = reverse ? -1 : 1;
  check(out[0] == want0 && out[n - 1] == want_last,
        "order %s: a missing barrier shows (thread 0 read %d, want %d; thread %d read %d, want %d)",
        txl_emu_order(), out[0], want0, n - 1, out[n - 1], want_last);
  TXL_LAUNCH(warp_race_kernel, 1, n, n * sizeof(int))(out);
  CUDA_LAUNCH_CHECK();
  /* warps: warp 0 reads warp 1's slots before warp 1 ran (the poison); the other orders: written */
  const int want_w0 = warps ? -1 : 32, want_w1 = 0;
  check(out[0] == want_w0 && out[32] == want_w1,
        "order %s: a missing barrier between warps in step %s (thread 0 read %d, want %d; thread 32 read %d, "
        "want %d)",
        txl_emu_order(), warps ? "shows" : "stays hidden", out[0], want_w0, out[32], want_w1);
  CUDA_CHECK(cudaFree(out));
}

/* ---- launch configuration ------------------------------------------------------------------- */

static __global__ void flag_kernel(int *ran) {
  if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) *ran += 1;
}

static void test_config(void) {
  int *ran;
  CUDA_CHECK(cudaMalloc(&ran, sizeof(int)));
  *ran = 0;
  struct {
    dim3 grid, block;
    const char *what;
  } bad[] = {
      {dim3(1), dim3(2048), "2048 threads per block"},
      {dim3(1), dim3(1025), "1025 threads per block"},
      {dim3(1), dim3(32, 32, 2), "block (32,32,2): 2048 threads"},
      {dim3(1), dim3(1, 1, 65), "block z = 65"},
      {dim3(1), dim3(0), "block x = 0"},
      {dim3(0), dim3(32), "grid x = 0"},
      {dim3(1, 65536), dim3(32), "grid y = 65536"},
      {dim3(1, 1, 65536), dim3(32), "grid z = 65536"},
      {dim3(1u << 31), dim3(32), "grid x = 2^31"},
  };
  for (const auto &c : bad) {
    TXL_LAUNCH(flag_kernel, c.grid, c.block, 0)(ran);
    const cudaError_t e = cudaGetLastError(), again = cudaGetLastError();
    check(e == cudaErrorInvalidConfiguration && again == cudaSuccess && *ran == 0,
          "launch with %s: %s, then %s, kernel did not run", c.what, cudaGetErrorName(e),
          cudaGetErrorName(again));
  }
  /* the limits themselves are fine */
  TXL_LAUNCH(flag_kernel, dim3(1, 65535, 1), dim3(1), 0)(ran);
  cudaError_t e = cudaGetLastError();
  check(e == cudaSuccess && *ran == 1, "launch with grid (1,65535,1): %s", cudaGetErrorName(e));
  TXL_LAUNCH(flag_kernel, dim3(1), dim3(1024), 0)(ran);
  e = cudaGetLastError();
  check(e == cudaSuccess && *ran == 2, "launch with 1024 threads: %s", cudaGetErrorName(e));
  CUDA_CHECK(cudaFree(ran));
}

/* ---- the architecture of TXL_EMU_ARCH ------------------------------------------------------ */

/* What each architecture must report and enforce, from the CUDA C++ Programming Guide's table of
 * technical specifications per compute capability (the test's own copy: emu_arch.cpp is what
 * it checks). */
struct ArchWant {
  const char *id, *part;
  int major, minor, optin_kib, per_sm_kib, threads_per_sm;
};
static const ArchWant kArchWant[] = {
    {"sm_75", "T4", 7, 5, 64, 64, 1024},     {"sm_80", "A100", 8, 0, 163, 164, 2048},
    {"sm_86", "A10", 8, 6, 99, 100, 1536},   {"sm_89", "L4", 8, 9, 99, 100, 1536},
    {"sm_90", "H100", 9, 0, 227, 228, 2048},
};

static __global__ void optin_kernel(int *ran, size_t bytes) {
  TXL_DYNAMIC_SHARED(unsigned char, sm);
  if (threadIdx.x == 0) {
    sm[0] = 1;
    sm[bytes - 1] = 1;
    *ran += 1;
  }
}

static void test_arch(void) {
  const char *env = getenv("TXL_EMU_ARCH");
  const char *id = env && env[0] ? env : "sm_90";
  const ArchWant *w = NULL;
  for (const ArchWant &a : kArchWant)
    if (strcmp(a.id, id) == 0) w = &a;
  if (!w) {
    check(false, "TXL_EMU_ARCH=%s is not one this test knows", id);
    return;
  }
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int optin = 0, per_sm = 0, major = 0, regs = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CUDA_CHECK(cudaDeviceGetAttribute(&regs, cudaDevAttrMaxRegistersPerBlock, 0));
  check(prop.major == w->major && prop.minor == w->minor && major == w->major &&
            strstr(prop.name, w->part) != NULL && strstr(prop.name, w->id) != NULL &&
            prop.sharedMemPerBlock == 48 * 1024 &&
            prop.sharedMemPerBlockOptin == (size_t)w->optin_kib * 1024 &&
            optin == w->optin_kib * 1024 &&
            prop.sharedMemPerMultiprocessor == (size_t)w->per_sm_kib * 1024 &&
            per_sm == w->per_sm_kib * 1024 && prop.maxThreadsPerBlock == 1024 &&
            prop.maxThreadsPerMultiProcessor == w->threads_per_sm && prop.regsPerBlock == 65536 &&
            regs == 65536 && prop.multiProcessorCount > 0,
        "%s: \"%s\", sm %d.%d, %d SMs, shared %zu / %zu opt-in / %zu per SM, threads %d / %d "
        "per SM, registers %d per block",
        id, prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlock,
        prop.sharedMemPerBlockOptin, prop.sharedMemPerMultiprocessor, prop.maxThreadsPerBlock,
        prop.maxThreadsPerMultiProcessor, prop.regsPerBlock);

  int *ran;
  CUDA_CHECK(cudaMalloc(&ran, sizeof(int)));
  *ran = 0;
  /* 100 KiB: within the opt-in limit of sm_80 and sm_90 only */
  const bool big = w->optin_kib >= 100;
  cudaError_t e = cudaFuncSetAttribute(optin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       100 * 1024);
  const cudaError_t last = cudaGetLastError();
  check(big ? e == cudaSuccess : e == cudaErrorInvalidValue && last == cudaErrorInvalidValue,
        "%s: cudaFuncSetAttribute 100 KiB %s: %s", id, big ? "accepted" : "refused",
        cudaGetErrorName(e));
  TXL_LAUNCH(optin_kernel, 1, 32, 100 * 1024)(ran, 100 * 1024);
  e = cudaGetLastError();
  check(big ? e == cudaSuccess && *ran == 1 : e == cudaErrorInvalidValue && *ran == 0,
        "%s: a launch with 100 KiB %s: %s", id, big ? "runs" : "is refused", cudaGetErrorName(e));
  /* the opt-in limit itself is accepted and a launch of it runs; one byte more is refused */
  const size_t limit = (size_t)w->optin_kib * 1024;
  e = cudaFuncSetAttribute(optin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)limit);
  const int before = *ran;
  TXL_LAUNCH(optin_kernel, 1, 32, limit)(ran, limit);
  const cudaError_t launch = cudaGetLastError();
  check(e == cudaSuccess && launch == cudaSuccess && *ran == before + 1,
        "%s: opt-in to %d KiB: %s, a launch of it: %s", id, w->optin_kib, cudaGetErrorName(e),
        cudaGetErrorName(launch));
  e = cudaFuncSetAttribute(optin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int)limit + 1);
  const cudaError_t last2 = cudaGetLastError(), after = cudaGetLastError();
  check(e == cudaErrorInvalidValue && last2 == cudaErrorInvalidValue && after == cudaSuccess,
        "%s: cudaFuncSetAttribute over %d KiB: %s; cudaGetLastError %s then %s", id,
        w->optin_kib, cudaGetErrorName(e), cudaGetErrorName(last2), cudaGetErrorName(after));
  TXL_LAUNCH(optin_kernel, 1, 32, limit + 1)(ran, limit + 1);
  e = cudaGetLastError();
  check(e == cudaErrorInvalidValue && *ran == before + 1,
        "%s: a launch over the kernel's limit is refused: %s", id, cudaGetErrorName(e));
  CUDA_CHECK(cudaFree(ran));
}

/* The child of test_unknown_arch: this program again (--device) with an architecture the
 * emulator does not model. */
static void exec_unknown_arch(void) {
  setenv("TXL_EMU_ARCH", "sm_70", 1);
  execl("/proc/self/exe", "test_emu", "--device", (char *)NULL);
  _exit(127);
}

/* An unknown TXL_EMU_ARCH must end the program with one line naming the variable and the
 * accepted values. */
static void test_unknown_arch(void) {
  std::string err;
  const int status = run_child(exec_unknown_arch, &err);
  while (!err.empty() && err.back() == '\n') err.pop_back();
  const bool exit1 = WIFEXITED(status) && WEXITSTATUS(status) == 1;
  check(exit1 && err.find('\n') == std::string::npos &&
            err == "txl: error: cuda emulator: TXL_EMU_ARCH=sm_70: expected sm_75, sm_80, sm_86, "
                   "sm_89 or sm_90",
        "TXL_EMU_ARCH=sm_70: exit %d, \"%s\"", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        err.c_str());
}

/* ---- counts (README.md, "Counts") ---------------------------------------------------------- */

/* The launches and host synchronisations that fn adds. */
static void counted(void (*fn)(void *), void *ctx, long *launches, long *syncs) {
  long l0, s0, l1, s1;
  txl_emu_counts(&l0, &s0);
  fn(ctx);
  txl_emu_counts(&l1, &s1);
  *launches = l1 - l0;
  *syncs = s1 - s0;
}

struct CountBufs {
  float *dev, *dev2, *pinned, *pageable;
  cublasHandle_t h;
  int *ran;
};

static void test_counts(void) {
  CountBufs b;
  static float pageable[64];
  b.pageable = pageable;
  CUDA_CHECK(cudaMalloc(&b.dev, 64 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b.dev2, 64 * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&b.pinned, 64 * sizeof(float)));
  CUBLAS_CHECK(cublasCreate(&b.h));
  CUDA_CHECK(cudaMalloc(&b.ran, sizeof(int)));
  *b.ran = 0;
  struct Case {
    const char *what;
    void (*fn)(void *);
    long launches, syncs;
  };
  /* captureless lambdas: each one call (or a few) on the buffers of ctx */
  const Case cases[] = {
      {"cudaMemcpy host to device from pageable memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpy(x->dev, x->pageable, 256, cudaMemcpyHostToDevice)); }, 0, 1},
      {"cudaMemcpy host to device from page-locked memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpy(x->dev, x->pinned, 256, cudaMemcpyHostToDevice)); }, 0, 1},
      {"cudaMemcpy device to host",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpy(x->pinned, x->dev, 256, cudaMemcpyDeviceToHost)); }, 0, 1},
      {"cudaMemcpy device to device",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpy(x->dev2, x->dev, 256, cudaMemcpyDeviceToDevice)); }, 0, 0},
      {"cudaMemcpy host to host",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpy(x->pinned, x->pageable, 256, cudaMemcpyHostToHost)); }, 0, 1},
      {"cudaMemcpyAsync host to device from pageable memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->dev, x->pageable, 256, cudaMemcpyHostToDevice, 0)); }, 0, 1},
      {"cudaMemcpyAsync device to pageable memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->pageable, x->dev, 256, cudaMemcpyDeviceToHost, 0)); }, 0, 1},
      {"cudaMemcpyAsync host to device from page-locked memory (inside the allocation)",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->dev, x->pinned + 10, 16, cudaMemcpyHostToDevice, 0)); }, 0, 0},
      {"cudaMemcpyAsync device to page-locked memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->pinned, x->dev, 256, cudaMemcpyDeviceToHost, 0)); }, 0, 0},
      {"cudaMemcpyAsync device to device",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->dev2, x->dev, 256, cudaMemcpyDeviceToDevice, 0)); }, 0, 0},
      {"cudaMemcpyAsync cudaMemcpyDefault, page-locked to device",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->dev, x->pinned, 256, cudaMemcpyDefault, 0)); }, 0, 0},
      {"cudaMemcpyAsync cudaMemcpyDefault, pageable to device",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemcpyAsync(x->dev, x->pageable, 256, cudaMemcpyDefault, 0)); }, 0, 1},
      {"cudaMemset and cudaMemset2D of device memory, cudaMemsetAsync",
       [](void *c) {
         CountBufs *x = (CountBufs *)c;
         CUDA_CHECK(cudaMemset(x->dev, 0, 256));
         CUDA_CHECK(cudaMemset2D(x->dev, 64, 0, 32, 4));
         CUDA_CHECK(cudaMemsetAsync(x->pinned, 0, 256, 0));
       }, 0, 0},
      {"cudaMemset of page-locked memory",
       [](void *c) { CountBufs *x = (CountBufs *)c; CUDA_CHECK(cudaMemset(x->pinned, 0, 256)); }, 0, 1},
      {"cudaDeviceSynchronize, cudaStreamSynchronize",
       [](void *) {
         CUDA_CHECK(cudaDeviceSynchronize());
         CUDA_CHECK(cudaStreamSynchronize(0));
       }, 0, 2},
      {"cudaEventRecord, cudaEventQuery (no wait), cudaEventSynchronize",
       [](void *) {
         cudaEvent_t e;
         CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
         CUDA_CHECK(cudaEventRecord(e, 0));
         CUDA_CHECK(cudaEventQuery(e));
         CUDA_CHECK(cudaEventSynchronize(e));
         CUDA_CHECK(cudaEventDestroy(e));
       }, 0, 1},
      {"cudaMalloc, cudaFree, cudaFree(NULL), cudaMallocHost, cudaFreeHost",
       [](void *) {
         void *p, *q;
         CUDA_CHECK(cudaMalloc(&p, 16));
         CUDA_CHECK(cudaFree(p));
         CUDA_CHECK(cudaFree(nullptr));
         CUDA_CHECK(cudaMallocHost(&q, 16));
         CUDA_CHECK(cudaFreeHost(q));
       }, 0, 4},
      {"a kernel launch",
       [](void *c) { TXL_LAUNCH(flag_kernel, dim3(2), dim3(32), 0)(((CountBufs *)c)->ran); CUDA_LAUNCH_CHECK(); }, 1, 0},
      {"a refused launch (1025 threads)",
       [](void *c) {
         TXL_LAUNCH(flag_kernel, dim3(1), dim3(1025), 0)(((CountBufs *)c)->ran);
         (void)cudaGetLastError();
       }, 0, 0},
      {"cublasSgemm, cublasGemmEx, a batched GEMM of 3",
       [](void *c) {
         CountBufs *x = (CountBufs *)c;
         const float one = 1.0f, zero = 0.0f;
         CUBLAS_CHECK(cublasSgemm(x->h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, x->dev, 4, x->dev, 4, &zero, x->dev2, 4));
         CUBLAS_CHECK(cublasGemmEx(x->h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, x->dev, CUDA_R_32F, 4, x->dev,
                                   CUDA_R_32F, 4, &zero, x->dev2, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
         CUBLAS_CHECK(cublasGemmStridedBatchedEx(x->h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, x->dev, CUDA_R_32F, 2, 4,
                                                 x->dev, CUDA_R_32F, 2, 4, &zero, x->dev2, CUDA_R_32F, 2, 4, 3,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
       }, 3, 0},
      {"a GEMM cuBLAS refuses",
       [](void *c) {
         CountBufs *x = (CountBufs *)c;
         const float one = 1.0f, zero = 0.0f;
         (void)cublasGemmEx(x->h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, x->dev, CUDA_R_16BF, 4, x->dev, CUDA_R_32F, 4,
                            &zero, x->dev2, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
       }, 0, 0},
  };
  for (const Case &k : cases) {
    long l = -1, sy = -1;
    counted(k.fn, &b, &l, &sy);
    check(l == k.launches && sy == k.syncs, "counts of %s: %ld launches, %ld host synchronisations (expected %ld, %ld)",
          k.what, l, sy, k.launches, k.syncs);
  }
  CUBLAS_CHECK(cublasDestroy(b.h));
  CUDA_CHECK(cudaFree(b.ran));
  CUDA_CHECK(cudaFreeHost(b.pinned));
  CUDA_CHECK(cudaFree(b.dev2));
  CUDA_CHECK(cudaFree(b.dev));
}

/* ---- runtime and cuBLAS -------------------------------------------------------------------- */

static void test_runtime(void) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  check(count == 1, "one device: %d", count);
  cudaError_t e = cudaSetDevice(1);
  check(e == cudaErrorInvalidDevice && cudaGetLastError() == cudaErrorInvalidDevice &&
            cudaPeekAtLastError() == cudaSuccess,
        "cudaSetDevice(1): %s, reported once by cudaGetLastError", cudaGetErrorName(e));

  float *a, *b;
  CUDA_CHECK(cudaMalloc(&a, 1000 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b, 1000 * sizeof(float)));
  float h[1000];
  for (int i = 0; i < 1000; i++) h[i] = (float)i;
  CUDA_CHECK(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpyAsync(b, a, sizeof h, cudaMemcpyDeviceToDevice, 0));
  CUDA_CHECK(cudaMemsetAsync(b + 10, 0, 5 * sizeof(float), 0));
  CUDA_CHECK(cudaDeviceSynchronize());
  float g[1000];
  CUDA_CHECK(cudaMemcpy(g, b, sizeof g, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < 1000; i++) bad += g[i] != (i >= 10 && i < 15 ? 0.0f : (float)i);
  check(bad == 0 && ((uintptr_t)a & 255) == 0,
        "cudaMalloc (256-byte aligned), cudaMemcpy(+Async), cudaMemset(+Async): %d wrong", bad);
  /* cudaMemset2D: 3 rows of 5 floats, 7 apart, from b + 20: the gaps and the rest untouched */
  CUDA_CHECK(cudaMemcpy(b, a, sizeof h, cudaMemcpyDeviceToDevice));
  CUDA_CHECK(cudaMemset2D(b + 20, 7 * sizeof(float), 0, 5 * sizeof(float), 3));
  CUDA_CHECK(cudaMemcpy(g, b, sizeof g, cudaMemcpyDeviceToHost));
  bad = 0;
  for (int i = 0; i < 1000; i++) bad += g[i] != (i >= 20 && i < 41 && (i - 20) % 7 < 5 ? 0.0f : (float)i);
  e = cudaMemset2D(b, 4, 0, 8, 2); /* rows wider than their pitch */
  check(bad == 0 && e == cudaErrorInvalidValue && cudaGetLastError() == e &&
            cudaMemset2D(nullptr, 4, 0, 8, 0) == cudaSuccess && cudaMemset2D(b, 0, 0, 8, 1) == cudaSuccess,
        "cudaMemset2D (rows pitch apart, gaps untouched; pitch < width: %s): %d wrong", cudaGetErrorName(e), bad);
  e = cudaMemcpy(g, b, 4, (cudaMemcpyKind)7);
  check(e == cudaErrorInvalidMemcpyDirection && cudaGetLastError() == e,
        "cudaMemcpy with a bad kind: %s", cudaGetErrorName(e));

  cudaStream_t s;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  CUDA_CHECK(cudaEventRecord(e0, s));
  CUDA_CHECK(cudaEventRecord(e1, s));
  CUDA_CHECK(cudaStreamWaitEvent(s, e1, 0));
  CUDA_CHECK(cudaEventSynchronize(e1));
  CUDA_CHECK(cudaStreamSynchronize(s));
  float ms = -1.0f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  check(ms >= 0.0f && ms < 1000.0f, "events: elapsed %.6f ms", (double)ms);
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  CUDA_CHECK(cudaStreamDestroy(s));
  size_t fr = 0, tot = 0;
  CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
  check(tot > 0 && fr <= tot, "cudaMemGetInfo: %zu of %zu MiB free", fr >> 20, tot >> 20);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
}

/* x rounded to TF32 as the emulator documents: to nearest, ties away (13 bits dropped). */
static float round_tf32_ref(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

/* Column-major C = alpha op(A) op(B) + beta C against a double loop over the operands as the
 * mode rounds them. Modes: 0 cublasSgemm fp32, 1 cublasSgemm under
 * CUBLAS_TF32_TENSOR_OP_MATH, 2 cublasGemmEx CUBLAS_COMPUTE_32F, 3 ..._FAST_TF32.
 * Tolerance. fp32 modes: the inputs are multiples of 1/4 below 1 in magnitude, so every
 * product, partial sum, alpha times it and beta C is exact in float: error 0. TF32 modes: the
 * inputs 1/(3 + i % 5) and 1/(7 + i % 3) are not representable, so the rounding shows (each
 * operand moves by up to 2^-11 relative: a wrong or missing rounding is off by ~1e-4 or more);
 * the products of two 11-bit mantissas are exact in float, and the 7-term sum, alpha and beta C
 * add k + 2 roundings of at most 2^-24 * 2 (the result is below 2): (k + 2) 2^-23 < 1.1e-6. */
static void test_cublas(void) {
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  CUBLAS_CHECK(cublasSetStream(h, 0));
  const int m = 5, n = 3, k = 7, ld = 9;
  static const char *const mode_name[] = {"Sgemm", "Sgemm TF32 math", "GemmEx 32F",
                                          "GemmEx 32F_FAST_TF32"};
  float A[ld * ld], B[ld * ld], C[ld * ld], C0[ld * ld];
  for (int mode = 0; mode < 4; mode++)
    for (int ta = 0; ta < 2; ta++)
      for (int tb = 0; tb < 2; tb++) {
        const bool rounded = mode == 1 || mode == 3;
        CUBLAS_CHECK(cublasSetMathMode(h, mode == 1 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
        for (int i = 0; i < ld * ld; i++) {
          A[i] = rounded ? 1.0f / (float)(3 + i % 5) : (float)(i % 7 - 3) / 4.0f;
          B[i] = rounded ? 1.0f / (float)(7 + i % 3) : (float)(i % 5 - 2) / 4.0f;
          C0[i] = C[i] = (float)(i % 3);
        }
        const float alpha = 2.0f, beta = 0.5f;
        const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (mode < 2) {
          CUBLAS_CHECK(cublasSgemm(h, oa, ob, m, n, k, &alpha, A, ld, B, ld, &beta, C, ld));
        } else {
          const cublasComputeType_t ct = mode == 2 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
          CUBLAS_CHECK(cublasGemmEx(h, oa, ob, m, n, k, &alpha, A, CUDA_R_32F, ld, B, CUDA_R_32F, ld,
                                    &beta, C, CUDA_R_32F, ld, ct, CUBLAS_GEMM_DEFAULT));
        }
        double err = 0.0;
        for (int j = 0; j < n; j++)
          for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int p = 0; p < k; p++) {
              float a = ta ? A[p + i * ld] : A[i + p * ld];
              float b = tb ? B[j + p * ld] : B[p + j * ld];
              if (rounded) {
                a = round_tf32_ref(a);
                b = round_tf32_ref(b);
              }
              s += (double)a * b;
            }
            const double want = alpha * s + beta * C0[i + j * ld];
            err = fmax(err, fabs(C[i + j * ld] - want));
          }
        const double tol = rounded ? 1.1e-6 : 0.0;
        check(err <= tol, "cublas %s %c%c m=%d n=%d k=%d: max error %.3g (bound %.2g)",
              mode_name[mode], ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, err, tol);
      }
  const float one = 1.0f;
  cublasStatus_t st =
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, m - 1, B, ld, &one, C, ld);
  check(st == CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm with lda < m: %s",
        cublasGetStatusName(st));
  st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, CUDA_R_32F, ld, B,
                    (cudaDataType)2 /* CUDA_R_16F */, ld, &one, C, CUDA_R_32F, ld,
                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx with a half operand: %s",
        cublasGetStatusName(st));
  CUBLAS_CHECK(cublasDestroy(h));
}

/* cublasGemmEx on bf16 operands (Atype = Btype = CUDA_R_16BF, CUBLAS_COMPUTE_32F), C bf16 or
 * fp32, against a double loop. The inputs are j / 128 with |j| <= 127 (at most 7 significant
 * bits: exact in bf16), C0 multiples of 1/8 below 1 (exact), alpha = 2, beta = 0.5 or 0 (C0 then
 * NaN: it must not be read). Every product is a multiple of 2^-14 below 1 and every partial sum
 * and the result multiples of 2^-14 below 2^4 (18 bits), so the fp32 sums are exact in any
 * order: an fp32 C must be the exact value (error 0) and a bf16 C the exact value rounded to
 * nearest even once (bits), which most of the results are not already (a truncating or a missing
 * rounding shows). Then the combinations cuBLAS does not support must be refused. */
static void test_cublas_bf16(void) {
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const int m = 6, n = 5, k = 7, ld = 9;
  txl_bf16 A[ld * ld], B[ld * ld], Cb[ld * ld];
  float Cf[ld * ld], C0[ld * ld];
  for (int i = 0; i < ld * ld; i++) {
    A[i] = txl_bf16_from_float((float)((i * 37) % 255 - 127) / 128.0f);
    B[i] = txl_bf16_from_float((float)((i * 53) % 255 - 127) / 128.0f);
    C0[i] = (float)(i % 15 - 7) / 8.0f;
  }
  for (int cbf = 0; cbf < 2; cbf++)
    for (int bz = 0; bz < 2; bz++)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          const float alpha = 2.0f, beta = bz ? 0.0f : 0.5f;
          for (int i = 0; i < ld * ld; i++) {
            Cf[i] = bz ? NAN : C0[i];
            Cb[i] = txl_bf16_from_float(Cf[i]);
          }
          const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
          CUBLAS_CHECK(cublasGemmEx(h, oa, ob, m, n, k, &alpha, A, CUDA_R_16BF, ld, B, CUDA_R_16BF, ld,
                                    &beta, cbf ? (void *)Cb : (void *)Cf, cbf ? CUDA_R_16BF : CUDA_R_32F,
                                    ld, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          int bad = 0, rounded = 0;
          for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
              double s = 0.0;
              for (int p = 0; p < k; p++)
                s += (double)txl_bf16_to_float(ta ? A[p + i * ld] : A[i + p * ld]) *
                     txl_bf16_to_float(tb ? B[j + p * ld] : B[p + j * ld]);
              const double want = alpha * s + (bz ? 0.0 : beta * C0[i + j * ld]);
              const float exact = (float)want; /* exact: see above */
              if (cbf) {
                const txl_bf16 w = txl_bf16_from_float(exact);
                bad += Cb[i + j * ld] != w;
                rounded += txl_bf16_to_float(w) != exact;
              } else {
                bad += !(Cf[i + j * ld] == want);
              }
            }
          /* a bf16 C whose every exact value was representable would not test the rounding */
          const bool meaningful = !cbf || rounded > m * n / 2;
          check(bad == 0 && meaningful,
                "cublasGemmEx bf16 x bf16 -> %s, beta %g, %c%c: %d wrong of %d%s", cbf ? "bf16" : "fp32",
                (double)beta, ta ? 'T' : 'N', tb ? 'T' : 'N', bad, m * n,
                cbf ? (meaningful ? " (most rounded)" : " (too few rounded)") : " (exact)");
        }
  const float one = 1.0f;
  struct {
    cudaDataType a, b, c;
    cublasComputeType_t ct;
    const char *what;
  } unsupported[] = {
      {CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "A bf16, B fp32"},
      {CUDA_R_32F, CUDA_R_32F, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "A, B fp32, C bf16"},
      {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F_FAST_TF32, "bf16 with COMPUTE_32F_FAST_TF32"},
  };
  for (const auto &u : unsupported) {
    const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, u.a, ld, B, u.b, ld,
                                           &one, Cb, u.c, ld, u.ct, CUBLAS_GEMM_DEFAULT);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx with %s: %s", u.what, cublasGetStatusName(st));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

/* The fp16 conversions of kernels/common/fp16.h (the emulator's CUDA_R_16F storage) against an
 * independent reference in double: a finite f rounds to q 2^(e-10), e = max(floor(log2|f|), -14),
 * q = f / 2^(e-10) rounded to nearest even by nearbyint (exact in double); a result of 2^16 or
 * more is infinity (as is an infinity); a NaN is 0x7fff. Over every 1,009th fp32 bit pattern (all exponents, both
 * signs) and the boundary cases; then every fp16 widens and rounds back to itself (NaNs to
 * 0x7fff), the widening exact (compared with q 2^(e-10) of its fields). */
static uint16_t fp16_reference(float f) {
  if (isnan(f)) return 0x7fffu;
  const uint16_t sign = signbit(f) ? 0x8000u : 0u;
  const double a = fabs((double)f);
  if (a == 0.0) return sign;
  if (isinf(a)) return (uint16_t)(sign | 0x7c00u);
  int e = ilogb(a);
  if (e < -14) e = -14;
  const double q = nearbyint(a / ldexp(1.0, e - 10)), r = q * ldexp(1.0, e - 10);
  if (r >= 65536.0) return (uint16_t)(sign | 0x7c00u);
  if (r < 0x1p-14) return (uint16_t)(sign | (uint16_t)q); /* subnormal (or zero) */
  const int re = ilogb(r);
  return (uint16_t)(sign | (uint16_t)((re + 15) << 10) | (uint16_t)(r / ldexp(1.0, re - 10) - 1024.0));
}

static void test_fp16_conversion(void) {
  long wrong = 0, tried = 0;
  const float edge[] = {65504.0f, 65519.996f, 65520.0f, 65536.0f, 0x1p-14f, 0x1.ffcp-15f, 0x1p-24f, 0x1p-25f,
                        0x1.000002p-25f, 0x1.8p-24f, 0x1.4p-24f, 1.0f + 0x1p-11f, 1.0f + 0x1.8p-11f, INFINITY, 0.0f};
  for (float f : edge)
    for (int sg = 0; sg < 2; sg++) {
      const float x = sg ? -f : f;
      wrong += txl_fp16_from_float(x).bits != fp16_reference(x);
      tried++;
    }
  for (uint64_t u = 0; u < (1ull << 32); u += 1009) {
    const uint32_t b = (uint32_t)u;
    float f;
    memcpy(&f, &b, 4);
    wrong += txl_fp16_from_float(f).bits != fp16_reference(f);
    tried++;
  }
  check(wrong == 0, "fp16 rounding of %ld fp32 values (every 1,009th pattern and the edges): %ld wrong", tried,
        wrong);
  int back = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    const txl_fp16 x = txl_fp16_from_bits((uint16_t)h);
    const float f = txl_fp16_to_float(x);
    const uint32_t e = (h >> 10) & 31u, m = h & 1023u;
    const bool nan = e == 31 && m != 0;
    const double mag = e == 31 ? INFINITY : e == 0 ? m * 0x1p-24 : ldexp(1024.0 + m, (int)e - 25);
    const double want = h & 0x8000u ? -mag : mag;
    back += nan ? !(isnan(f) && txl_fp16_from_float(f).bits == 0x7fffu)
                : !((double)f == want && txl_fp16_from_float(f).bits == h);
  }
  check(back == 0, "fp16 widening of all 65,536 patterns exact and rounding back to the same bits: %d wrong", back);
}

/* cublasGemmEx on fp16 operands (Atype = Btype = CUDA_R_16F, CUBLAS_COMPUTE_32F), C fp16 or
 * fp32, against a double loop, as test_cublas_bf16: the inputs are j / 128 with |j| <= 127
 * (exact in fp16's 11 bits), C0 multiples of 1/8 below 1, so every fp32 sum is exact (multiples
 * of 2^-14 below 2^4) and so is alpha (a power of 2) times it, plus beta C0 (beta 0.5, only with
 * alpha 2: multiples of 2^-14 below 2^5). An fp32 C must be the exact value and an fp16 C its
 * fp16 rounding (bits). alpha = 2^16 takes results past 65504 (they must become infinities) and
 * alpha = 2^-20 takes them below 2^-14 (subnormals of spacing 2^-24, most of which round). */
static void test_cublas_fp16(void) {
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const int m = 6, n = 5, k = 7, ld = 9;
  txl_fp16 A[ld * ld], B[ld * ld], Ch[ld * ld];
  float Cf[ld * ld], C0[ld * ld];
  for (int i = 0; i < ld * ld; i++) {
    A[i] = txl_fp16_from_float((float)((i * 37) % 255 - 127) / 128.0f);
    B[i] = txl_fp16_from_float((float)((i * 53) % 255 - 127) / 128.0f);
    C0[i] = (float)(i % 15 - 7) / 8.0f;
  }
  const struct {
    float alpha, beta;
  } cases[] = {{2.0f, 0.5f}, {2.0f, 0.0f}, {0x1p16f, 0.0f}, {0x1p-20f, 0.0f}};
  for (int chf = 0; chf < 2; chf++)
    for (const auto &c : cases)
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
          for (int i = 0; i < ld * ld; i++) {
            Cf[i] = c.beta == 0.0f ? NAN : C0[i];
            Ch[i] = txl_fp16_from_float(Cf[i]);
          }
          const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
          CUBLAS_CHECK(cublasGemmEx(h, oa, ob, m, n, k, &c.alpha, A, CUDA_R_16F, ld, B, CUDA_R_16F, ld, &c.beta,
                                    chf ? (void *)Ch : (void *)Cf, chf ? CUDA_R_16F : CUDA_R_32F, ld,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          int bad = 0, rounded = 0, inf = 0, sub = 0;
          for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
              double s = 0.0;
              for (int p = 0; p < k; p++)
                s += (double)txl_fp16_to_float(ta ? A[p + i * ld] : A[i + p * ld]) *
                     txl_fp16_to_float(tb ? B[j + p * ld] : B[p + j * ld]);
              const double want = c.alpha * s + (c.beta == 0.0f ? 0.0 : c.beta * C0[i + j * ld]);
              const float exact = (float)want; /* exact: see above */
              if (chf) {
                const txl_fp16 w = txl_fp16_from_float(exact);
                bad += Ch[i + j * ld].bits != w.bits;
                rounded += txl_fp16_to_float(w) != exact;
                inf += (w.bits & 0x7fffu) == 0x7c00u;
                sub += (w.bits & 0x7c00u) == 0 && (w.bits & 0x3ffu) != 0;
              } else {
                bad += !(Cf[i + j * ld] == want);
              }
            }
          /* an fp16 C must have been rounded, overflowed (alpha 2^16), gone subnormal (2^-20) */
          const bool meaningful = !chf || (rounded > m * n / 2 && (c.alpha != 0x1p16f || inf > 0) &&
                                           (c.alpha != 0x1p-20f || sub > m * n / 2));
          check(bad == 0 && meaningful,
                "cublasGemmEx fp16 x fp16 -> %s, alpha %g, beta %g, %c%c: %d wrong of %d (%d rounded, %d inf, %d "
                "subnormal)%s",
                chf ? "fp16" : "fp32", (double)c.alpha, (double)c.beta, ta ? 'T' : 'N', tb ? 'T' : 'N', bad, m * n,
                rounded, inf, sub, meaningful ? "" : " (not meaningful)");
        }
  const float one = 1.0f;
  struct {
    cudaDataType a, b, c;
    cublasComputeType_t ct;
    const char *what;
  } unsupported[] = {
      {CUDA_R_16F, CUDA_R_16BF, CUDA_R_16F, CUBLAS_COMPUTE_32F, "A fp16, B bf16"},
      {CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "A, B fp16, C bf16"},
      {CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16F, CUBLAS_COMPUTE_32F, "A, B bf16, C fp16"},
      {CUDA_R_16F, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F_FAST_TF32, "fp16 with COMPUTE_32F_FAST_TF32"},
  };
  for (const auto &u : unsupported) {
    const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, u.a, ld, B, u.b, ld,
                                           &one, Ch, u.c, ld, u.ct, CUBLAS_GEMM_DEFAULT);
    check(st == CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx with %s: %s", u.what, cublasGetStatusName(st));
  }
  CUBLAS_CHECK(cublasDestroy(h));
}

/* ---- barriers that can never complete (each in a child process) ----------------------------- */

static __global__ void early_return_sync_kernel(int *x) {
  if (threadIdx.x < 16) return; /* 16 threads leave, the others wait forever */
  __syncthreads();
  x[threadIdx.x] = 1;
}

static __global__ void late_return_sync_kernel(int *x) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  x[threadIdx.x] = 1;
}

static __global__ void lane_return_shfl_kernel(int *x) {
  if (threadIdx.x == 31) return;
  x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

/* lane 31 waits in a shuffle for lanes that wait at __syncthreads for it */
static __global__ void split_block_kernel(int *x) {
  if (threadIdx.x == 31)
    x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
  else
    __syncthreads();
}

static __global__ void divergent_shfl_kernel(int *x) {
  const int v = (int)threadIdx.x;
  x[threadIdx.x] = threadIdx.x < 16 ? __shfl_xor_sync(0xffffffffu, v, 1)
                                    : __shfl_down_sync(0xffffffffu, v, 1);
}

static __global__ void half_mask_kernel(int *x) {
  x[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, (int)threadIdx.x, 1);
}

static __global__ void partial_warp_kernel(int *x) {
  x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

static int *g_scratch;

static void run_early(void) { TXL_LAUNCH(early_return_sync_kernel, 1, 64, 0)(g_scratch); }
static void run_late(void) { TXL_LAUNCH(late_return_sync_kernel, 1, 64, 0)(g_scratch); }
static void run_lane(void) { TXL_LAUNCH(lane_return_shfl_kernel, 1, 32, 0)(g_scratch); }
static void run_split(void) { TXL_LAUNCH(split_block_kernel, 1, 64, 0)(g_scratch); }
static void run_divergent(void) { TXL_LAUNCH(divergent_shfl_kernel, 1, 32, 0)(g_scratch); }
static void run_mask(void) { TXL_LAUNCH(half_mask_kernel, 1, 32, 0)(g_scratch); }
static void run_partial(void) { TXL_LAUNCH(partial_warp_kernel, 1, 48, 0)(g_scratch); }
static void run_host_sync(void) { __syncthreads(); }

#if defined(__SANITIZE_ADDRESS__)
/* Under AddressSanitizer the kernels run instrumented on the fiber stacks: out-of-bounds
 * accesses in global memory, in the dynamic shared memory and in a thread's own stack frame are
 * reported. (The child ends by ASan's report: abort or exit, never a normal 0.) */
static __global__ void global_oob_kernel(int *x) { x[threadIdx.x + 64] = 1; }
static __global__ void shared_oob_kernel(int *x) {
  TXL_DYNAMIC_SHARED(int, sm);
  x[threadIdx.x] = sm[threadIdx.x + 32];
}
static __global__ void stack_oob_kernel(int *x) {
  int local[8];
  for (int k = 0; k < 8; k++) local[k] = k;
  volatile int at = 8 + (int)threadIdx.x; /* hidden from the compiler's own checks */
  int *volatile hidden = local;            /* and from UBSan's bounds and object-size checks */
  const int *p = hidden;
  x[threadIdx.x] = p[at];
}
static void run_global_oob(void) { TXL_LAUNCH(global_oob_kernel, 1, 32, 0)(g_scratch); }
static void run_shared_oob(void) { TXL_LAUNCH(shared_oob_kernel, 1, 32, 32 * sizeof(int))(g_scratch); }
static void run_stack_oob(void) { TXL_LAUNCH(stack_oob_kernel, 1, 32, 0)(g_scratch); }

static void expect_asan(const char *what, void (*fn)(void), const char *kind) {
  std::string err;
  const int status = run_child(fn, &err);
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool found = err.find(kind) != std::string::npos;
  check(!clean && found, "AddressSanitizer in a kernel: %s: %s", what, found ? kind : "not reported");
  if (!found) fprintf(stderr, "  the child's stderr: %s\n", err.empty() ? "(empty)" : err.substr(0, 400).c_str());
}
#endif

static void test_fatal(void) {
  CUDA_CHECK(cudaMalloc(&g_scratch, 64 * sizeof(int)));
  expect_fatal("threads return before a __syncthreads the others reach", run_early,
               "early_return_sync_kernel", "__syncthreads");
  /* (which of the two messages depends on the thread order: returned first or waited first) */
  expect_fatal("threads return while others wait at __syncthreads", run_late,
               "late_return_sync_kernel", "__syncthreads");
  expect_fatal("a lane returns while its warp waits in a shuffle", run_lane,
               "lane_return_shfl_kernel", "__shfl_xor_sync");
  expect_fatal("one lane in a shuffle, the rest of the block at __syncthreads", run_split,
               "split_block_kernel", "deadlock");
  expect_fatal("lanes of a warp in different shuffles", run_divergent, "divergent_shfl_kernel",
               "divergent warp operations");
  expect_fatal("a shuffle with a partial mask", run_mask, "half_mask_kernel", "mask 0x0000ffff");
  expect_fatal("a shuffle in a partial warp (48 threads)", run_partial, "partial_warp_kernel",
               "partial warp");
  expect_fatal("__syncthreads on the host", run_host_sync, "__syncthreads", "outside a kernel");
#if defined(__SANITIZE_ADDRESS__)
  expect_asan("a write past a cudaMalloc buffer", run_global_oob, "heap-buffer-overflow");
  expect_asan("a read past the dynamic shared memory", run_shared_oob, "heap-buffer-overflow");
  expect_asan("a read past a local array on a fiber stack", run_stack_oob, "stack-buffer-overflow");
#endif
  CUDA_CHECK(cudaFree(g_scratch));
}

/* cublasGemmStridedBatchedEx against a double loop per batch: 3 batches of column-major
 * C_b = alpha op(A_b) op(B_b) + beta C_b at strides wider than a matrix (the gaps must stay
 * untouched), bf16 (fp16) operands with a bf16 (fp16) or fp32 C, and fp32 operands. Exactness as in
 * test_cublas / test_cublas_bf16: the inputs are multiples of 1/128 (bf16) or 1/4 (fp32) below 1,
 * so every product and partial sum of k = 7 terms is exact in float; a bf16 / fp16 C is rounded
 * once when stored, so it is compared with the bf16 / fp16 rounding of the exact value. A negative
 * batchCount is refused. */
static void test_cublas_batched(void) {
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const int m = 4, n = 3, k = 7, ld = 8, batch = 3;
  const long long sa = ld * k + 5, sb = ld * n + 3, sc = ld * n + 7; /* A: m x k (N), B: k x n (N) */
  const int na = (int)(sa * batch), nb = (int)(sb * batch), nc = (int)(sc * batch);
  std::vector<float> Af(na), Bf(nb), C0(nc), Cf(nc);
  std::vector<txl_bf16> Ab(na), Bb(nb), Cb(nc);
  for (int i = 0; i < na; i++) Af[i] = (float)((i * 37) % 255 - 127) / 128.0f;
  for (int i = 0; i < nb; i++) Bf[i] = (float)((i * 53) % 255 - 127) / 128.0f;
  for (int i = 0; i < nc; i++) C0[i] = (float)(i % 15 - 7) / 8.0f;
  for (int i = 0; i < na; i++) Ab[i] = txl_bf16_from_float(Af[i]);
  for (int i = 0; i < nb; i++) Bb[i] = txl_bf16_from_float(Bf[i]);
  std::vector<txl_fp16> Ah(na), Bh(nb), Ch(nc);
  for (int i = 0; i < na; i++) Ah[i] = txl_fp16_from_float(Af[i]);
  for (int i = 0; i < nb; i++) Bh[i] = txl_fp16_from_float(Bf[i]);
  const float alpha = 2.0f, beta = 0.5f;
  /* 0: bf16 -> bf16 C, 1: bf16 -> fp32 C, 2: fp32, 3: fp16 -> fp16 C, 4: fp16 -> fp32 C */
  for (int mode = 0; mode < 5; mode++) {
    Cf = C0;
    for (int i = 0; i < nc; i++) Cb[i] = txl_bf16_from_float(C0[i]);
    for (int i = 0; i < nc; i++) Ch[i] = txl_fp16_from_float(C0[i]);
    const bool bf = mode < 2, hf = mode >= 3, cbf = mode == 0, chf = mode == 3;
    const cudaDataType ab = bf ? CUDA_R_16BF : hf ? CUDA_R_16F : CUDA_R_32F;
    const void *A = bf ? (const void *)Ab.data() : hf ? (const void *)Ah.data() : (const void *)Af.data();
    const void *B = bf ? (const void *)Bb.data() : hf ? (const void *)Bh.data() : (const void *)Bf.data();
    void *C = cbf ? (void *)Cb.data() : chf ? (void *)Ch.data() : (void *)Cf.data();
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, A, ab, ld, sa, B, ab, ld, sb,
                                            &beta, C, cbf ? CUDA_R_16BF : chf ? CUDA_R_16F : CUDA_R_32F, ld, sc,
                                            batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const auto got_at = [&](long long at) {
      return cbf ? txl_bf16_to_float(Cb[at]) : chf ? txl_fp16_to_float(Ch[at]) : Cf[at];
    };
    int wrong = 0;
    for (int b = 0; b < batch; b++)
      for (int j = 0; j < n; j++)
        for (int i = 0; i < ld; i++) {
          const long long at = b * sc + (long long)j * ld + i;
          const float got = got_at(at);
          float want = C0[at]; /* rows i >= m are outside C: untouched */
          if (i < m) {
            double sum = 0.0;
            for (int p = 0; p < k; p++)
              sum += (double)Af[b * sa + (long long)p * ld + i] * Bf[b * sb + (long long)j * ld + p];
            want = (float)(alpha * sum + beta * C0[at]);
          }
          if (cbf) want = txl_bf16_round(want);
          if (chf) want = txl_fp16_round(want);
          wrong += got != want;
        }
    for (int b = 0; b + 1 < batch; b++) /* the gaps between the batches' C */
      for (long long at = b * sc + (long long)ld * n; at < (b + 1) * sc; at++)
        wrong += got_at(at) != C0[at];
    check(wrong == 0, "cublasGemmStridedBatchedEx %s operands, %s C, %d batches: %d elements wrong",
          bf ? "bf16" : hf ? "fp16" : "fp32", cbf ? "bf16" : chf ? "fp16" : "fp32", batch, wrong);
  }
  const cublasStatus_t st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, Af.data(),
                                                       CUDA_R_32F, ld, sa, Bf.data(), CUDA_R_32F, ld, sb, &beta,
                                                       Cf.data(), CUDA_R_32F, ld, sc, -1, CUBLAS_COMPUTE_32F,
                                                       CUBLAS_GEMM_DEFAULT);
  check(st == CUBLAS_STATUS_INVALID_VALUE, "cublasGemmStridedBatchedEx with batchCount -1: %s",
        cublasGetStatusName(st));
  CUBLAS_CHECK(cublasDestroy(h));
}

/* ---- cuBLASLt -------------------------------------------------------------------------------- */

/* One cublasLtMatmul as txl's wrapper makes it: descriptors, cublasLtMatmulAlgoGetHeuristic,
 * then cublasLtMatmul with C == D (run with no algorithm when the heuristic found none, so that
 * both answers are seen), then the descriptors destroyed. */
struct LtCall {
  cublasComputeType_t compute;
  cudaDataType ab, d;         /* types of A and B, of C and D */
  int32_t bias_type;          /* CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1: not set */
  cublasOperation_t ta, tb;
  uint32_t epilogue;
  int m, n, k, lda, ldb, ldd;
  const void *A, *B;
  void *D;
  void *bias;
  float alpha, beta;
};
struct LtStatus {
  cublasStatus_t heuristic, matmul;
  int returned;
};

static LtStatus lt_run(cublasLtHandle_t h, const LtCall &c, const void *C = NULL) {
  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, c.compute, CUDA_R_32F));
  const int32_t ta = c.ta, tb = c.tb;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epilogue, sizeof c.epilogue));
  if (c.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof c.bias));
    if (c.bias_type != -1)
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &c.bias_type,
                                                  sizeof c.bias_type));
  }
  cublasLtMatrixLayout_t la, lb, lc, ld;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, c.ab, c.ta == CUBLAS_OP_N ? c.m : c.k, c.ta == CUBLAS_OP_N ? c.k : c.m,
                                          c.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, c.ab, c.tb == CUBLAS_OP_N ? c.k : c.n, c.tb == CUBLAS_OP_N ? c.n : c.k,
                                          c.ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, c.d, c.m, c.n, c.ldd));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, c.d, c.m, c.n, c.ldd));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = 1 << 20;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result;
  LtStatus s;
  s.returned = -1;
  s.heuristic = cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, ld, pref, 1, &result, &s.returned);
  const bool found = s.heuristic == CUBLAS_STATUS_SUCCESS && s.returned == 1 &&
                     result.state == CUBLAS_STATUS_SUCCESS && result.workspaceSize <= ws;
  s.matmul = cublasLtMatmul(h, desc, &c.alpha, c.A, la, c.B, lb, &c.beta, C ? C : c.D, lc, c.D, ld,
                            found ? &result.algo : NULL, NULL, 0, 0);
  CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
  return s;
}

/* Uniform in [-1, 1) with 24 random bits: neither TF32 nor bf16 represents most of them. */
static float lt_random(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)(*state >> 40) / 8388608.0f - 1.0f;
}

/* gamma_r = r u / (1 - r u), u = 2^-24: the bound on the relative error of r fp32 roundings in
 * sequence (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). */
static double lt_gamma(int r) { return r * 0x1p-24 / (1.0 - r * 0x1p-24); }

/* cublasLtMatmul with each epilogue (DEFAULT, BIAS, RELU_BIAS, BGRADA, BGRADB) on fp32, TF32,
 * bf16 and fp16 operands (a bf16 / fp16 D too), N/T both ways, odd sizes (m 13, n 7, k 29) and leading
 * dimensions larger than the rows, beta 0 (D NaN before: it must not be read) and 1, alpha 1.5,
 * against a double loop over the operands as the GEMM sees them (TF32-rounded, bf16 / fp16
 * widened).
 * Tolerances:
 *   D: the fp32 dot product of k terms (any order, FMA or not) is within gamma_k of
 *   sum |a b|, and alpha times it, beta C, their sum and the bias add 4 more roundings: within
 *   gamma_(k+4) (|alpha| sum |a b| + |beta C| + |bias|) of the exact value (about 2e-6 relative
 *   here). A bf16 D is then rounded to nearest once more: 2^-8 of the value; an fp16 D 2^-11 of
 *   it plus 2^-25 absolute (a subnormal result). The TF32 rounding
 *   of the operands is in the reference, so a missing one is off by ~2^-11 sum |a b|, far
 *   outside the bound; likewise a missing or wrong bias, ReLU or transpose is off by O(1).
 *   ReLU is 1-Lipschitz, so the bound of the value before it holds after it.
 *   Bias gradient: the fp32 sum of k stored values (not TF32-rounded; not scaled by alpha) is
 *   within gamma_k of sum |x| (a TF32-rounded sum would be off by ~2^-12 sum |x|), plus 2^-8 of
 *   the value for a bf16 D (2^-11 + 2^-25 for fp16). It is written over NaNs (so an accumulating one fails), and the
 *   elements past its length (m for BGRADA, n for BGRADB) must stay untouched.
 * Every comparison fails on NaN (!(err <= bound)); the elements of D outside its m x n block
 * (rows m .. ldd - 1) must keep their bits. The DEFAULT, BGRADA and BGRADB results of D must
 * be the bits of cublasGemmEx on the same inputs (the same GEMM path). */
static void test_cublaslt(void) {
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  cublasHandle_t blas;
  CUBLAS_CHECK(cublasCreate(&blas));
  const int m = 13, n = 7, k = 29, ldd = m + 4, ldmax = 33, vec = 40;
  static const uint32_t epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS,
                                       CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB};
  static const char *const epilogue_name[] = {"DEFAULT", "BIAS", "RELU_BIAS", "BGRADA", "BGRADB"};
  static const char *const mode_name[] = {"fp32",           "TF32",           "bf16 -> fp32 D",
                                         "bf16 -> bf16 D", "fp16 -> fp32 D", "fp16 -> fp16 D"};
  uint64_t rng = 12345;
  std::vector<float> Af(ldmax * ldmax), Bf(ldmax * ldmax), C0(ldd * n), bias0(vec);
  for (float &x : Af) x = lt_random(&rng);
  for (float &x : Bf) x = lt_random(&rng);
  for (float &x : C0) x = lt_random(&rng);
  for (float &x : bias0) x = lt_random(&rng);
  std::vector<txl_bf16> Ab(Af.size()), Bb(Bf.size());
  for (size_t i = 0; i < Af.size(); i++) Ab[i] = txl_bf16_from_float(Af[i]);
  for (size_t i = 0; i < Bf.size(); i++) Bb[i] = txl_bf16_from_float(Bf[i]);
  std::vector<txl_fp16> Ah(Af.size()), Bh(Bf.size());
  for (size_t i = 0; i < Af.size(); i++) Ah[i] = txl_fp16_from_float(Af[i]);
  for (size_t i = 0; i < Bf.size(); i++) Bh[i] = txl_fp16_from_float(Bf[i]);
  const float sentinel = 1234.5f;
  for (int mode = 0; mode < 6; mode++) {
    /* half: the operands' 16-bit type (0 none, 1 bf16, 2 fp16); dhalf: D is of that type */
    const int half = mode < 2 ? 0 : mode < 4 ? 1 : 2;
    const bool tf32 = mode == 1, dhalf = mode == 3 || mode == 5;
    const cudaDataType htype = half == 2 ? CUDA_R_16F : CUDA_R_16BF;
    const size_t dsize = dhalf ? 2 : 4;
    /* a value as D's type stores it, and back */
    const auto st_d = [&](void *p, size_t i, float v) {
      if (!dhalf) ((float *)p)[i] = v;
      else if (half == 2) ((txl_fp16 *)p)[i] = txl_fp16_from_float(v);
      else ((txl_bf16 *)p)[i] = txl_bf16_from_float(v);
    };
    /* the error of D's rounding of a value of magnitude at most x: none for fp32, 2^-8 x for bf16,
     * 2^-11 x + 2^-25 for fp16 (half the subnormal spacing below 2^-14) */
    const auto d_rounding = [&](double x) {
      return !dhalf ? 0.0 : half == 2 ? 0x1p-11 * x + 0x1p-25 : 0x1p-8 * x;
    };
    int same_as_gemmex = 0, compared_gemmex = 0;
    for (int e = 0; e < 5; e++) {
      const uint32_t epi = epilogues[e];
      const bool with_bias = epi == CUBLASLT_EPILOGUE_BIAS || epi == CUBLASLT_EPILOGUE_RELU_BIAS;
      const bool grad = epi == CUBLASLT_EPILOGUE_BGRADA || epi == CUBLASLT_EPILOGUE_BGRADB;
      int bad = 0, bad_status = 0, outside = 0, clipped = 0, calls = 0;
      double worst = 0.0; /* largest error / bound */
      for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
          for (int bz = 0; bz < 2; bz++) {
            const float beta = bz ? 0.0f : 1.0f, alpha = 1.5f;
            /* leading dimensions larger than the rows: A (m or k rows), B (k or n rows) */
            const int lda = (ta ? k : m) + 3, ldb = (tb ? n : k) + 2;
            /* D: the block NaN (beta 0) or C0; rows m .. ldd - 1 the sentinel */
            std::vector<unsigned char> D(ldd * n * dsize), D2;
            std::vector<unsigned char> bias(vec * dsize);
            for (int j = 0; j < n; j++)
              for (int i = 0; i < ldd; i++) {
                st_d(D.data(), i + j * ldd, i >= m ? sentinel : bz ? NAN : C0[i + j * ldd]);
              }
            for (int i = 0; i < vec; i++) /* a gradient's elements start as NaN */
              st_d(bias.data(), i, grad ? NAN : bias0[i]);
            const std::vector<unsigned char> Dinit = D, bias_init = bias;
            LtCall c{tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                     half ? htype : CUDA_R_32F,
                     dhalf ? htype : CUDA_R_32F,
                     (e % 2) ? (int32_t)(dhalf ? htype : CUDA_R_32F) : -1, /* set or left at the default */
                     ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                     tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                     epi, m, n, k, lda, ldb, ldd,
                     half == 2 ? (const void *)Ah.data() : half ? (const void *)Ab.data() : (const void *)Af.data(),
                     half == 2 ? (const void *)Bh.data() : half ? (const void *)Bb.data() : (const void *)Bf.data(),
                     D.data(), bias.data(), alpha, beta};
            const LtStatus st = lt_run(lt, c);
            calls++;
            if (st.heuristic != CUBLAS_STATUS_SUCCESS || st.returned != 1 || st.matmul != CUBLAS_STATUS_SUCCESS) {
              bad_status++;
              continue;
            }
            const auto rd = [&](const std::vector<unsigned char> &v, size_t i) {
              return !dhalf     ? ((const float *)v.data())[i]
                     : half == 2 ? txl_fp16_to_float(((const txl_fp16 *)v.data())[i])
                                 : txl_bf16_to_float(((const txl_bf16 *)v.data())[i]);
            };
            /* an operand element as the GEMM sees it, and as stored (the gradient's input) */
            const auto a_at = [&](int i, int p, bool rounded) {
              const size_t at = ta ? (size_t)p + (size_t)i * lda : (size_t)i + (size_t)p * lda;
              const float v = half == 2 ? txl_fp16_to_float(Ah[at]) : half ? txl_bf16_to_float(Ab[at]) : Af[at];
              return rounded && tf32 ? round_tf32_ref(v) : v;
            };
            const auto b_at = [&](int p, int j, bool rounded) {
              const size_t at = tb ? (size_t)j + (size_t)p * ldb : (size_t)p + (size_t)j * ldb;
              const float v = half == 2 ? txl_fp16_to_float(Bh[at]) : half ? txl_bf16_to_float(Bb[at]) : Bf[at];
              return rounded && tf32 ? round_tf32_ref(v) : v;
            };
            for (int j = 0; j < n; j++)
              for (int i = 0; i < ldd; i++) {
                const size_t at = (size_t)i + (size_t)j * ldd;
                if (i >= m) { /* outside the block: the same bits */
                  outside += memcmp(&D[at * dsize], &Dinit[at * dsize], dsize) != 0;
                  continue;
                }
                double s = 0.0, mag = 0.0;
                for (int p = 0; p < k; p++) {
                  const double t = (double)a_at(i, p, true) * b_at(p, j, true);
                  s += t;
                  mag += fabs(t);
                }
                const double cval = bz ? 0.0 : rd(Dinit, at), bval = with_bias ? rd(bias_init, i) : 0.0;
                const double pre = alpha * s + beta * cval + bval;
                const bool relu = epi == CUBLASLT_EPILOGUE_RELU_BIAS;
                clipped += relu && pre < 0.0;
                const double want = relu && pre < 0.0 ? 0.0 : pre;
                double bound = lt_gamma(k + 4) * (fabs(alpha) * mag + fabs(beta * cval) + fabs(bval));
                bound += d_rounding(fabs(want) + bound);
                const double err = fabs(rd(D, at) - want);
                if (!(err <= bound)) bad++;
                else if (bound > 0) worst = fmax(worst, err / bound);
              }
            if (grad) {
              const bool on_a = epi == CUBLASLT_EPILOGUE_BGRADA;
              const int len = on_a ? m : n;
              for (int r = 0; r < vec; r++) {
                if (r >= len) { /* past the gradient: untouched */
                  outside += memcmp(&bias[r * dsize], &bias_init[r * dsize], dsize) != 0;
                  continue;
                }
                double g = 0.0, mag = 0.0;
                for (int q = 0; q < k; q++) {
                  const double x = on_a ? a_at(r, q, false) : b_at(q, r, false);
                  g += x;
                  mag += fabs(x);
                }
                double bound = lt_gamma(k) * mag;
                bound += d_rounding(fabs(g) + bound);
                const double err = fabs(rd(bias, r) - g);
                if (!(err <= bound)) bad++;
                else if (bound > 0) worst = fmax(worst, err / bound);
              }
            } else {
              outside += bias != bias_init; /* the bias is an input */
            }
            if (!with_bias) { /* D must be the bits of cublasGemmEx */
              D2 = Dinit;
              CUBLAS_CHECK(cublasGemmEx(blas, c.ta, c.tb, m, n, k, &alpha, c.A, c.ab, lda, c.B, c.ab, ldb, &beta,
                                        D2.data(), c.d, ldd, c.compute, CUBLAS_GEMM_DEFAULT));
              compared_gemmex++;
              same_as_gemmex += D == D2;
            }
          }
      /* a ReLU that clipped nothing would not be tested */
      const bool meaningful = epi != CUBLASLT_EPILOGUE_RELU_BIAS || clipped >= calls * m * n / 4;
      check(bad == 0 && bad_status == 0 && outside == 0 && meaningful,
            "cublasLtMatmul %s, epilogue %s, NN/NT/TN/TT, beta 1 and 0: %d calls failed, %d values out of bounds, "
            "%d elements outside changed, max error %.2f of the bound%s",
            mode_name[mode], epilogue_name[e], bad_status, bad, outside, worst,
            epi == CUBLASLT_EPILOGUE_RELU_BIAS ? (meaningful ? " (ReLU clipped)" : " (ReLU clipped too few)") : "");
    }
    check(compared_gemmex == 24 && same_as_gemmex == compared_gemmex,
          "cublasLtMatmul %s DEFAULT/BGRADA/BGRADB D: the bits of cublasGemmEx in %d of %d calls", mode_name[mode],
          same_as_gemmex, compared_gemmex);
  }

  /* What is refused, with D and the bias untouched. */
  std::vector<float> Df(ldd * n, 0.5f), biasf(vec, 0.25f);
  std::vector<txl_bf16> Db(ldd * n, txl_bf16_from_float(0.5f)), biasb(vec, txl_bf16_from_float(0.25f));
  const std::vector<float> Df0 = Df;
  const std::vector<txl_bf16> Db0 = Db;
  const LtCall f32{CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, -1, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_BIAS,
                   m, n, k, m, k, ldd, Af.data(), Bf.data(), Df.data(), biasf.data(), 1.0f, 1.0f};
  LtCall bf = f32;
  bf.ab = bf.d = CUDA_R_16BF, bf.A = Ab.data(), bf.B = Bb.data(), bf.D = Db.data(), bf.bias = biasb.data();
  std::vector<txl_fp16> Dh(ldd * n, txl_fp16_from_float(0.5f)), biash(vec, txl_fp16_from_float(0.25f));
  const std::vector<txl_fp16> Dh0 = Dh;
  LtCall hf = f32;
  hf.ab = hf.d = CUDA_R_16F, hf.A = Ah.data(), hf.B = Bh.data(), hf.D = Dh.data(), hf.bias = biash.data();
  struct Refused {
    LtCall call;
    cublasStatus_t want;
    const char *what;
  } refused[] = {
      {bf, CUBLAS_STATUS_NOT_SUPPORTED, "fp32 bias with a bf16 D"},
      {f32, CUBLAS_STATUS_NOT_SUPPORTED, "bf16 bias with an fp32 D"},
      {f32, CUBLAS_STATUS_NOT_SUPPORTED, "fp32 A, B with a bf16 D"},
      {bf, CUBLAS_STATUS_NOT_SUPPORTED, "bf16 A, B with CUBLAS_COMPUTE_32F_FAST_TF32"},
      {hf, CUBLAS_STATUS_NOT_SUPPORTED, "bf16 bias with an fp16 D"},
      {hf, CUBLAS_STATUS_NOT_SUPPORTED, "fp16 A, B with a bf16 D"},
      {f32, CUBLAS_STATUS_NOT_SUPPORTED, "the epilogue RELU (2), not emulated"},
      {f32, CUBLAS_STATUS_INVALID_VALUE, "BIAS with a NULL bias pointer"},
      {f32, CUBLAS_STATUS_INVALID_VALUE, "D's leading dimension below its rows"},
  };
  refused[0].call.bias_type = CUDA_R_32F;
  refused[1].call.bias_type = CUDA_R_16BF;
  refused[2].call.d = CUDA_R_16BF, refused[2].call.D = Db.data(), refused[2].call.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  refused[3].call.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  refused[4].call.bias_type = CUDA_R_16BF;
  refused[5].call.d = CUDA_R_16BF, refused[5].call.D = Db.data(), refused[5].call.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  refused[6].call.epilogue = 2;
  refused[7].call.bias = NULL;
  refused[8].call.ldd = m - 1;
  for (const Refused &r : refused) {
    const LtStatus st = lt_run(lt, r.call);
    check(st.heuristic == r.want && st.returned == 0 && st.matmul == r.want && Df == Df0 &&
              memcmp(Db.data(), Db0.data(), Db.size() * 2) == 0 && memcmp(Dh.data(), Dh0.data(), Dh.size() * 2) == 0,
          "cublasLt with %s: heuristic %s (%d results), matmul %s, D untouched", r.what,
          cublasGetStatusName(st.heuristic), st.returned, cublasGetStatusName(st.matmul));
  }
  {
    std::vector<float> Cother = Df0;
    const LtStatus st = lt_run(lt, f32, Cother.data());
    check(st.matmul == CUBLAS_STATUS_NOT_SUPPORTED && Df == Df0, "cublasLtMatmul with C != D: %s (not emulated)",
          cublasGetStatusName(st.matmul));
  }
  /* the argument checks of the calls themselves */
  {
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int64_t wide = 1;
    const cublasStatus_t size = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide);
    cublasLtMatrixLayout_t l;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 4, 4, 4));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t res;
    int returned = -1;
    const cublasStatus_t count = cublasLtMatmulAlgoGetHeuristic(lt, desc, l, l, l, l, pref, 0, &res, &returned);
    const cublasStatus_t nohandle = cublasLtMatmulAlgoGetHeuristic(NULL, desc, l, l, l, l, pref, 1, &res, &returned);
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, l, l, l, l, pref, 1, &res, &returned));
    float X[16] = {0};
    const float one = 1.0f;
    cublasLtMatmulAlgo_t junk;
    memset(&junk, 0, sizeof junk);
    const cublasStatus_t algo = cublasLtMatmul(lt, desc, &one, X, l, X, l, &one, X, l, X, l, &junk, NULL, 0, 0);
    const cublasStatus_t nolt = cublasLtMatmul(NULL, desc, &one, X, l, X, l, &one, X, l, X, l, &res.algo, NULL, 0, 0);
    /* op(A) 4 x 4 times op(B) 5 x 4: k does not match */
    cublasLtMatrixLayout_t l54;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l54, CUDA_R_32F, 5, 4, 5));
    const cublasStatus_t shape = cublasLtMatmulAlgoGetHeuristic(lt, desc, l, l54, l, l, pref, 1, &res, &returned);
    const int shape_returned = returned;
    float Y[20] = {0};
    const cublasStatus_t shape_mm = cublasLtMatmul(lt, desc, &one, X, l, Y, l54, &one, X, l, X, l, NULL, NULL, 0, 0);
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(l54));
    check(size == CUBLAS_STATUS_INVALID_VALUE && count == CUBLAS_STATUS_INVALID_VALUE &&
              nohandle == CUBLAS_STATUS_NOT_INITIALIZED && algo == CUBLAS_STATUS_INVALID_VALUE &&
              nolt == CUBLAS_STATUS_NOT_INITIALIZED && shape == CUBLAS_STATUS_INVALID_VALUE && shape_returned == 0 &&
              shape_mm == CUBLAS_STATUS_INVALID_VALUE,
          "cublasLt argument checks: attribute of the wrong size %s, 0 algorithms requested %s, no handle %s / %s, "
          "an algorithm not from the heuristic %s, op(A) cols != op(B) rows %s / %s",
          cublasGetStatusName(size), cublasGetStatusName(count), cublasGetStatusName(nohandle),
          cublasGetStatusName(nolt), cublasGetStatusName(algo), cublasGetStatusName(shape),
          cublasGetStatusName(shape_mm));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(l));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
  }
  /* TXL_EMU_LT_EPILOGUES=off: every epilogue but DEFAULT unsupported, DEFAULT still runs */
  setenv("TXL_EMU_LT_EPILOGUES", "off", 1);
  for (int e = 0; e < 5; e++) {
    LtCall c = f32;
    c.epilogue = epilogues[e];
    Df = Df0;
    const LtStatus st = lt_run(lt, c);
    const bool def = epilogues[e] == CUBLASLT_EPILOGUE_DEFAULT;
    const cublasStatus_t want = def ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
    check(st.heuristic == want && st.returned == (def ? 1 : 0) && st.matmul == want && (def || Df == Df0),
          "TXL_EMU_LT_EPILOGUES=off, epilogue %s: heuristic %s (%d results), matmul %s", epilogue_name[e],
          cublasGetStatusName(st.heuristic), st.returned, cublasGetStatusName(st.matmul));
  }
  unsetenv("TXL_EMU_LT_EPILOGUES");
  {
    const LtStatus st = lt_run(lt, f32);
    check(st.heuristic == CUBLAS_STATUS_SUCCESS && st.matmul == CUBLAS_STATUS_SUCCESS,
          "TXL_EMU_LT_EPILOGUES unset again: BIAS %s", cublasGetStatusName(st.matmul));
  }
  CUBLAS_CHECK(cublasDestroy(blas));
  CUBLAS_CHECK(cublasLtDestroy(lt));
}

/* This program again (--lt-bad-env: a fresh process, as test_unknown_arch's child, so that
 * LeakSanitizer sees none of the parent's fibers) with TXL_EMU_LT_EPILOGUES=maybe. */
static void exec_lt_bad_env(void) {
  setenv("TXL_EMU_LT_EPILOGUES", "maybe", 1);
  execl("/proc/self/exe", "test_emu", "--lt-bad-env", (char *)NULL);
  _exit(127);
}

/* The child's work: a heuristic query with a bias epilogue, which reads the variable. */
static void run_lt_bad_env(void) {
  cublasLtHandle_t lt;
  CUBLAS_CHECK(cublasLtCreate(&lt));
  float X[4] = {0}, bias[2] = {0};
  LtCall c{CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, -1, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_BIAS,
           2, 2, 2, 2, 2, 2, X, X, X, bias, 1.0f, 0.0f};
  (void)lt_run(lt, c);
}

/* An unknown TXL_EMU_LT_EPILOGUES ends the program with a message naming it. */
static void test_cublaslt_env(void) {
  std::string err;
  const int status = run_child(exec_lt_bad_env, &err);
  while (!err.empty() && err.back() == '\n') err.pop_back();
  const bool exit1 = WIFEXITED(status) && WEXITSTATUS(status) == 1;
  check(exit1 && err == "txl: error: cuda emulator: TXL_EMU_LT_EPILOGUES=maybe: expected on or off",
        "TXL_EMU_LT_EPILOGUES=maybe: exit %d, \"%s\"", WIFEXITED(status) ? WEXITSTATUS(status) : -1, err.c_str());
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--lt-bad-env") == 0) { /* test_cublaslt_env's child */
    run_lt_bad_env();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--device") == 0) { /* test_unknown_arch's child */
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s\n", prop.name);
    return 0;
  }
  const char *env = getenv("TXL_EMU_FIBERS");
  const char *backend = txl_emu_fiber_backend();
  printf("cuda emulator self-test, fibers: %s, thread order: %s\n", backend, txl_emu_order());
  if (env && env[0]) check(strcmp(env, backend) == 0, "TXL_EMU_FIBERS=%s is used", env);
  test_block();
  test_warp();
  test_shared();
  test_order();
  test_config();
  test_runtime();
  test_arch();
  test_unknown_arch();
  test_cublas();
  test_cublas_bf16();
  test_fp16_conversion();
  test_cublas_fp16();
  test_cublas_batched();
  test_cublaslt();
  test_cublaslt_env();
  test_fatal();
  test_counts();
  return selftest_finish();
}
