/* The CUDA runtime of the emulator: errors, the device, memory, streams and events, stream
 * capture and graphs (README.md). The scheduler and the capture's bookkeeping are
 * cuda_emu.cpp's (cuda_emu_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/emu/emu_arch.h"
#include "kernels/emu/cuda_emu_internal.h"

using namespace txl_emu;

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
  if (!count) return set_error(cudaErrorInvalidValue);
  int physical[64];
  *count = visible_devices(physical, 64);
  return *count ? cudaSuccess : set_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (!device_visible(device)) return set_error(cudaErrorInvalidDevice);
  g_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  int physical[64];
  if (!pciBusId || len < 13 || device < 0 || device >= visible_devices(physical, 64))
    return set_error(cudaErrorInvalidValue);
  snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x10 + physical[device]);
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device) return set_error(cudaErrorInvalidValue);
  *device = g_device;
  return cudaSuccess;
}

static size_t host_memory(bool available) {
  const long pages = sysconf(available ? _SC_AVPHYS_PAGES : _SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device) {
  if (!prop) return set_error(cudaErrorInvalidValue);
  if (!device_visible(device)) return set_error(cudaErrorInvalidDevice);
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
  if (!value) return set_error(cudaErrorInvalidValue);
  if (!device_visible(device)) return set_error(cudaErrorInvalidDevice);
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
    default: return set_error(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  host_sync("cudaDeviceSynchronize", 0);
  return cudaSuccess;
}

cudaError_t txl_emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value) {
  if (!kernel) return set_error(cudaErrorInvalidValue);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return set_error(cudaErrorInvalidValue);
  /* above the architecture's opt-in limit the CUDA runtime answers cudaErrorInvalidValue */
  if (value < 0 || value > txl_emu_arch().shared_optin) return set_error(cudaErrorInvalidValue);
  g_max_dynamic_shared[kernel] = value;
  return cudaSuccess;
}

