/* The CPU emulator of the CUDA runtime and cuBLAS subset of cuda_emu.h: the block scheduler with
 * one fiber per thread, barriers and shuffles, launch checks, memory, streams and events as
 * synchronous no-ops, stream capture into a list that cudaGraphLaunch replays (with the errors a
 * capture gives), and cublasSgemm / cublasGemmEx / cublasLtMatmul on OpenBLAS.
 *
 * Fibers. A thread of a block runs on a stack of its own from its start to its end (STACK_BYTES,
 * mmap'ed with a guard page below it, taken from a pool: stacks are made on demand, at most one
 * per thread of the largest block, and reused by every block and launch). Two ways to switch:
 *   asm       a hand-written x86-64 switch (callee-saved registers, MXCSR and the x87 control
 *             word): about ten instructions, no system call;
 *   ucontext  getcontext/makecontext/swapcontext of glibc: portable, but each switch makes a
 *             sigprocmask system call.
 * asm is the default on x86-64 Linux unless the process runs with a shadow stack (CET), which a
 * switch that "returns" into a fresh stack would violate; TXL_EMU_FIBERS=ucontext|asm in the
 * environment forces one (the self-test runs both).
 *
 * Scheduling is deterministic: the block's threads are started or resumed in linear thread
 * order, round after round; each runs until it waits at a barrier or returns. A barrier's last
 * arrival releases the waiters and goes on without switching. When a thread returns and the next
 * one in the round has not started yet, that one runs at once on the same stack, without a
 * switch (the order is the same as through the scheduler): a kernel without barriers costs two
 * switches per block, not per thread. A round in which no thread can run while some have not
 * returned is a deadlock, reported with what each group waits at.
 * TXL_EMU_ORDER=reverse runs the rounds in decreasing thread order instead. A kernel whose result
 * depends on the order (a thread reading what another writes with no barrier between them: a
 * race on a GPU) gives different results in the two orders, so the tests run both.
 *
 * AddressSanitizer: every switch is announced with __sanitizer_start_switch_fiber /
 * __sanitizer_finish_switch_fiber, so the kernels run instrumented under -fsanitize=address
 * (an out-of-bounds access in a kernel is reported like any other). */
#include "kernels/emu/cuda_emu.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <cblas.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/emu/emu_arch.h"

#if defined(__SANITIZE_ADDRESS__)
#define TXL_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TXL_EMU_ASAN 1
#endif
#endif
#ifdef TXL_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && defined(__linux__)
#define TXL_EMU_HAVE_ASM 1
#endif

/* ---- built-in variables ------------------------------------------------------------------- */
uint3 threadIdx = {0, 0, 0};
uint3 blockIdx = {0, 0, 0};
dim3 blockDim;
dim3 gridDim;

/* ---- the emulated device: the limits of TXL_EMU_ARCH's architecture (emu_arch.cpp) -------- */
enum {
  STACK_BYTES = 256 * 1024,    /* per fiber; only the pages a kernel touches are committed */
  WARP = 32,
};

/* ---- errors ------------------------------------------------------------------------------ */
static cudaError_t g_last_error = cudaSuccess;

static cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) g_last_error = e;
  return e;
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
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
/* The live allocations, start -> bytes: cudaMalloc's (device memory) and cudaMallocHost's
 * (page-locked host memory), to tell what a copy or a memset touches. */
static std::map<uintptr_t, size_t> g_device_mem, g_pinned;

static void launched(void) { g_launches++; }

/* A call that makes the host wait for the device: counted, and with TXL_EMU_TRACE_SYNC=1 one
 * line on stderr naming it. */
static void host_sync(const char *what, size_t bytes) {
  g_syncs++;
  if (g_trace_sync < 0) {
    const char *e = getenv("TXL_EMU_TRACE_SYNC");
    if (!e || !*e || strcmp(e, "0") == 0) g_trace_sync = 0;
    else if (strcmp(e, "1") == 0) g_trace_sync = 1;
    else die("TXL_EMU_TRACE_SYNC=%s: expected 0 or 1", e);
  }
  if (g_trace_sync) fprintf(stderr, "cuda-emu: host synchronisation %ld: %s (%zu bytes)\n", g_syncs, what, bytes);
}

static bool in_range(const std::map<uintptr_t, size_t> &m, const void *p) {
  const uintptr_t a = (uintptr_t)p;
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a < it->first + (it->second ? it->second : 1);
}

extern "C" void txl_emu_counts(long *launches, long *syncs) {
  *launches = g_launches;
  *syncs = g_syncs;
}

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

struct CUstream_st {
  unsigned int flags;
  Capture *capture; /* the capture this stream takes part in, NULL when it does not */
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
  Nodes nodes;
};
struct CUgraphExec_st {
  Nodes nodes;
};

static std::vector<Capture *> g_captures; /* the captures in progress */
static unsigned long long g_capture_ids = 0;
static long g_graph_launches = 0, g_graph_kernels = 0;

extern "C" void txl_emu_graph_counts(long *graph_launches, long *graph_kernels) {
  *graph_launches = g_graph_launches;
  *graph_kernels = g_graph_kernels;
}

static Capture *live_capture(unsigned long long id) {
  for (Capture *c : g_captures)
    if (c->id == id) return c;
  return NULL;
}

static void invalidate(Capture *c) { c->invalidated = true; }

/* The legacy stream (handle 0) used while a capture includes a blocking stream (one created
 * without cudaStreamNonBlocking): the legacy stream would wait for it, an implicit dependency on
 * the capture. cudaErrorStreamCaptureImplicit, and those captures are invalidated. */
static cudaError_t legacy_use(bool invalidating = true) {
  bool hit = false;
  for (Capture *c : g_captures)
    for (cudaStream_t s : c->streams)
      if (!(s->flags & cudaStreamNonBlocking)) {
        if (invalidating) invalidate(c);
        hit = true;
        break;
      }
  return hit ? set_error(cudaErrorStreamCaptureImplicit) : cudaSuccess;
}

/* A call that a capture in global mode forbids in the whole process (it is not stream-ordered,
 * or it waits for the device): cudaErrorStreamCaptureUnsupported while any capture is in
 * progress, and every capture is invalidated. */
static cudaError_t unsafe_call(void) {
  if (g_captures.empty()) return cudaSuccess;
  for (Capture *c : g_captures) invalidate(c);
  return set_error(cudaErrorStreamCaptureUnsupported);
}

/* A synchronous call of the legacy stream (cudaMemcpy, cudaMemset, cudaMemset2D): the legacy
 * stream's rule, then the global mode's. */
static cudaError_t legacy_sync_call(void) {
  const cudaError_t e = legacy_use();
  return e != cudaSuccess ? e : unsafe_call();
}

/* What to do with an operation enqueued on stream s: run it now, record it into s's capture, or
 * refuse it (*err: the legacy stream during a blocking capture, or a capture already
 * invalidated). */
