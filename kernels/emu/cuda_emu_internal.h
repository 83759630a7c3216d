/* What the emulator's files share (private to kernels/emu): cuda_emu.cpp (the device, errors,
 * counts, stream capture, fibers, barriers), emu_runtime.cpp (the CUDA runtime) and emu_blas.cpp
 * (cuBLAS and cuBLASLt). C++ only; the kernels see cuda_emu.h alone. */
#ifndef TXL_KERNELS_EMU_CUDA_EMU_INTERNAL_H
#define TXL_KERNELS_EMU_CUDA_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "kernels/emu/cuda_emu.h"

namespace txl_emu {

/* ---- the emulated device: the limits of TXL_EMU_ARCH's architecture (emu_arch.cpp) -------- */
enum {
  STACK_BYTES = 256 * 1024,    /* per fiber; only the pages a kernel touches are committed */
  WARP = 32,
};

/* ---- errors ------------------------------------------------------------------------------ */
extern cudaError_t g_last_error;
/* Records e as the last error (cudaGetLastError) unless it is cudaSuccess; returns e. */
cudaError_t set_error(cudaError_t e);
/* One line on stderr, exit status 1: a misuse no GPU would survive either. */
void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* ---- counts (txl_emu_counts; the rule is README.md's "Counts") --------------------------- */
/* The live allocations, start -> bytes: cudaMalloc's (device memory) and cudaMallocHost's
 * (page-locked host memory), to tell what a copy or a memset touches. */
extern std::map<uintptr_t, size_t> g_device_mem, g_pinned;
/* A kernel or library call launched. */
void launched(void);
/* A call that makes the host wait for the device: counted, and with TXL_EMU_TRACE_SYNC=1 one
 * line on stderr naming it. */
void host_sync(const char *what, size_t bytes);
/* Whether p lies in one of m's allocations. */
bool in_range(const std::map<uintptr_t, size_t> &m, const void *p);

/* ---- stream capture (README.md, "Stream capture and graphs") --------------------------------- */
/* A node of a graph: one recorded operation, run by calling it. It owns copies of what it needs
 * (a kernel's arguments, a GEMM's scalars and settings); pointers to device memory are kept as
 * pointers, as a GPU's graph keeps them. */
typedef std::function<void()> Node;
typedef std::shared_ptr<const std::vector<Node>> Nodes;

/* One capture sequence: begun on `origin`, joined by the streams that waited on one of its
 * events; one list in enqueue order (a valid serialisation of its dependencies: the emulator
 * runs everything in order anyway). */
struct Capture {
  unsigned long long id;
  cudaStream_t origin;
  bool invalidated;
  std::vector<cudaStream_t> streams; /* origin first */
  std::vector<Node> nodes;
};

extern std::vector<Capture *> g_captures; /* the captures in progress */
extern unsigned long long g_capture_ids;
extern long g_graph_launches, g_graph_kernels;
/* The capture in progress with this id, or NULL. */
Capture *live_capture(unsigned long long id);
void invalidate(Capture *c);
/* The legacy stream (handle 0) used while a capture includes a blocking stream (one created
 * without cudaStreamNonBlocking): the legacy stream would wait for it, an implicit dependency on
 * the capture. cudaErrorStreamCaptureImplicit, and those captures are invalidated. */
cudaError_t legacy_use(bool invalidating = true);
/* A call that a capture in global mode forbids in the whole process (it is not stream-ordered,
 * or it waits for the device): cudaErrorStreamCaptureUnsupported while any capture is in
 * progress, and every capture is invalidated. */
cudaError_t unsafe_call(void);
/* A synchronous call of the legacy stream (cudaMemcpy, cudaMemset, cudaMemset2D): the legacy
 * stream's rule, then the global mode's. */
cudaError_t legacy_sync_call(void);
/* What to do with an operation enqueued on stream s: run it now, record it into s's capture, or
 * refuse it (*err: the legacy stream during a blocking capture, or a capture already
 * invalidated). */
enum Enqueue { ENQ_RUN, ENQ_RECORD, ENQ_FAIL };
Enqueue enqueue(cudaStream_t s, cudaError_t *err);
/* Appends n to s's capture. */
void record(cudaStream_t s, Node n);
/* Runs a graph's nodes in order. */
void replay(const std::vector<Node> &nodes);

/* ---- fibers ------------------------------------------------------------------------------ */
extern std::map<const void *, int> g_max_dynamic_shared; /* cudaFuncSetAttribute */

}  // namespace txl_emu

/* The opaque types of cuda_emu.h's handles. */
struct CUstream_st {
  unsigned int flags;
  txl_emu::Capture *capture; /* the capture this stream takes part in, NULL when it does not */
  long ops;         /* operations it enqueued in that capture */
  long joined;      /* of those, how many another stream of the capture waited for */
};
struct CUevent_st {
  unsigned int flags;
  bool recorded;
  double seconds;                 /* CLOCK_MONOTONIC at the record */
  unsigned long long capture_id;  /* recorded in this capture (0: not in a capture) */
  cudaStream_t stream;            /* on this stream, */
  long at;                        /* after its first `at` operations of the capture */
};
struct CUgraph_st {
  txl_emu::Nodes nodes;
};
struct CUgraphExec_st {
  txl_emu::Nodes nodes;
};

#endif
