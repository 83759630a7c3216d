/* What the parts of the CPU emulator share (README.md here lists them; internal to the emulator:
 * the kernels see cuda_emu.h only):
 *   emu_runtime.cpp   the runtime's errors and counts (the helpers below), device and memory;
 *   emu_streams.cpp   streams, events, stream capture and graphs: the capture state below, which
 *                     every call that enqueues work on a stream consults (a launch in
 *                     emu_fibers.cpp, a copy or memset in emu_runtime.cpp, a GEMM in
 *                     emu_cublas.cpp and emu_cublaslt.cpp);
 *   emu_fibers.cpp    the block scheduler, barriers, shuffles and launch checks;
 *   emu_cublas.cpp, emu_cublaslt.cpp (and emu_blas.h, the GEMM they share).
 * No state is defined here: each part keeps its own, static in its .cpp file, and the others
 * reach it through these functions. */
#ifndef TXL_KERNELS_EMU_INTERNAL_H
#define TXL_KERNELS_EMU_INTERNAL_H

#include "kernels/emu/cuda_emu.h"

#include <deque>
#include <functional>
#include <memory>
#include <type_traits>

enum {
  WARP = 32,             /* lanes of a warp */
  EMU_WARP_PAYLOAD = 64, /* bytes each lane hands to a warp-wide exchange (emu_warp_exchange) */
};

/* ---- errors and counts (emu_runtime.cpp) ------------------------------------------------- */
/* e becomes what cudaGetLastError returns next, unless it is cudaSuccess; returns e. */
cudaError_t emu_set_error(cudaError_t e);

/* Ends the process with one line on stderr ("txl: error: cuda emulator: ..."). */
void emu_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* One launch (README.md, "Counts"): a kernel or a GEMM call the host issued that ran. */
void emu_launched(void);

/* A call that makes the host wait for the device: counted, and with TXL_EMU_TRACE_SYNC=1 one
 * line on stderr naming it. */
void emu_host_sync(const char *what, size_t bytes);

/* ---- stream capture (emu_streams.cpp; README.md, "Stream capture and graphs") -------------- */
/* A node of a graph: one recorded operation, run by calling it. It owns copies of what it needs
 * (a kernel's arguments, a GEMM's scalars and settings); pointers to device memory are kept as
 * pointers, as a GPU's graph keeps them. */
/* One piece of a stream's work that may not complete at once (a collective of the emulated NCCL,
 * a wait for an event not yet reached): does what it can now and returns true once complete.
 * Called again, in place, until it does. */
typedef std::function<bool()> Step;

struct Node {
  std::function<void()> run;   /* an operation that completes when it returns, */
  std::function<Step()> async; /* or (when set) one that may not: the step of one execution */
  Node() {}
  template <class F, class = typename std::enable_if<!std::is_same<typename std::decay<F>::type, Node>::value>::type>
  Node(F f) : run(std::move(f)) {}
};

struct Capture; /* one capture sequence (emu_streams.cpp) */

struct CUstream_st {
  unsigned int flags;
  Capture *capture;      /* the capture this stream takes part in, NULL when it does not */
  long ops;              /* operations it enqueued in that capture */
  long joined;           /* of those, how many another stream of the capture waited for */
  std::deque<Step> work; /* outside a capture: the operations enqueued behind one that has not
                            completed yet, in order (empty: the stream is idle) */
};

/* An invalid operation attempted in capture c: c can only end with
 * cudaErrorStreamCaptureInvalidated. */
void emu_invalidate(Capture *c);

/* The legacy stream (handle 0) used while a capture includes a blocking stream (one created
 * without cudaStreamNonBlocking): the legacy stream would wait for it, an implicit dependency on
 * the capture. cudaErrorStreamCaptureImplicit, and (if invalidating) those captures are
 * invalidated. */
cudaError_t emu_legacy_use(bool invalidating = true);

/* A call that a capture in global mode forbids in the whole process (it is not stream-ordered,
 * or it waits for the device): cudaErrorStreamCaptureUnsupported while any capture is in
 * progress, and every capture is invalidated. */
cudaError_t emu_unsafe_call(void);

/* What to do with an operation enqueued on stream s: run it now, record it into s's capture, or
 * refuse it (*err: the legacy stream during a blocking capture, or a capture already
 * invalidated). */
enum Enqueue { ENQ_RUN, ENQ_RECORD, ENQ_DEFER, ENQ_FAIL };
/* ENQ_DEFER: s (not capturing) still has work that has not completed (README.md, "Work that
 * waits"): the operation goes behind it (emu_defer). Before it answers, work that can go on does. */
Enqueue emu_enqueue(cudaStream_t s, cudaError_t *err);

/* Appends n to the capture of s (emu_enqueue answered ENQ_RECORD). */
void emu_record(cudaStream_t s, Node n);

/* Appends n to the work of s (emu_enqueue answered ENQ_DEFER); it runs once what is before it
 * has completed. */
void emu_defer(cudaStream_t s, Node n);

/* Work that may not complete at once (the emulated NCCL's collectives) on stream s: outside a
 * capture, make()'s step is queued on s and run as far as it goes; in a capture, recorded (each
 * replay runs a fresh step). cudaSuccess, or the error emu_enqueue gave. */
cudaError_t emu_enqueue_async(cudaStream_t s, std::function<Step()> make);

/* Runs every stream's work as far as it can go now (cheap when no stream waits). */
void emu_progress(void);

/* The host waits until s has no work left (NULL: every stream; the legacy stream's rule is the
 * caller's). Blocks for as long as a collective on it takes: for ever if a peer never joins,
 * as a GPU would. */
void emu_drain(cudaStream_t s);

/* The legacy stream's wait: until no blocking stream (one created without cudaStreamNonBlocking)
 * has work left. */
void emu_drain_blocking(void);

/* A kernel or a GEMM that a graph's replay ran (txl_emu_graph_counts' graph_kernels). */
void emu_graph_kernel(void);

/* ---- the scheduler, for the warp-wide instructions (emu_fibers.cpp, for emu_ptx.cpp) ------- */
/* A warp-wide instruction (mma.sync, ldmatrix: number `instruction` of emu_exchange_name's
 * list): the running lane hands over `bytes` (<= EMU_WARP_PAYLOAD) and waits until every lane of
 * its full warp has (the checks of a shuffle: full warp, no lane returned, no lane at another
 * operation); returns the 32 lanes' payloads, valid until this lane's next warp operation. */
const unsigned char (*emu_warp_exchange(int instruction, const void *mine, size_t bytes))[EMU_WARP_PAYLOAD];
/* the name of warp-wide instruction i in the messages (emu_ptx.cpp) */
const char *emu_exchange_name(int i);
/* The running thread's linear index in its block; `what` names the call if outside a kernel. */
int emu_thread_linear(const char *what);
/* An error in the running kernel: ends the process with one line naming the kernel, the block
 * and the thread, as a failed barrier check does. */
void emu_kernel_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
/* [p, p + bytes) lies in the running block's dynamic shared memory. */
bool emu_in_dynamic_shared(const void *p, size_t bytes);
/* The running thread (linear index lin) returned: what it left undone is an error
 * (emu_ptx.cpp: cp.async copies never waited for). */
void emu_ptx_thread_done(int lin);

/* ---- memory (emu_runtime.cpp) --------------------------------------------------------------- */
/* [p, p + bytes) lies in one live cudaMalloc allocation. */
bool emu_in_device_memory(const void *p, size_t bytes);

#endif