enum Enqueue { ENQ_RUN, ENQ_RECORD, ENQ_FAIL };

static Enqueue enqueue(cudaStream_t s, cudaError_t *err) {
  *err = cudaSuccess;
  if (!s) {
    *err = legacy_use();
    return *err == cudaSuccess ? ENQ_RUN : ENQ_FAIL;
  }
  if (!s->capture) return ENQ_RUN;
  if (s->capture->invalidated) {
    *err = set_error(cudaErrorStreamCaptureInvalidated);
    return ENQ_FAIL;
  }
  return ENQ_RECORD;
}

static void record(cudaStream_t s, Node n) {
  s->capture->nodes.push_back(std::move(n));
  s->ops++;
}

static void replay(const std::vector<Node> &nodes) {
  for (const Node &n : nodes) n();
}

/* ---- fibers -------------------------------------------------------------------------------- */
enum FiberState { NOT_STARTED, RUNNABLE, WAIT_BLOCK, WAIT_WARP, DONE };

struct Stack {
  char *base; /* usable [base, base + STACK_BYTES); a guard page below */
  char *top;  /* 16-byte aligned start, staggered by 64 bytes from one stack to the next so
               * that the hot top frames of many fibers do not share the same L1 cache sets */
};

/* One thread of the running block. */
struct Fiber {
  void *sp;         /* asm: the saved stack pointer while switched out        */
  ucontext_t uc;    /* ucontext: the saved context                            */
  Stack *stack;     /* from its start to its end (NULL otherwise)             */
  void *asan_fake;  /* ASan's fake stack of this fiber while switched out     */
  uint3 tid;
  FiberState state;
};

/* One warp's barrier: the lanes arrive, the last one releases them. A shuffle writes its value
 * into slot[gen & 1][lane] and reads the partner's from the same half after the release; the
 * next operation writes the other half, and cannot complete (so nobody can write this half
 * again) before every lane has arrived at it, i.e. has read its result here. */
struct Warp {
  int size;     /* lanes in this warp (32 unless the block size is not a multiple of 32) */
  int arrived;
  int kind;     /* operation of the current arrivals: 0 xor, 1 down, 2 index, 3 __syncwarp */
  int width;
  int done;     /* lanes that returned */
  unsigned gen;
  uint64_t slot[2][WARP];
};

static const char *const kOpName[] = {"__shfl_xor_sync", "__shfl_down_sync", "__shfl_sync",
                                      "__syncwarp"};

enum Backend { BACKEND_UNSET, BACKEND_ASM, BACKEND_UCONTEXT };

static struct {
  Backend backend;
  std::vector<Fiber *> fibers; /* one per thread of the block, grown on demand, never freed */
  std::vector<Stack *> free_stacks; /* the pool (stacks are never unmapped) */
  int nstacks;
  /* the running launch and block */
  const TxlEmuLaunchDesc *launch;
  int nthreads;
  bool reverse;             /* TXL_EMU_ORDER=reverse: rounds in decreasing thread order */
  int idx;                  /* the scheduler's position in the round (see at_round)      */
  bool progress;            /* a thread ran in this round */
  Fiber *cur;               /* the running fiber, NULL in the scheduler */
  int block_arrived;        /* threads waiting at __syncthreads */
  int block_first_waiter;   /* linear index of the first of them */
  int done;                 /* threads of the block that returned */
  int first_done;           /* linear index of the first of them */
  std::vector<Warp> warps;
  unsigned char *dyn_shared;
  /* the scheduler's side of a switch */
  void *sched_sp;
  ucontext_t sched_uc;
  void *sched_fake;
  const void *main_bottom;
  size_t main_size;
  /* an error raised in a fiber, reported by the scheduler on its own stack */
  bool failed;
  char error[1536];
} S;

static std::map<const void *, int> g_max_dynamic_shared; /* cudaFuncSetAttribute */

#ifdef TXL_EMU_HAVE_ASM
extern "C" void txl_emu_switch(void **save_sp, void *new_sp);
extern "C" void txl_emu_trampoline(void);
/* txl_emu_switch: pushes the callee-saved registers and the FP control words on the current
 * stack, saves the stack pointer into *save_sp, loads new_sp and pops the same from there.
 * A new fiber's stack is prepared by start_fiber so that the final `ret` lands in
 * txl_emu_trampoline with r12 = the entry function. */
asm(R"(
  .text
  .p2align 4
  .globl txl_emu_switch
  .hidden txl_emu_switch
  .type txl_emu_switch, @function
txl_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size txl_emu_switch, .-txl_emu_switch

  .p2align 4
  .globl txl_emu_trampoline
  .hidden txl_emu_trampoline
  .type txl_emu_trampoline, @function
txl_emu_trampoline:
  callq *%r12
  ud2
  .size txl_emu_trampoline, .-txl_emu_trampoline
)");

/* 1 when this process runs with a CET shadow stack (arch_prctl ARCH_SHSTK_STATUS, Linux 6.6+;
 * older kernels reject the request, and then there is none). */
static bool shadow_stack_enabled(void) {
  unsigned long features = 0;
  if (syscall(SYS_arch_prctl, 0x5005 /* ARCH_SHSTK_STATUS */, &features) != 0) return false;
  return (features & 1u) != 0; /* ARCH_SHSTK_SHSTK */
}
#endif

static void read_environment(void) {
  (void)txl_emu_arch(); /* an unknown TXL_EMU_ARCH ends here, before any launch */
  const char *order = getenv("TXL_EMU_ORDER");
  if (order && order[0] && strcmp(order, "forward") != 0 && strcmp(order, "reverse") != 0)
    die("TXL_EMU_ORDER=%s: expected forward or reverse", order);
  S.reverse = order && strcmp(order, "reverse") == 0;
  const char *env = getenv("TXL_EMU_FIBERS");
  const bool want_ucontext = env && strcmp(env, "ucontext") == 0;
  const bool want_asm = env && strcmp(env, "asm") == 0;
  if (env && !want_ucontext && !want_asm && env[0])
    die("TXL_EMU_FIBERS=%s: expected asm or ucontext", env);
#ifdef TXL_EMU_HAVE_ASM
  if (want_asm && shadow_stack_enabled())
    die("TXL_EMU_FIBERS=asm: this process runs with a shadow stack; use ucontext");
  S.backend = want_ucontext || shadow_stack_enabled() ? BACKEND_UCONTEXT : BACKEND_ASM;
#else
  if (want_asm) die("TXL_EMU_FIBERS=asm: the asm switch exists for x86-64 Linux only");
  S.backend = BACKEND_UCONTEXT;
#endif
}

extern "C" const char *txl_emu_fiber_backend(void) {
  if (S.backend == BACKEND_UNSET) read_environment();
  return S.backend == BACKEND_ASM ? "asm" : "ucontext";
}

