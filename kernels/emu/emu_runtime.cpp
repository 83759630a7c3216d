/* The CPU emulator's runtime calls outside streams and kernels: errors (cudaGetLastError and the
 * helpers the other parts raise them with), the counts of launches and host synchronisations
 * (txl_emu_counts; the rule is README.md's "Counts"), the device (TXL_EMU_ARCH's architecture,
 * emu_arch.cpp; the GPUs TXL_EMU_GPUS and CUDA_VISIBLE_DEVICES give) and memory (host memory
 * standing for device and page-locked memory; copies and memsets, with what a capture refuses of
 * them). */
#include "kernels/emu/emu_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <map>

#include "kernels/emu/emu_arch.h"

/* ---- errors ------------------------------------------------------------------------------ */
static cudaError_t g_last_error = cudaSuccess;

cudaError_t emu_set_error(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

void emu_die(const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fflush(stdout);
  fprintf(stderr, "txl: error: cuda emulator: %s\n", msg);
  fflush(stderr);
  exit(1);
}

/* ---- counts (txl_emu_counts; the rule is README.md's "Counts") --------------------------- */
static long g_launches = 0, g_syncs = 0;
static int g_trace_sync = -1; /* TXL_EMU_TRACE_SYNC: -1 not read yet, 0 off, 1 on */

void emu_launched(void) { g_launches++; }

void emu_host_sync(const char *what, size_t bytes) {
  g_syncs++;
  if (g_trace_sync < 0) {
    const char *e = getenv("TXL_EMU_TRACE_SYNC");
    if (!e || !*e || strcmp(e, "0") == 0) g_trace_sync = 0;
    else if (strcmp(e, "1") == 0) g_trace_sync = 1;
    else emu_die("TXL_EMU_TRACE_SYNC=%s: expected 0 or 1", e);
  }
  if (g_trace_sync) fprintf(stderr, "cuda-emu: host synchronisation %ld: %s (%zu bytes)\n", g_syncs, what, bytes);
}

extern "C" void txl_emu_counts(long *launches, long *syncs) {
  *launches = g_launches;
  *syncs = g_syncs;
}

/* ---- runtime: errors, device ----------------------------------------------------------------- */
const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorStreamCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
  }
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case cudaErrorStreamCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case cudaErrorStreamCaptureUnjoined: return "capturing stream has unjoined work";
    case cudaErrorStreamCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_last_error; }

static int g_device = 0;

/* The emulated node's GPUs: TXL_EMU_GPUS of them (default 1), physical indices 0..N-1, of which
 * the process sees those CUDA_VISIBLE_DEVICES lists, in its order, as the CUDA runtime does (the
 * list ends at its first entry that names no GPU; set but empty: none). What a cluster's per-task
 * binding hands a rank can so be faked (tests/slurm/test_gpu_bind.sh). */
static int visible_devices(int physical[], int room) {
  const char *e = getenv("TXL_EMU_GPUS");
  const int gpus = e && atoi(e) > 0 ? atoi(e) : 1;
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  int n = 0;
  if (!v) {
    for (; n < gpus && n < room; n++) physical[n] = n;
    return n;
  }
  while (*v && n < room) {
    char *end;
    const long i = strtol(v, &end, 10);
    if (end == v || i < 0 || i >= gpus || (*end && *end != ',')) break;
    physical[n++] = (int)i;
    v = *end ? end + 1 : end;
  }
  return n;
}

static bool device_visible(int device) {
  int physical[64];
  return device >= 0 && device < visible_devices(physical, 64);
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return emu_set_error(cudaErrorInvalidValue);
  int physical[64];
  *count = visible_devices(physical, 64);
  return *count ? cudaSuccess : emu_set_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (!device_visible(device)) return emu_set_error(cudaErrorInvalidDevice);
  g_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  int physical[64];
  if (!pciBusId || len < 13 || device < 0 || device >= visible_devices(physical, 64))
    return emu_set_error(cudaErrorInvalidValue);
  snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + physical[device]);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device) return emu_set_error(cudaErrorInvalidValue);
  *device = g_device;
  return cudaSuccess;
}