/* ---- runtime: memory --------------------------------------------------------------------- */
cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (!ptr) return set_error(cudaErrorInvalidValue);
  *ptr = NULL;
  if (unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  host_sync("cudaMalloc", bytes);
  /* cudaMalloc memory is 256-byte aligned; the size is kept exact for AddressSanitizer */
  if (posix_memalign(ptr, 256, bytes) != 0) {
    *ptr = NULL;
    return set_error(cudaErrorMemoryAllocation);
  }
  g_device_mem[(uintptr_t)*ptr] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFree(void *ptr) {
  if (!ptr) return cudaSuccess;
  if (unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  host_sync("cudaFree", g_device_mem.count((uintptr_t)ptr) ? g_device_mem[(uintptr_t)ptr] : 0);
  g_device_mem.erase((uintptr_t)ptr);
  free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes) {
  if (!ptr) return set_error(cudaErrorInvalidValue);
  *ptr = NULL;
  if (unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  host_sync("cudaMallocHost", bytes);
  if (posix_memalign(ptr, 4096, bytes ? bytes : 1) != 0) { /* whole pages, as page-locked memory */
    *ptr = NULL;
    return set_error(cudaErrorMemoryAllocation);
  }
  g_pinned[(uintptr_t)*ptr] = bytes;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr) return cudaSuccess;
  const auto it = g_pinned.find((uintptr_t)ptr);
  if (it == g_pinned.end()) return set_error(cudaErrorInvalidValue);
  if (unsafe_call() != cudaSuccess) return cudaErrorStreamCaptureUnsupported;
  host_sync("cudaFreeHost", it->second);
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
  host_sync(what, bytes);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return set_error(cudaErrorInvalidMemcpyDirection);
  if (bytes && (!dst || !src)) return set_error(cudaErrorInvalidValue);
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  count_copy("cudaMemcpy", false, dst, src, bytes, kind);
  if (bytes) memcpy(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
    return set_error(cudaErrorInvalidMemcpyDirection);
  if (bytes && (!dst || !src)) return set_error(cudaErrorInvalidValue);
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) {
    /* a copy node moves device memory and page-locked host memory only: a pageable (or host to
     * host) copy cannot be captured */
    const CopySides c = copy_sides(dst, src, kind);
    if (!(c.dst_dev && c.src_dev) && !c.pinned) {
      invalidate(stream->capture);
      return set_error(cudaErrorStreamCaptureUnsupported);
    }
    record(stream, [dst, src, bytes]() {
      if (bytes) memcpy(dst, src, bytes);
    });
    return cudaSuccess;
  }
  count_copy("cudaMemcpyAsync", true, dst, src, bytes, kind);
  if (bytes) memcpy(dst, src, bytes);
  return cudaSuccess;
}

/* The synchronous memsets wait only when they write page-locked host memory; the Async ones never. */
static cudaError_t memset_2d(void *ptr, size_t pitch, int value, size_t width, size_t height) {
  if (width == 0 || height == 0) return cudaSuccess;
  if (!ptr || (height > 1 && pitch < width)) return set_error(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; r++) memset(static_cast<char *>(ptr) + r * pitch, value, width);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes) {
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  if (bytes && in_range(g_pinned, ptr)) host_sync("cudaMemset of page-locked host memory", bytes);
  return memset_2d(ptr, bytes, value, bytes, 1);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) {
    if (bytes && !ptr) return set_error(cudaErrorInvalidValue);
    record(stream, [ptr, value, bytes]() { memset_2d(ptr, bytes, value, bytes, 1); });
    return cudaSuccess;
  }
  return memset_2d(ptr, bytes, value, bytes, 1);
}

cudaError_t cudaMemset2D(void *ptr, size_t pitch, int value, size_t width, size_t height) {
  const cudaError_t e = legacy_sync_call();
  if (e != cudaSuccess) return e;
  if (width && height && in_range(g_pinned, ptr)) host_sync("cudaMemset2D of page-locked host memory", width * height);
  return memset_2d(ptr, pitch, value, width, height);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  if (!free_bytes || !total_bytes) return set_error(cudaErrorInvalidValue);
  /* the part's memory; what can be allocated is the host's, so free is the smaller of the two */
  const size_t host_free = host_memory(true), total = txl_emu_arch().memory;
  *free_bytes = host_free < total ? host_free : total;
  *total_bytes = total;
  return cudaSuccess;
}

/* ---- runtime: streams and events (everything is already complete when a call returns) ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  if (!stream) return set_error(cudaErrorInvalidValue);
  *stream = new CUstream_st{flags, NULL, 0, 0};
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return set_error(cudaErrorInvalidResourceHandle);
  if (stream->capture) die("cudaStreamDestroy of a stream that takes part in a capture: not emulated");
  delete stream;
  return cudaSuccess;
}

/* The legacy stream's rule; a stream that takes part in a capture cannot be waited for
 * (cudaErrorStreamCaptureUnsupported, the capture invalidated). */
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!stream) {
    const cudaError_t e = legacy_use();
    if (e != cudaSuccess) return e;
  } else if (stream->capture) {
    invalidate(stream->capture);
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  host_sync("cudaStreamSynchronize", 0);
  return cudaSuccess;
}

/* In a capture (README.md, "Stream capture and graphs"): waiting on an event recorded in a
 * capture makes the stream join that capture (fork) or marks the recording stream's work up to
 * the record as joined; a capturing stream may not wait on an event recorded outside its
 * capture (cudaErrorStreamCaptureIsolation) or in another capture (cudaErrorStreamCaptureMerge). */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  if (!stream) {
    const cudaError_t e = legacy_use();
    if (e != cudaSuccess) return e;
  }
  Capture *c = live_capture(event->capture_id);
  if (!c) { /* an event recorded outside any capture in progress */
    if (stream && stream->capture && event->recorded) {
      invalidate(stream->capture);
      return set_error(cudaErrorStreamCaptureIsolation);
    }
    return cudaSuccess; /* ordering only: everything before the record is complete */
  }
  if (!stream) { /* the legacy stream cannot take part in a capture */
    invalidate(c);
    return set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (stream->capture && stream->capture != c) {
    invalidate(c);
    invalidate(stream->capture);
    return set_error(cudaErrorStreamCaptureMerge);
  }
  if (c->invalidated) return set_error(cudaErrorStreamCaptureInvalidated);
  if (!stream->capture) { /* fork: the stream joins the capture */
    stream->capture = c;
    stream->ops = 0;
    stream->joined = 0;
    c->streams.push_back(stream);
  }
  cudaStream_t from = event->stream;
  if (from != stream && event->at > from->joined) from->joined = event->at;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  if (!event) return set_error(cudaErrorInvalidValue);
  *event = new CUevent_st{flags, false, 0.0, 0, NULL, 0};
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) { /* no node: the event stands for the stream's work so far in the capture */
    event->capture_id = stream->capture->id;
    event->stream = stream;
    event->at = stream->ops;
    return cudaSuccess;
  }
  event->capture_id = 0;
  event->stream = NULL;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  event->seconds = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  event->recorded = true;
  return cudaSuccess;
}