extern "C" const char *txl_emu_order(void) {
  if (S.backend == BACKEND_UNSET) read_environment();
  return S.reverse ? "reverse" : "forward";
}

static void fiber_slots(int n) {
  while ((int)S.fibers.size() < n) {
    Fiber *f = new Fiber();
    if (getcontext(&f->uc) != 0) die("getcontext failed: %s", strerror(errno));
    S.fibers.push_back(f);
  }
}

static Stack *take_stack(void) {
  if (!S.free_stacks.empty()) {
    Stack *st = S.free_stacks.back();
    S.free_stacks.pop_back();
    return st;
  }
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char *m = (char *)mmap(NULL, STACK_BYTES + page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) die("cannot map a fiber stack: %s", strerror(errno));
  if (mprotect(m, page, PROT_NONE) != 0) /* guard page: an overflow faults */
    die("cannot protect a fiber stack's guard page: %s", strerror(errno));
  Stack *st = new Stack();
  st->base = m + page;
  st->top = st->base + STACK_BYTES - 64 * (size_t)(S.nstacks++ % 64);
  return st;
}

static inline void asan_start(void **fake_save, const void *bottom, size_t size) {
#ifdef TXL_EMU_ASAN
  __sanitizer_start_switch_fiber(fake_save, bottom, size);
#else
  (void)fake_save, (void)bottom, (void)size;
#endif
}

static inline void asan_finish(void *fake, const void **bottom_old, size_t *size_old) {
#ifdef TXL_EMU_ASAN
  __sanitizer_finish_switch_fiber(fake, bottom_old, size_old);
#else
  (void)fake, (void)bottom_old, (void)size_old;
#endif
}

/* From the running fiber back to the scheduler. `final`: the fiber has returned and will not be
 * resumed (ASan then drops its fake stack). */
static void to_scheduler(bool final) {
  Fiber *f = S.cur;
  asan_start(final ? NULL : &f->asan_fake, S.main_bottom, S.main_size);
#ifdef TXL_EMU_HAVE_ASM
  if (S.backend == BACKEND_ASM)
    txl_emu_switch(&f->sp, S.sched_sp);
  else
#endif
    swapcontext(&f->uc, &S.sched_uc);
  asan_finish(f->asan_fake, &S.main_bottom, &S.main_size);
}

static int linear_of(const Fiber *f) {
  return (int)(f->tid.x + blockDim.x * (f->tid.y + blockDim.y * f->tid.z));
}

/* An error inside a kernel: recorded here, reported by the scheduler (on its own stack). */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!S.cur) die("%s", msg);
  const uint3 t = S.cur->tid;
  snprintf(S.error, sizeof S.error, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s",
           S.launch->name, blockIdx.x, blockIdx.y, blockIdx.z, t.x, t.y, t.z, msg);
  S.failed = true;
  to_scheduler(true);
  abort(); /* not resumed */
}

static Fiber *current(const char *what) {
  if (!S.cur) die("%s called outside a kernel", what);
  return S.cur;
}

/* The running thread returned from the kernel. */
static void thread_done(Fiber *f) {
  const int lin = linear_of(f);
  Warp &w = S.warps[(size_t)(lin / WARP)];
  f->state = DONE;
  if (S.done++ == 0) S.first_done = lin;
  w.done++;
  if (S.block_arrived > 0) {
    const uint3 t = S.fibers[(size_t)S.block_first_waiter]->tid;
    fail("returned while %d thread(s) wait at __syncthreads (the first: thread (%u,%u,%u)): "
         "every thread of a block must reach each __syncthreads",
         S.block_arrived, t.x, t.y, t.z);
  }
  if (w.arrived > 0)
    fail("returned (lane %d of warp %d) while %d lane(s) of its warp wait in %s: all 32 lanes "
         "must take part in a warp operation with the full mask",
         lin % WARP, lin / WARP, w.arrived, kOpName[w.kind]);
}

/* The fiber at position pos of a round. */
static Fiber *at_round(int pos) { return S.fibers[(size_t)(S.reverse ? S.nthreads - 1 - pos : pos)]; }

/* Every fiber starts here, on a fresh stack. It runs its thread and, while the next thread of
 * the round has not started, that one too on the same stack (see the file comment). */
static void fiber_main(void) {
  asan_finish(NULL, &S.main_bottom, &S.main_size);
  for (;;) {
    S.launch->run(S.launch->ctx);
    Fiber *f = S.cur;
    thread_done(f);
    const int next = S.idx + 1;
    if (next >= S.nthreads || at_round(next)->state != NOT_STARTED) break;
    Fiber *g = at_round(next);
    g->stack = f->stack;
    f->stack = NULL;
    g->state = RUNNABLE;
    S.idx = next;
    S.cur = g;
    threadIdx = g->tid;
  }
  to_scheduler(true);
  abort(); /* not resumed */
}

#ifdef TXL_EMU_HAVE_ASM
/* The initial frame txl_emu_switch pops: FP control words, r15, r14, r13, r12 (the entry),
 * rbx, rbp, then the return address (the trampoline). After the `ret` the stack pointer is
 * 16-byte aligned, so the trampoline's call enters fiber_main with the ABI's alignment. */
static void prepare_asm(Fiber *f) {
  uintptr_t top = ((uintptr_t)f->stack->top) & ~(uintptr_t)15;
  uint64_t *frame = (uint64_t *)(top - 64);
  uint32_t mxcsr;
  uint16_t fpucw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpucw));
  frame[0] = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
  frame[1] = 0;                              /* r15 */
  frame[2] = 0;                              /* r14 */
  frame[3] = 0;                              /* r13 */
  frame[4] = (uint64_t)(uintptr_t)&fiber_main; /* r12 */
  frame[5] = 0;                              /* rbx */
  frame[6] = 0;                              /* rbp: the end of the frame chain */
  frame[7] = (uint64_t)(uintptr_t)&txl_emu_trampoline;
  f->sp = frame;
}
#endif

static void prepare_ucontext(Fiber *f) {
  f->uc.uc_stack.ss_sp = f->stack->base;
  f->uc.uc_stack.ss_size = (size_t)(f->stack->top - f->stack->base);
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
}

/* Runs f until a thread switches back (f, or a later thread started on f's stack); returns
 * that thread. */
static Fiber *resume(Fiber *f) {
  S.cur = f;
  threadIdx = f->tid;
  asan_start(&S.sched_fake, f->stack->base, STACK_BYTES);
#ifdef TXL_EMU_HAVE_ASM
  if (S.backend == BACKEND_ASM)
    txl_emu_switch(&S.sched_sp, f->sp);
  else
#endif
    swapcontext(&S.sched_uc, &f->uc);
  asan_finish(S.sched_fake, NULL, NULL);
  Fiber *back = S.cur;
  S.cur = NULL;
  if (S.failed) die("%s", S.error);
  return back;
}