static size_t host_memory(bool available) {
  const long pages = sysconf(available ? _SC_AVPHYS_PAGES : _SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (!prop) return emu_set_error(cudaErrorInvalidValue);
  if (!device_visible(device)) return emu_set_error(cudaErrorInvalidDevice);
  const TxlEmuArch &a = txl_emu_arch();
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "%s", a.name);
  prop->totalGlobalMem = a.memory;
  prop->sharedMemPerBlock = (size_t)a.shared_per_block;
  prop->sharedMemPerBlockOptin = (size_t)a.shared_optin;
  prop->sharedMemPerMultiprocessor = (size_t)a.shared_per_sm;
  prop->regsPerBlock = a.regs_per_block;
  prop->regsPerMultiprocessor = a.regs_per_sm;
  prop->warpSize = WARP;
  prop->maxThreadsPerBlock = a.threads_per_block;
  prop->maxThreadsPerMultiProcessor = a.threads_per_sm;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->major = a.major;
  prop->minor = a.minor;
  prop->multiProcessorCount = a.sms;
  prop->memoryBusWidth = a.bus_bits;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
  if (!value) return emu_set_error(cudaErrorInvalidValue);
  if (!device_visible(device)) return emu_set_error(cudaErrorInvalidDevice);
  const TxlEmuArch &a = txl_emu_arch();
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = a.threads_per_block; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = a.shared_per_block; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = a.regs_per_block; break;
    case cudaDevAttrWarpSize: *value = WARP; break;
    case cudaDevAttrClockRate: *value = a.clock_khz; break;
    case cudaDevAttrMultiProcessorCount: *value = a.sms; break;
    case cudaDevAttrMemoryClockRate: *value = a.mem_clock_khz; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = a.bus_bits; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = a.threads_per_sm; break;
    case cudaDevAttrComputeCapabilityMajor: *value = a.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = a.minor; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = a.shared_per_sm; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = a.regs_per_sm; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = a.shared_optin; break;
    default: return emu_set_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (emu_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  emu_host_sync("cudaDeviceSynchronize", 0);
  emu_drain(NULL);
  return cudaSuccess;
}

/* ---- runtime: memory --------------------------------------------------------------------- */
/* The live allocations, start -> bytes: cudaMalloc's (device memory) and cudaMallocHost's
 * (page-locked host memory), to tell what a copy or a memset touches. */
static std::map<uintptr_t, size_t> g_device_mem, g_pinned;

static bool in_range(const std::map<uintptr_t, size_t> &m, const void *p) {
  const uintptr_t a = (uintptr_t)p;
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a < it->first + (it->second ? it->second : 1);
}

bool emu_in_device_memory(const void *p, size_t bytes) {
  const uintptr_t a = (uintptr_t)p;
  auto it = g_device_mem.upper_bound(a);
  if (it == g_device_mem.begin()) return false;
  --it;
  return a >= it->first && bytes <= it->second && a - it->first <= it->second - bytes;
}

/* A synchronous call of the legacy stream (cudaMemcpy, cudaMemset, cudaMemset2D): the legacy
 * stream's rule, then the global mode's. */
static cudaError_t legacy_sync_call(void) {
  const cudaError_t e = emu_legacy_use();
  if (e != cudaSuccess) return e;
  const cudaError_t u = emu_unsafe_call();
  if (u == cudaSuccess) emu_drain_blocking();
  return u;
}

cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (!ptr) return emu_set_error(cudaErrorInvalidValue);
  *ptr = NULL;
  if (emu_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  emu_host_sync("cudaMalloc", bytes);
  /* cudaMalloc memory is 256-byte aligned; the size is kept exact for AddressSanitizer */
  if (posix_memalign(ptr, 256, bytes) != 0) {
    *ptr = NULL;
    return emu_set_error(cudaErrorMemoryAllocation);
  }
  g_device_mem[(uintptr_t)*ptr] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  if (emu_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  emu_host_sync("cudaFree", g_device_mem.count((uintptr_t)ptr) ? g_device_mem[(uintptr_t)ptr] : 0);
  emu_drain(NULL); /* cudaFree waits for the device */
  g_device_mem.erase((uintptr_t)ptr);
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  if (!ptr) return emu_set_error(cudaErrorInvalidValue);
  *ptr = NULL;
  if (emu_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  emu_host_sync("cudaMallocHost", bytes);
  if (posix_memalign(ptr, 4096, bytes ? bytes : 1) != 0) { /* whole pages, as page-locked memory */
    *ptr = NULL;
    return emu_set_error(cudaErrorMemoryAllocation);
  }
  g_pinned[(uintptr_t)*ptr] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  const auto it = g_pinned.find((uintptr_t)ptr);
  if (it == g_pinned.end()) return emu_set_error(cudaErrorInvalidValue);
  if (emu_unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  emu_host_sync("cudaFreeHost", it->second);
  emu_drain(NULL);
  g_pinned.erase(it);
  free(ptr);
  return cudaSuccess;
}

/* Whether a copy makes the host wait (README.md, "Counts"): cudaMemcpy always, except device to
 * device; cudaMemcpyAsync when the host side is pageable memory or both sides are host memory.
 * cudaMemcpyDefault: each side by where its pointer lies. */
struct CopySides {
  bool dst_dev, src_dev; /* device memory on that side */
  bool pinned;           /* one side is device memory, the other page-locked host memory */
};
static CopySides copy_sides(void *dst, const void *src, cudaMemcpyKind kind) {
  CopySides c;
  c.dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  c.src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind == cudaMemcpyDefault) {
    c.dst_dev = in_range(g_device_mem, dst);
    c.src_dev = in_range(g_device_mem, src);
  }
  c.pinned = c.dst_dev != c.src_dev && in_range(g_pinned, c.dst_dev ? src : dst);
  return c;
}

static void count_copy(const char *api, bool async, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  static const char *const names[] = {"host to host", "host to device", "device to host", "device to device",
                                      "default"};
  const CopySides c = copy_sides(dst, src, kind);
  const bool dst_dev = c.dst_dev, src_dev = c.src_dev, pinned = c.pinned;
  if (dst_dev && src_dev) return; /* no host-side synchronisation, either form */
  if (async && pinned) return;
  char what[160];
  snprintf(what, sizeof what, "%s %s, %s", api, names[kind],
           !(dst_dev || src_dev) ? "host memory on both sides" : pinned ? "page-locked host memory" : "pageable host memory");
  emu_host_sync(what, bytes);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return emu_set_error(cudaErrorInvalidMemcpyDirection);
  if (bytes && (!dst || !src)) return emu_set_error(cudaErrorInvalidValue);
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  count_copy("cudaMemcpy", false, dst, src, bytes, kind);
  if (bytes) memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return emu_set_error(cudaErrorInvalidMemcpyDirection);
  if (bytes && (!dst || !src)) return emu_set_error(cudaErrorInvalidValue);
  cudaError_t err;
  const Enqueue q = emu_enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) {
    /* a copy node moves device memory and page-locked host memory only: a pageable (or host to
     * host) copy cannot be captured */
    const CopySides c = copy_sides(dst, src, kind);
    if (!(c.dst_dev && c.src_dev) && !c.pinned) {
      emu_invalidate(stream->capture);
      return emu_set_error(cudaErrorStreamCaptureUnsupported);
    }
    emu_record(stream, [dst, src, bytes]() {
      if (bytes) memcpy(dst, src, bytes);
    });
    return cudaSuccess;
  }
  if (q == ENQ_DEFER) {
    const CopySides c = copy_sides(dst, src, kind);
    if ((c.dst_dev && c.src_dev) || c.pinned) { /* stream-ordered: behind the stream's work */
      emu_defer(stream, [dst, src, bytes]() {
        if (bytes) memcpy(dst, src, bytes);
      });
      return cudaSuccess;
    }
    emu_drain(stream); /* a pageable copy is staged by the host after the stream's work */
  }
  count_copy("cudaMemcpyAsync", true, dst, src, bytes, kind);
  if (bytes) memcpy(dst, src, bytes);
  return cudaSuccess;
}

/* The synchronous memsets wait only when they write page-locked host memory; the Async ones never. */
static cudaError_t memset_2d(void *ptr, size_t pitch, int value, size_t width, size_t height) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (!ptr || (height > 1 && pitch < width)) return emu_set_error(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; r++) memset(static_cast<char *>(ptr) + r * pitch, value, width);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  if (bytes && in_range(g_pinned, ptr)) emu_host_sync("cudaMemset of page-locked host memory", bytes);
  return memset_2d(ptr, bytes, value, bytes, 1);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  cudaError_t err;
  const Enqueue q = emu_enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) {
    if (bytes && !ptr) return emu_set_error(cudaErrorInvalidValue);
    emu_record(stream, [ptr, value, bytes]() { memset_2d(ptr, bytes, value, bytes, 1); });
    return cudaSuccess;
  }
  if (q == ENQ_DEFER) {
    if (bytes && !ptr) return emu_set_error(cudaErrorInvalidValue);
    emu_defer(stream, [ptr, value, bytes]() { memset_2d(ptr, bytes, value, bytes, 1); });
    return cudaSuccess;
  }
  return memset_2d(ptr, bytes, value, bytes, 1);
}

cudaError_t cudaMemset2D(void *ptr, size_t pitch, int value, size_t width, size_t height) {
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  if (width && height && in_range(g_pinned, ptr))
    emu_host_sync("cudaMemset2D of page-locked host memory", width * height);
  return memset_2d(ptr, pitch, value, width, height);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  if (!free_bytes || !total_bytes) return emu_set_error(cudaErrorInvalidValue);
  /* the part's memory; what can be allocated is the host's, so free is the smaller of the two */
  const size_t host_free = host_memory(true), total = txl_emu_arch().memory;
  *free_bytes = host_free < total ? host_free : total;
  *total_bytes = total;
  return cudaSuccess;
}