/* An event last recorded in a capture in progress stands for no work that runs: it cannot be
 * waited for or queried (cudaErrorCapturedEvent, the capture invalidated). */
static cudaError_t captured_event(cudaEvent_t event) {
  Capture *c = live_capture(event->capture_id);
  if (!c) return cudaSuccess;
  invalidate(c);
  return set_error(cudaErrorCapturedEvent);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  const cudaError_t e = captured_event(event);
  if (e != cudaSuccess) return e;
  host_sync("cudaEventSynchronize", 0);
  return cudaSuccess;
}

/* Never waits: the work before any record is complete (cudaSuccess), as is an event never recorded. */
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  return captured_event(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return set_error(cudaErrorInvalidValue);
  if (!start || !end || (start->flags & cudaEventDisableTiming) ||
      (end->flags & cudaEventDisableTiming))
    return set_error(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return set_error(cudaErrorInvalidResourceHandle);
  *ms = (float)((end->seconds - start->seconds) * 1e3);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return set_error(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

/* ---- runtime: stream capture and graphs (README.md, "Stream capture and graphs") ------------ */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode == cudaStreamCaptureModeRelaxed)
    die("cudaStreamBeginCapture with cudaStreamCaptureModeRelaxed: not emulated (Global and ThreadLocal are)");
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal)
    return set_error(cudaErrorInvalidValue);
  if (!stream) { /* the legacy stream cannot capture */
    const cudaError_t e = legacy_use();
    return e != cudaSuccess ? e : set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (stream->capture) return set_error(cudaErrorIllegalState); /* already capturing */
  Capture *c = new Capture{++g_capture_ids, stream, false, {stream}, {}};
  g_captures.push_back(c);
  stream->capture = c;
  stream->ops = 0;
  stream->joined = 0;
  return cudaSuccess;
}

/* Ends the capture begun on `stream`: every stream of it leaves capture mode. The graph, or NULL
 * and an error when the capture was invalidated (cudaErrorStreamCaptureInvalidated) or a stream
 * that joined it has work no stream of the capture waited for (cudaErrorStreamCaptureUnjoined). */
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  if (!pGraph) return set_error(cudaErrorInvalidValue);
  if (!stream) {
    const cudaError_t e = legacy_use();
    return e != cudaSuccess ? e : set_error(cudaErrorIllegalState);
  }
  Capture *c = stream->capture;
  if (!c) return set_error(cudaErrorIllegalState); /* not capturing */
  if (c->origin != stream) {
    invalidate(c);
    return set_error(cudaErrorStreamCaptureUnmatched);
  }
  bool unjoined = false;
  for (cudaStream_t s : c->streams) {
    if (s != stream && s->ops > s->joined) unjoined = true;
    s->capture = NULL;
  }
  for (size_t i = 0; i < g_captures.size(); i++)
    if (g_captures[i] == c) g_captures.erase(g_captures.begin() + (long)i);
  *pGraph = NULL;
  const bool invalidated = c->invalidated;
  Nodes nodes = std::make_shared<const std::vector<Node>>(std::move(c->nodes));
  delete c;
  if (invalidated) return set_error(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return set_error(cudaErrorStreamCaptureUnjoined);
  *pGraph = new CUgraph_st{nodes};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus) {
  if (!pCaptureStatus) return set_error(cudaErrorInvalidValue);
  if (!stream) { /* the query does not invalidate the capture */
    const cudaError_t e = legacy_use(false);
    if (e != cudaSuccess) return e;
    *pCaptureStatus = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  *pCaptureStatus = !stream->capture               ? cudaStreamCaptureStatusNone
                    : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                                   : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  if (!pGraphExec || !graph) return set_error(cudaErrorInvalidValue);
  if (flags != 0) die("cudaGraphInstantiate with flags 0x%llx: not emulated (0 is)", flags);
  *pGraphExec = new CUgraphExec_st{graph->nodes}; /* the nodes are immutable: shared */
  return cudaSuccess;
}

/* Runs the graph's nodes in their order (on a capturing stream: records them, as a child graph). */
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (!graphExec) return set_error(cudaErrorInvalidValue);
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  const Nodes nodes = graphExec->nodes;
  if (q == ENQ_RECORD) {
    record(stream, [nodes]() { replay(*nodes); });
    return cudaSuccess;
  }
  g_graph_launches++;
  replay(*nodes);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  if (!graphExec) return set_error(cudaErrorInvalidValue);
  delete graphExec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return set_error(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}