/* Describes a block in which no fiber can run. */
static void deadlock(void) {
  int at_block = 0, at_warp = 0, first_warp = -1;
  for (int i = 0; i < S.nthreads; i++) {
    const FiberState st = S.fibers[(size_t)i]->state;
    at_block += st == WAIT_BLOCK;
    if (st == WAIT_WARP) {
      if (first_warp < 0) first_warp = i / WARP;
      at_warp++;
    }
  }
  die("kernel %s, block (%u,%u,%u): deadlock: %d thread(s) wait at __syncthreads, %d at a warp "
      "operation (the first in warp %d, at %s), %d returned: the block is split between "
      "__syncthreads and a warp operation",
      S.launch->name, blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp, first_warp,
      first_warp >= 0 ? kOpName[S.warps[(size_t)first_warp].kind] : "-", S.done);
}

static void run_block(void) {
  const int n = S.nthreads;
  S.block_arrived = 0;
  S.done = 0;
  for (size_t w = 0; w < S.warps.size(); w++) {
    Warp &x = S.warps[w];
    x.arrived = 0;
    x.done = 0;
    x.gen = 0;
  }
  for (int i = 0; i < n; i++) {
    Fiber *f = S.fibers[(size_t)i];
    f->state = NOT_STARTED;
    f->asan_fake = NULL;
  }
  while (S.done < n) {
    S.progress = false;
    for (S.idx = 0; S.idx < n; S.idx++) { /* fiber_main may advance S.idx */
      Fiber *f = at_round(S.idx);
      if (f->state == NOT_STARTED) {
        f->stack = take_stack();
        f->state = RUNNABLE;
#ifdef TXL_EMU_HAVE_ASM
        if (S.backend == BACKEND_ASM)
          prepare_asm(f);
        else
#endif
          prepare_ucontext(f);
      } else if (f->state != RUNNABLE) {
        continue;
      }
      S.progress = true;
      Fiber *back = resume(f);
      if (back->state == DONE) { /* its stack is free again */
        S.free_stacks.push_back(back->stack);
        back->stack = NULL;
      }
    }
    if (!S.progress) deadlock();
  }
}

/* The configuration checks of a launch on the device; false (and the runtime's error) when the
 * kernel may not run. */
static bool launch_ok(const TxlEmuLaunchDesc &d) {
  const dim3 b = d.block, g = d.grid;
  const uint64_t threads = (uint64_t)b.x * b.y * b.z;
  const bool block_ok = b.x >= 1 && b.y >= 1 && b.z >= 1 && b.x <= 1024 && b.y <= 1024 &&
                        b.z <= 64 && threads <= (uint64_t)txl_emu_arch().threads_per_block;
  const bool grid_ok = g.x >= 1 && g.y >= 1 && g.z >= 1 && g.x <= 2147483647u && g.y <= 65535 &&
                       g.z <= 65535;
  const auto attr = g_max_dynamic_shared.find(d.kernel);
  const size_t shared_limit = attr == g_max_dynamic_shared.end() ? (size_t)txl_emu_arch().shared_per_block
                                                                 : (size_t)attr->second;
  if (!block_ok || !grid_ok) {
    set_error(cudaErrorInvalidConfiguration);
    return false;
  }
  if (d.shared > shared_limit) { /* what the driver reports: "invalid argument" */
    set_error(cudaErrorInvalidValue);
    return false;
  }
  return true;
}

/* Runs the whole grid of a launch whose configuration passed the checks. */
static void run_grid(const TxlEmuLaunchDesc &d) {
  const dim3 b = d.block, g = d.grid;
  const int n = (int)((uint64_t)b.x * b.y * b.z);
  fiber_slots(n);
  const int nwarps = (n + WARP - 1) / WARP;
  if ((int)S.warps.size() < nwarps) S.warps.resize((size_t)nwarps);
  for (int w = 0; w < nwarps; w++)
    S.warps[(size_t)w].size = w < nwarps - 1 || n % WARP == 0 ? WARP : n % WARP;
  /* exactly `shared` bytes, so that AddressSanitizer sees an access past them */
  void *dyn = NULL;
  if (posix_memalign(&dyn, 16, d.shared) != 0 || (!dyn && d.shared))
    die("out of host memory for %zu bytes of dynamic shared memory", d.shared);

  S.launch = &d;
  S.nthreads = n;
  S.dyn_shared = (unsigned char *)dyn;
  blockDim = b;
  gridDim = g;
  for (int i = 0; i < n; i++) /* linear index = x + bx (y + by z) */
    S.fibers[(size_t)i]->tid =
        uint3{(unsigned)i % b.x, ((unsigned)i / b.x) % b.y, (unsigned)i / (b.x * b.y)};
  for (unsigned z = 0; z < g.z; z++)
    for (unsigned y = 0; y < g.y; y++)
      for (unsigned x = 0; x < g.x; x++) {
        blockIdx = uint3{x, y, z};
        if (d.shared) memset(dyn, 0xFF, d.shared); /* NaN in every float */
        run_block();
      }
  S.launch = NULL;
  S.dyn_shared = NULL;
  free(dyn);
}

void txl_emu_run(const TxlEmuLaunchDesc &d) {
  if (S.launch)
    die("kernel %s launched from inside kernel %s (device-side launches are not emulated)",
        d.name, S.launch->name);
  if (S.backend == BACKEND_UNSET) read_environment();
  cudaError_t err;
  const Enqueue q = enqueue(d.stream, &err);
  if (q == ENQ_FAIL) return; /* the error is cudaGetLastError's */
  if (!launch_ok(d)) {
    if (q == ENQ_RECORD) invalidate(d.stream->capture); /* a failed launch in a capture */
    return;
  }
  if (q == ENQ_RECORD) { /* the descriptor and a copy of the arguments, run at each replay */
    const TxlEmuLaunchDesc saved = d;
    std::shared_ptr<void> args(d.clone(d.ctx), d.destroy);
    record(d.stream, [saved, args]() {
      TxlEmuLaunchDesc r = saved;
      r.ctx = args.get();
      if (!launch_ok(r)) return; /* cudaFuncSetAttribute may have lowered the limit since */
      g_graph_kernels++;
      run_grid(r);
    });
    return;
  }
  launched();
  run_grid(d);
}

void *txl_emu_dynamic_shared(void) {
  current("TXL_DYNAMIC_SHARED");
  return S.dyn_shared;
}

/* ---- barriers and shuffles ----------------------------------------------------------------- */
void __syncthreads(void) {
  Fiber *f = current("__syncthreads");
  const int lin = linear_of(f);
  if (S.done > 0) {
    const uint3 t = S.fibers[(size_t)S.first_done]->tid;
    fail("reached __syncthreads after thread (%u,%u,%u) returned: every thread of a block must "
         "reach each __syncthreads",
         t.x, t.y, t.z);
  }
  if (S.block_arrived == 0) S.block_first_waiter = lin;
  if (++S.block_arrived == S.nthreads) { /* the last one: release the others, go on */
    S.block_arrived = 0;
    for (int i = 0; i < S.nthreads; i++)
      if (S.fibers[(size_t)i]->state == WAIT_BLOCK) S.fibers[(size_t)i]->state = RUNNABLE;
    return;
  }
  f->state = WAIT_BLOCK;
  to_scheduler(false);
}

/* Arrival of the running lane at a warp operation; returns the half of the slots it used. */
static unsigned warp_arrive(int kind, unsigned int mask, uint64_t bits, int width) {
  Fiber *f = current(kOpName[kind]);
  const int lin = linear_of(f), lane = lin % WARP;
  Warp &w = S.warps[(size_t)(lin / WARP)];
  if (mask != 0xffffffffu)
    fail("%s with mask 0x%08x: only the full mask 0xffffffff is supported", kOpName[kind], mask);
  if (width < 1 || width > WARP || (width & (width - 1)) != 0)
    fail("%s with width %d: must be a power of 2 in [1, 32]", kOpName[kind], width);
  if (w.size != WARP)
    fail("%s in a partial warp (%d lanes; the block has %d threads, not a multiple of 32): "
         "the full mask names lanes that do not exist",
         kOpName[kind], w.size, S.nthreads);
  if (w.done > 0)
    fail("%s after a lane of its warp returned: all 32 lanes must take part", kOpName[kind]);
  if (w.arrived == 0) {
    w.kind = kind;
    w.width = width;
  } else if (w.kind != kind || w.width != width) {
    fail("%s (width %d) while other lanes of the warp wait in %s (width %d): divergent warp "
         "operations",
         kOpName[kind], width, kOpName[w.kind], w.width);
  }
  const unsigned half = w.gen & 1u;
  w.slot[half][lane] = bits;
  if (++w.arrived == w.size) { /* the last lane: release the warp, go on */
    w.arrived = 0;
    w.gen++;
    const int first = lin - lane;
    for (int i = first; i < first + w.size; i++)
      if (S.fibers[(size_t)i]->state == WAIT_WARP) S.fibers[(size_t)i]->state = RUNNABLE;
    return half;
  }
  f->state = WAIT_WARP;
  to_scheduler(false);
  return half;
}

void __syncwarp(unsigned int mask) { warp_arrive(3, mask, 0, WARP); }

uint64_t txl_emu_shuffle(int kind, unsigned int mask, uint64_t bits, int arg, int width) {
  if (kind == 0 && (arg < 0 || arg >= WARP))
    fail("__shfl_xor_sync with lane mask %d: must be in [0, 32)", arg);
  const unsigned half = warp_arrive(kind, mask, bits, width);
  const int lin = linear_of(S.cur), lane = lin % WARP;
  const int seg = lane & ~(width - 1); /* first lane of this lane's group of `width` */
  int src;
  if (kind == 0) { /* xor: a partner in a later group gives the lane its own value */
    src = lane ^ arg;
    if (src >= seg + width) src = lane;
  } else if (kind == 1) { /* down: from lane + delta, own value past the group's end */
    const int64_t s = (int64_t)lane + (unsigned int)arg;
    src = s >= seg + width ? lane : (int)s;
  } else { /* index: srcLane modulo width within the group */
    src = seg + (arg & (width - 1));
  }
  return S.warps[(size_t)(lin / WARP)].slot[half][src];
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

/* ---- cuBLAS ------------------------------------------------------------------------------ */
/* A GEMM call that succeeded is one launch (a GPU runs at least one kernel for it). */
static cublasStatus_t counted(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) launched();
  return st;
}

struct cublasContext {
  cublasMath_t math;
  cublasPointerMode_t pointer_mode;
  cudaStream_t stream;
  std::vector<float> a, b, c; /* fp32 copies of operands that are rounded (TF32) or widened (bf16, fp16) */
};

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, NULL, {}, {}, {}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_PEDANTIC_MATH &&
      mode != CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown status";
}

/* How an operand reaches the fp32 product: as it is (fp32), rounded to TF32 (fp32 operands of a
 * TF32 GEMM), or widened from bf16 or fp16 (exact). */
enum Operand { OPERAND_F32, OPERAND_TF32, OPERAND_BF16, OPERAND_F16 };

/* The storage of a C / D matrix or a bias: fp32, bf16 or fp16 (widened exactly when read, rounded
 * to nearest even once when stored: kernels/common/bf16.h, fp16.h). */
enum Store { STORE_F32, STORE_BF16, STORE_F16 };

static Store store_of(cudaDataType t) { return t == CUDA_R_16BF ? STORE_BF16 : t == CUDA_R_16F ? STORE_F16 : STORE_F32; }

static float load_elem(const void *X, size_t at, Store s) {
  switch (s) {
    case STORE_BF16: return txl_bf16_to_float(static_cast<const txl_bf16 *>(X)[at]);
    case STORE_F16: return txl_fp16_to_float(static_cast<const txl_fp16 *>(X)[at]);
    case STORE_F32: break;
  }
  return static_cast<const float *>(X)[at];
}

static void store_elem(void *X, size_t at, Store s, float v) {
  switch (s) {
    case STORE_BF16: static_cast<txl_bf16 *>(X)[at] = txl_bf16_from_float(v); return;
    case STORE_F16: static_cast<txl_fp16 *>(X)[at] = txl_fp16_from_float(v); return;
    case STORE_F32: break;
  }
  static_cast<float *>(X)[at] = v;
}

/* x rounded to TF32 (8-bit exponent, 10-bit mantissa: 13 bits dropped) to nearest, ties away
 * from zero. Infinities and NaNs pass unchanged; a value that rounds past FLT_MAX becomes
 * infinity. */
static float round_tf32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&x, &u, 4);
  return x;
}

/* A column-major rows x cols matrix X (leading dimension ld) as fp32 values, packed (ld = rows)
 * into buf: TF32-rounded or bf16- / fp16-widened per `kind` (not OPERAND_F32, which needs no
 * copy). */
static const float *operand_copy(std::vector<float> &buf, const void *X, int rows, int cols, int ld,
                                 Operand kind) {
  buf.resize((size_t)rows * (size_t)cols);
  for (int j = 0; j < cols; j++)
    for (int i = 0; i < rows; i++) {
      const size_t at = (size_t)j * ld + i;
      buf[(size_t)j * rows + i] = kind == OPERAND_BF16  ? load_elem(X, at, STORE_BF16)
                                  : kind == OPERAND_F16 ? load_elem(X, at, STORE_F16)
                                                        : round_tf32(static_cast<const float *>(X)[at]);
    }
  return buf.data();
}

static CBLAS_TRANSPOSE cblas_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; /* C = T for real matrices */
}

/* What cublasLtMatmul's BIAS and RELU_BIAS epilogues add to the fp32 result before it is
 * stored: bias[i] (fp32, or bf16 / fp16 widened) on row i, then max(x, 0) if relu (a NaN stays
 * NaN). */
struct BiasEpilogue {
  const void *bias;
  Store bias_store;
  bool relu;
};

/* The argument checks of a GEMM (what cuBLAS refuses before it launches anything). */
static cublasStatus_t gemm_args(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                int n, int k, const void *alpha, int lda, int ldb, const void *beta, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool op_ok = (transa == CUBLAS_OP_N || transa == CUBLAS_OP_T || transa == CUBLAS_OP_C) &&
                     (transb == CUBLAS_OP_N || transb == CUBLAS_OP_T || transb == CUBLAS_OP_C);
  const int a_rows = transa == CUBLAS_OP_N ? m : k;
  const int b_rows = transb == CUBLAS_OP_N ? k : n;
  if (!op_ok || m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) ||
      ldb < (b_rows > 1 ? b_rows : 1) || ldc < (m > 1 ? m : 1) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

/* A cuBLAS / cuBLASLt call on `stream` (README.md, "Stream capture and graphs"): false when it
 * is to run now; true when it was handled here, with *st: refused (the stream cannot take work:
 * CUBLAS_STATUS_EXECUTION_FAILED, as when cuBLAS cannot launch its kernel; or `check` failed), or
 * recorded into the stream's capture. The record keeps a copy of the handle's settings (its own
 * scratch) and, in host pointer mode, the VALUES of alpha and beta read now; in device pointer
 * mode the pointers, read at each replay. `call(handle, alpha, beta)` runs the GEMM. */
template <class Check, class Call>
static bool blas_enqueue(cudaStream_t stream, const cublasContext &settings, const void *alpha, const void *beta,
                         Check check, Call call, cublasStatus_t *st) {
  cudaError_t err;
  const Enqueue q = enqueue(stream, &err);
  if (q == ENQ_RUN) return false;
  if (q == ENQ_FAIL) {
    *st = CUBLAS_STATUS_EXECUTION_FAILED;
    return true;
  }
  *st = check();
  if (*st != CUBLAS_STATUS_SUCCESS) return true;
  if (!alpha || !beta) {
    *st = CUBLAS_STATUS_INVALID_VALUE;
    return true;
  }
  auto h = std::make_shared<cublasContext>(
      cublasContext{settings.math, settings.pointer_mode, settings.stream, {}, {}, {}});
  const bool device = settings.pointer_mode == CUBLAS_POINTER_MODE_DEVICE;
  const float al = device ? 0.0f : *static_cast<const float *>(alpha);
  const float be = device ? 0.0f : *static_cast<const float *>(beta);
  record(stream, [h, device, alpha, beta, al, be, call]() {
    const cublasStatus_t s = call(h.get(), device ? alpha : &al, device ? beta : &be);
    if (s != CUBLAS_STATUS_SUCCESS) die("a GEMM of a graph failed at its replay: %s", cublasGetStatusName(s));
    g_graph_kernels++;
  });
  return true;
}

/* Column-major C = alpha op(A) op(B) + beta C: A and B as `operand` says, C fp32 or (c_store)
 * bf16 / fp16: read widened (only when beta != 0, as BLAS reads C), the fp32 result (plus the
 * epilogue's bias, if any, in fp32) rounded to nearest even when stored (fp16: a result past
 * 65504 becomes infinity, a tiny one subnormal or zero, kernels/common/fp16.h). */
static cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const void *A, int lda, const void *B, int ldb, const float *beta,
                           void *C, int ldc, Operand operand, Store c_store,
                           const BiasEpilogue *epilogue = NULL) {
  const cublasStatus_t st = gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  const float al = *alpha, be = *beta; /* host or device pointer: the same memory here */
  /* C as fp32: C itself, or a packed widened copy (ld = m) of a bf16 / fp16 C */
  float *c32 = static_cast<float *>(C);
  int ld32 = ldc;
  if (c_store != STORE_F32) {
    handle->c.assign((size_t)m * (size_t)n, 0.0f);
    if (be != 0.0f)
      for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) handle->c[(size_t)j * m + i] = load_elem(C, (size_t)j * ldc + i, c_store);
    c32 = handle->c.data();
    ld32 = m;
  }
  if (k == 0 || al == 0.0f) { /* C = beta C, without reading C when beta == 0 */
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        float *c = &c32[(size_t)j * ld32 + i];
        *c = be == 0.0f ? 0.0f : be * *c;
      }
  } else {
    const float *a32 = static_cast<const float *>(A), *b32 = static_cast<const float *>(B);
    if (operand != OPERAND_F32) {
      a32 = operand_copy(handle->a, A, a_rows, a_cols, lda, operand);
      lda = a_rows;
      b32 = operand_copy(handle->b, B, b_rows, b_cols, ldb, operand);
      ldb = b_rows;
    }
    cblas_sgemm(CblasColMajor, cblas_op(transa), cblas_op(transb), m, n, k, al, a32, lda, b32, ldb,
                be, c32, ld32);
  }
  if (epilogue)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        const float b = load_elem(epilogue->bias, (size_t)i, epilogue->bias_store);
        float *c = &c32[(size_t)j * ld32 + i];
        const float x = *c + b;
        *c = epilogue->relu && x < 0.0f ? 0.0f : x;
      }
  if (c_store != STORE_F32)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) store_elem(C, (size_t)j * ldc + i, c_store, c32[(size_t)j * m + i]);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Operand o = handle->math == CUBLAS_TF32_TENSOR_OP_MATH ? OPERAND_TF32 : OPERAND_F32;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return gemm(h, transa, transb, m, n, k, (const float *)al, A, lda, B, ldb, (const float *)be, C, ldc, o,
                STORE_F32);
  };
  auto check = [&]() { return gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc); };
  cublasStatus_t st;
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta));
}

/* The operands' path of cublasGemmEx's type combination (*o), or why it is refused. */
static cublasStatus_t gemm_ex_plan(cublasHandle_t handle, cudaDataType Atype, cudaDataType Btype, cudaDataType Ctype,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo, Operand *out) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_PEDANTIC &&
      computeType != CUBLAS_COMPUTE_32F_FAST_TF32)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F && Ctype == CUDA_R_32F;
  const bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
                    (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F) &&
                    computeType != CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f16 = Atype == CUDA_R_16F && Btype == CUDA_R_16F && (Ctype == CUDA_R_16F || Ctype == CUDA_R_32F) &&
                   computeType != CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!f32 && !bf16 && !f16) return CUBLAS_STATUS_NOT_SUPPORTED;
  Operand o = bf16 ? OPERAND_BF16 : OPERAND_F16;
  if (f32) {
    const bool tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                      (computeType == CUBLAS_COMPUTE_32F && handle->math == CUBLAS_TF32_TENSOR_OP_MATH);
    o = tf32 ? OPERAND_TF32 : OPERAND_F32;
  }
  *out = o;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t gemm_ex(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                              int n, int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                              const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                              cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  Operand o;
  const cublasStatus_t st = gemm_ex_plan(handle, Atype, Btype, Ctype, computeType, algo, &o);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return gemm(handle, transa, transb, m, n, k, (const float *)alpha, A, lda, B, ldb,
              (const float *)beta, C, ldc, o, store_of(Ctype));
}

/* What gemm_ex would refuse, without running it. */
static cublasStatus_t gemm_ex_check(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                    int n, int k, const void *alpha, cudaDataType Atype, int lda, cudaDataType Btype,
                                    int ldb, const void *beta, cudaDataType Ctype, int ldc,
                                    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  Operand o;
  const cublasStatus_t st = gemm_ex_plan(handle, Atype, Btype, Ctype, computeType, algo, &o);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  return gemm_args(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return gemm_ex(h, transa, transb, m, n, k, al, A, Atype, lda, B, Btype, ldb, be, C, Ctype, ldc, computeType,
                   algo);
  };
  auto check = [&]() {
    return gemm_ex_check(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta, Ctype, ldc,
                         computeType, algo);
  };
  cublasStatus_t st;
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta));
}

static size_t type_bytes(cudaDataType t) { return t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : 4; }

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long int strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (batchCount < 0 || strideA < 0 || strideB < 0 || strideC < 0) return CUBLAS_STATUS_INVALID_VALUE;
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    for (int b = 0; b < batchCount; b++) {
      const cublasStatus_t st = gemm_ex(
          h, transa, transb, m, n, k, al,
          static_cast<const char *>(A) + (size_t)b * (size_t)strideA * type_bytes(Atype), Atype, lda,
          static_cast<const char *>(B) + (size_t)b * (size_t)strideB * type_bytes(Btype), Btype, ldb, be,
          static_cast<char *>(C) + (size_t)b * (size_t)strideC * type_bytes(Ctype), Ctype, ldc, computeType, algo);
      if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
  };
  auto check = [&]() {
    return batchCount == 0 ? CUBLAS_STATUS_SUCCESS
                           : gemm_ex_check(handle, transa, transb, m, n, k, alpha, Atype, lda, Btype, ldb, beta,
                                           Ctype, ldc, computeType, algo);
  };
  cublasStatus_t st;
  if (blas_enqueue(handle->stream, *handle, alpha, beta, check, call, &st)) return st;
  return counted(call(handle, alpha, beta)); /* one launch for the batch */
}

/* ---- cuBLASLt ------------------------------------------------------------------------------ */
/* The descriptors are the real semi-opaque structs of cublasLt.h; the emulator keeps its own
 * state in them (memcpy in and out), tagged so that a descriptor that was never created, or
 * was destroyed, is refused. */
static const uint32_t LT_LAYOUT = 0x4c744c61u, LT_DESC = 0x4c744465u, LT_PREF = 0x4c745072u,
                      LT_ALGO = 0x4c74416cu;

struct LtLayout {
  uint32_t tag;
  int32_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct LtDesc {
  uint32_t tag;
  int32_t compute, scale, transa, transb;
  uint32_t epilogue;
  int32_t bias_type;
  const void *bias;
};
struct LtPref {
  uint32_t tag;
  uint64_t max_workspace;
};
static_assert(sizeof(LtLayout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout state too large");
static_assert(sizeof(LtDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor state too large");
static_assert(sizeof(LtPref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference state too large");

template <class T, class O>
static bool lt_load(const O *opaque, uint32_t tag, T *out) {
  if (!opaque) return false;
  memcpy(out, opaque->data, sizeof *out);
  return out->tag == tag;
}
template <class T, class O>
static void lt_store(O *opaque, const T &state) {
  memset(opaque->data, 0, sizeof opaque->data);
  memcpy(opaque->data, &state, sizeof state);
}

struct cublasLtContext {
  cublasContext blas; /* the scratch copies of gemm() */
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, NULL, {}, {}, {}}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
  *matLayout = new cublasLtMatrixLayoutOpaque_t;
  lt_store(*matLayout, LtLayout{LT_LAYOUT, (int32_t)type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (matLayout) {
    memset(matLayout->data, 0, sizeof matLayout->data);
    delete matLayout;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
  *matmulDesc = new cublasLtMatmulDescOpaque_t;
  lt_store(*matmulDesc, LtDesc{LT_DESC, (int32_t)computeType, (int32_t)scaleType, CUBLAS_OP_N, CUBLAS_OP_N,
                               CUBLASLT_EPILOGUE_DEFAULT, -1, NULL});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  if (matmulDesc) {
    memset(matmulDesc->data, 0, sizeof matmulDesc->data);
    delete matmulDesc;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes) {
  LtDesc d;
  if (!lt_load(matmulDesc, LT_DESC, &d) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  void *field;
  size_t size;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: field = &d.transa, size = sizeof d.transa; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: field = &d.transb, size = sizeof d.transb; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &d.epilogue, size = sizeof d.epilogue; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &d.bias, size = sizeof d.bias; break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: field = &d.bias_type, size = sizeof d.bias_type; break;
    default: return CUBLAS_STATUS_INVALID_VALUE; /* not in the emulated subset */
  }
  if (sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(field, buf, size);
  lt_store(matmulDesc, d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  lt_store(*pref, LtPref{LT_PREF, 0});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (pref) {
    memset(pref->data, 0, sizeof pref->data);
    delete pref;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes) {
  LtPref p;
  if (!lt_load(pref, LT_PREF, &p) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || sizeInBytes != sizeof p.max_workspace)
    return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(&p.max_workspace, buf, sizeof p.max_workspace);
  lt_store(pref, p);
  return CUBLAS_STATUS_SUCCESS;
}

/* TXL_EMU_LT_EPILOGUES: on (the default) or off (every epilogue but DEFAULT unsupported), read
 * at every call so that a test can switch it with setenv. */
static bool lt_epilogues_on(void) {
  const char *env = getenv("TXL_EMU_LT_EPILOGUES");
  if (!env || !env[0] || strcmp(env, "on") == 0) return true;
  if (strcmp(env, "off") == 0) return false;
  die("TXL_EMU_LT_EPILOGUES=%s: expected on or off", env);
}

/* One matmul as cublasLtMatmul runs it, once its descriptors have been checked. */
struct LtProblem {
  cublasOperation_t transa, transb;
  int m, n, k, lda, ldb, ldd;
  Operand operand;
  Store ab_store, d_store; /* the operands' and D's (and the bias's) storage */
  uint32_t epilogue;
  const void *bias;
};

static bool lt_fits_int(uint64_t x) { return x <= (uint64_t)INT32_MAX; }

/* The checks that cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul share, in this order:
 * invalid descriptors, operations, shapes (op(A) m x k, op(B) k x n, D m x n) and leading
 * dimensions (ld >= max(1, rows)) are CUBLAS_STATUS_INVALID_VALUE; sizes beyond int, a C layout
 * other than D's, type combinations outside those of cublasGemmEx (A, B fp32 with D fp32 and
 * compute 32F, 32F_PEDANTIC or 32F_FAST_TF32; A, B bf16 with D fp32 or bf16, and A, B fp16 with
 * D fp32 or fp16, with compute 32F or 32F_PEDANTIC; scale type fp32), an epilogue outside the five (or any but DEFAULT under
 * TXL_EMU_LT_EPILOGUES=off) and a bias type other than D's are CUBLAS_STATUS_NOT_SUPPORTED; a
 * NULL bias pointer with an epilogue that uses it is CUBLAS_STATUS_INVALID_VALUE. */
static cublasStatus_t lt_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                 cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                 cublasLtMatrixLayout_t Ddesc, LtProblem *p) {
  LtDesc d;
  LtLayout a, b, c, o;
  if (!lt_load(desc, LT_DESC, &d) || !lt_load(Adesc, LT_LAYOUT, &a) || !lt_load(Bdesc, LT_LAYOUT, &b) ||
      !lt_load(Cdesc, LT_LAYOUT, &c) || !lt_load(Ddesc, LT_LAYOUT, &o))
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto op_ok = [](int32_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; };
  if (!op_ok(d.transa) || !op_ok(d.transb)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  const uint64_t m = o.rows, n = o.cols, k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto ld_ok = [](const LtLayout &l) { return l.ld >= 1 && (uint64_t)l.ld >= l.rows; };
  if (!ld_ok(a) || !ld_ok(b) || !ld_ok(c) || !ld_ok(o)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!lt_fits_int(m) || !lt_fits_int(n) || !lt_fits_int(k) || !lt_fits_int((uint64_t)a.ld) ||
      !lt_fits_int((uint64_t)b.ld) || !lt_fits_int((uint64_t)o.ld))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (c.type != o.type || c.rows != o.rows || c.cols != o.cols || c.ld != o.ld)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  const bool compute_ok = d.compute == CUBLAS_COMPUTE_32F || d.compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                          d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && o.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
                    (o.type == CUDA_R_32F || o.type == CUDA_R_16BF) && d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f16 = a.type == CUDA_R_16F && b.type == CUDA_R_16F && (o.type == CUDA_R_32F || o.type == CUDA_R_16F) &&
                   d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!compute_ok || d.scale != CUDA_R_32F || (!f32 && !bf16 && !f16)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = d.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU_BIAS &&
      e != CUBLASLT_EPILOGUE_BGRADA && e != CUBLASLT_EPILOGUE_BGRADB)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (e != CUBLASLT_EPILOGUE_DEFAULT) {
    if (!lt_epilogues_on()) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (d.bias_type != -1 && d.bias_type != o.type) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!d.bias) return CUBLAS_STATUS_INVALID_VALUE;
  }
  p->transa = (cublasOperation_t)d.transa;
  p->transb = (cublasOperation_t)d.transb;
  p->m = (int)m, p->n = (int)n, p->k = (int)k;
  p->lda = (int)a.ld, p->ldb = (int)b.ld, p->ldd = (int)o.ld;
  p->operand = bf16  ? OPERAND_BF16
               : f16 ? OPERAND_F16
               : d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? OPERAND_TF32
                                                          : OPERAND_F32;
  p->ab_store = store_of((cudaDataType)a.type);
  p->d_store = store_of((cudaDataType)o.type);
  p->epilogue = e;
  p->bias = d.bias;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
  if (returnAlgoCount) *returnAlgoCount = 0;
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  LtPref pref;
  if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount ||
      !lt_load(preference, LT_PREF, &pref))
    return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
  memset(&r, 0, sizeof r);
  r.algo.data[0] = LT_ALGO;
  r.workspaceSize = 0; /* the emulation needs none, within any MAX_WORKSPACE_BYTES */
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || (algo && algo->data[0] != LT_ALGO)) return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (C != D) return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  /* on a capturing stream: recorded with the problem as the descriptors give it now, alpha and
   * beta read now (the host pointer mode, cuBLASLt's default: its pointer-mode attribute is not
   * emulated), a scratch of its own */
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return lt_execute(h, p, al, A, B, be, D);
  };
  cublasStatus_t rec;
  if (blas_enqueue(stream, lightHandle->blas, alpha, beta, [] { return CUBLAS_STATUS_SUCCESS; }, call, &rec))
    return rec;
  return counted(call(&lightHandle->blas, alpha, beta));
}

/* One checked matmul: D = alpha op(A) op(B) + beta D and the epilogue. */
static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D) {
  /* The bias gradient, from the operands as stored (fp32 as they are, not TF32-rounded; bf16,
   * fp16 widened), summed in fp32 in increasing k, not scaled by alpha; computed before D is
   * written and stored (overwriting) after it, in D's type. */
  std::vector<float> grad;
  if (p.epilogue == CUBLASLT_EPILOGUE_BGRADA || p.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    const bool on_a = p.epilogue == CUBLASLT_EPILOGUE_BGRADA;
    const void *X = on_a ? A : B;
    /* grad[r] = sum over q < k of op(A)[r, q] (BGRADA) or op(B)[q, r] (BGRADB), the element at
     * X[r ld + q] when it lies along X's column r (op(A) = A^T, op(B) = B), else X[q ld + r] */
    const bool trans = on_a ? p.transa != CUBLAS_OP_N : p.transb == CUBLAS_OP_N;
    const int ld = on_a ? p.lda : p.ldb;
    grad.assign((size_t)(on_a ? p.m : p.n), 0.0f);
    for (size_t r = 0; r < grad.size(); r++) {
      float s = 0.0f;
      for (int q = 0; q < p.k; q++) {
        const size_t at = trans ? r * (size_t)ld + (size_t)q : (size_t)q * ld + r;
        s += load_elem(X, at, p.ab_store);
      }
      grad[r] = s;
    }
  }
  const BiasEpilogue bias{p.bias, p.d_store, p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS};
  const bool with_bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const cublasStatus_t g = gemm(blas, p.transa, p.transb, p.m, p.n, p.k, (const float *)alpha, A,
                                p.lda, B, p.ldb, (const float *)beta, D, p.ldd, p.operand, p.d_store,
                                with_bias ? &bias : NULL);
  if (g != CUBLAS_STATUS_SUCCESS) return g;
  for (size_t r = 0; r < grad.size(); r++) store_elem(const_cast<void *>(p.bias), r, p.d_store, grad[r]);
  return CUBLAS_STATUS_SUCCESS;
}
