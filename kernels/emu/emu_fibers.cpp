/* The CPU emulator's block scheduler (cuda_emu.h's TXL_LAUNCH, txl_emu_run): one fiber per thread
 * of a block, __syncthreads, __syncwarp and the shuffles, and the launch checks with the
 * per-kernel limit cudaFuncSetAttribute sets. The runtime, streams and cuBLAS are the other parts
 * (emu_internal.h lists them).
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
 * TXL_EMU_ORDER=reverse runs the rounds in decreasing thread order instead; TXL_EMU_ORDER=warps
 * runs one warp at a time up to the block's next barrier (run_block). A kernel whose result
 * depends on the order (a thread reading what another writes with no barrier between them: a
 * race on a GPU) gives different results in two of the orders, so the tests run several.
 *
 * AddressSanitizer: every switch is announced with __sanitizer_start_switch_fiber /
 * __sanitizer_finish_switch_fiber, so the kernels run instrumented under -fsanitize=address
 * (an out-of-bounds access in a kernel is reported like any other). */
#include "kernels/emu/emu_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <vector>

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

/* ---- fibers -------------------------------------------------------------------------------- */
enum {
  STACK_BYTES = 256 * 1024,    /* per fiber; only the pages a kernel touches are committed */
};

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

/* One warp's barrier: the lanes arrive, the last one releases them. A shuffle (or a warp-wide
 * instruction: emu_warp_exchange) writes its value into slot[gen & 1][lane] and reads the
 * partners' from the same half after the release; the next operation writes the other half, and
 * cannot complete (so nobody can write this half again) before every lane has arrived at it,
 * i.e. has read its results here. */
struct Warp {
  int size;     /* lanes in this warp (32 unless the block size is not a multiple of 32) */
  int arrived;
  int kind;     /* operation of the current arrivals: an OP_* below */
  int width;
  int done;     /* lanes that returned */
  unsigned gen;
  unsigned char slot[2][WARP][EMU_WARP_PAYLOAD];
};

enum { OP_SHFL_XOR, OP_SHFL_DOWN, OP_SHFL_IDX, OP_SYNCWARP, OP_FIRST_EXCHANGE };
static const char *const kOpName[] = {"__shfl_xor_sync", "__shfl_down_sync", "__shfl_sync",
                                      "__syncwarp"};
/* the name of a warp operation: a shuffle's, or the instruction an exchange stands for */
static const char *op_name(int kind) {
  return kind < OP_FIRST_EXCHANGE ? kOpName[kind] : emu_exchange_name(kind - OP_FIRST_EXCHANGE);
}

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
  bool by_warp;             /* TXL_EMU_ORDER=warps: one warp at a time (see run_block)   */
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
  if (order && order[0] && strcmp(order, "forward") != 0 && strcmp(order, "reverse") != 0 &&
      strcmp(order, "warps") != 0)
    emu_die("TXL_EMU_ORDER=%s: expected forward, reverse or warps", order);
  S.reverse = order && strcmp(order, "reverse") == 0;
  S.by_warp = order && strcmp(order, "warps") == 0;
  const char *env = getenv("TXL_EMU_FIBERS");
  const bool want_ucontext = env && strcmp(env, "ucontext") == 0;
  const bool want_asm = env && strcmp(env, "asm") == 0;
  if (env && !want_ucontext && !want_asm && env[0])
    emu_die("TXL_EMU_FIBERS=%s: expected asm or ucontext", env);
#ifdef TXL_EMU_HAVE_ASM
  if (want_asm && shadow_stack_enabled())
    emu_die("TXL_EMU_FIBERS=asm: this process runs with a shadow stack; use ucontext");
  S.backend = want_ucontext || shadow_stack_enabled() ? BACKEND_UCONTEXT : BACKEND_ASM;
#else
  if (want_asm) emu_die("TXL_EMU_FIBERS=asm: the asm switch exists for x86-64 Linux only");
  S.backend = BACKEND_UCONTEXT;
#endif
}

extern "C" const char *txl_emu_fiber_backend(void) {
  if (S.backend == BACKEND_UNSET) read_environment();
  return S.backend == BACKEND_ASM ? "asm" : "ucontext";
}

extern "C" const char *txl_emu_order(void) {
  if (S.backend == BACKEND_UNSET) read_environment();
  return S.reverse ? "reverse" : S.by_warp ? "warps" : "forward";
}

static void fiber_slots(int n) {
  while ((int)S.fibers.size() < n) {
    Fiber *f = new Fiber();
    if (getcontext(&f->uc) != 0) emu_die("getcontext failed: %s", strerror(errno));
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
  if (m == MAP_FAILED) emu_die("cannot map a fiber stack: %s", strerror(errno));
  if (mprotect(m, page, PROT_NONE) != 0) /* guard page: an overflow faults */
    emu_die("cannot protect a fiber stack's guard page: %s", strerror(errno));
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
  if (!S.cur) emu_die("%s", msg);
  const uint3 t = S.cur->tid;
  snprintf(S.error, sizeof S.error, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s",
           S.launch->name, blockIdx.x, blockIdx.y, blockIdx.z, t.x, t.y, t.z, msg);
  S.failed = true;
  to_scheduler(true);
  abort(); /* not resumed */
}

static Fiber *current(const char *what) {
  if (!S.cur) emu_die("%s called outside a kernel", what);
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
         lin % WARP, lin / WARP, w.arrived, op_name(w.kind));
  emu_ptx_thread_done(lin);
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
  if (S.failed) emu_die("%s", S.error);
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
  emu_die("kernel %s, block (%u,%u,%u): deadlock: %d thread(s) wait at __syncthreads, %d at a warp "
      "operation (the first in warp %d, at %s), %d returned: the block is split between "
      "__syncthreads and a warp operation",
      S.launch->name, blockIdx.x, blockIdx.y, blockIdx.z, at_block, at_warp, first_warp,
      first_warp >= 0 ? op_name(S.warps[(size_t)first_warp].kind) : "-", S.done);
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
  /* TXL_EMU_ORDER=warps: the rounds of one warp's lanes until none of them can run (all wait at
   * __syncthreads or returned), then the next warp's. The other orders keep the warps in step
   * through their warp operations (each round moves every warp past one); this one lets a warp
   * run ahead up to the block's next barrier, as a GPU may: a warp writing shared memory that
   * another still reads, with no __syncthreads between them, changes a result here. */
  const int span = S.by_warp ? WARP : n;
  while (S.done < n) {
    S.progress = false;
    for (int first = 0; first < n; first += span) {
      const int end = first + span < n ? first + span : n;
      bool ran;
      do {
        ran = false;
        for (S.idx = first; S.idx < end; S.idx++) { /* fiber_main may advance S.idx */
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
          S.progress = ran = true;
          Fiber *back = resume(f);
          if (back->state == DONE) { /* its stack is free again */
            S.free_stacks.push_back(back->stack);
            back->stack = NULL;
          }
        }
      } while (ran && S.by_warp);
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
    emu_set_error(cudaErrorInvalidConfiguration);
    return false;
  }
  if (d.shared > shared_limit) { /* what the driver reports: "invalid argument" */
    emu_set_error(cudaErrorInvalidValue);
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
    emu_die("out of host memory for %zu bytes of dynamic shared memory", d.shared);

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
    emu_die("kernel %s launched from inside kernel %s (device-side launches are not emulated)",
        d.name, S.launch->name);
  if (S.backend == BACKEND_UNSET) read_environment();
  cudaError_t err;
  const Enqueue q = emu_enqueue(d.stream, &err);
  if (q == ENQ_FAIL) return; /* the error is cudaGetLastError's */
  if (!launch_ok(d)) {
    if (q == ENQ_RECORD) emu_invalidate(d.stream->capture); /* a failed launch in a capture */
    return;
  }
  if (q == ENQ_RECORD) { /* the descriptor and a copy of the arguments, run at each replay */
    const TxlEmuLaunchDesc saved = d;
    std::shared_ptr<void> args(d.clone(d.ctx), d.destroy);
    emu_record(d.stream, [saved, args]() {
      TxlEmuLaunchDesc r = saved;
      r.ctx = args.get();
      if (!launch_ok(r)) return; /* cudaFuncSetAttribute may have lowered the limit since */
      emu_graph_kernel();
      run_grid(r);
    });
    return;
  }
  emu_launched();
  if (q == ENQ_DEFER) { /* behind the stream's work: the arguments' values of now, as a GPU keeps them */
    const TxlEmuLaunchDesc saved = d;
    std::shared_ptr<void> args(d.clone(d.ctx), d.destroy);
    emu_defer(d.stream, [saved, args]() {
      TxlEmuLaunchDesc r = saved;
      r.ctx = args.get();
      run_grid(r);
    });
    return;
  }
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

/* Arrival of the running lane at a warp operation with its payload (bytes <= EMU_WARP_PAYLOAD);
 * returns the half of the slots it used. */
static unsigned warp_arrive(int kind, unsigned int mask, const void *payload, size_t bytes, int width) {
  Fiber *f = current(op_name(kind));
  const int lin = linear_of(f), lane = lin % WARP;
  Warp &w = S.warps[(size_t)(lin / WARP)];
  if (mask != 0xffffffffu)
    fail("%s with mask 0x%08x: only the full mask 0xffffffff is supported", op_name(kind), mask);
  if (width < 1 || width > WARP || (width & (width - 1)) != 0)
    fail("%s with width %d: must be a power of 2 in [1, 32]", op_name(kind), width);
  if (w.size != WARP)
    fail("%s in a partial warp (%d lanes; the block has %d threads, not a multiple of 32): "
         "the full mask names lanes that do not exist",
         op_name(kind), w.size, S.nthreads);
  if (w.done > 0)
    fail("%s after a lane of its warp returned: all 32 lanes must take part", op_name(kind));
  if (w.arrived == 0) {
    w.kind = kind;
    w.width = width;
  } else if (w.kind != kind || w.width != width) {
    fail("%s (width %d) while other lanes of the warp wait in %s (width %d): divergent warp "
         "operations",
         op_name(kind), width, op_name(w.kind), w.width);
  }
  const unsigned half = w.gen & 1u;
  if (bytes > 0) memcpy(w.slot[half][lane], payload, bytes); /* __syncwarp carries none (NULL) */
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

void __syncwarp(unsigned int mask) { warp_arrive(OP_SYNCWARP, mask, NULL, 0, WARP); }

uint64_t txl_emu_shuffle(int kind, unsigned int mask, uint64_t bits, int arg, int width) {
  if (kind == 0 && (arg < 0 || arg >= WARP))
    fail("__shfl_xor_sync with lane mask %d: must be in [0, 32)", arg);
  const unsigned half = warp_arrive(kind, mask, &bits, sizeof bits, width);
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
  uint64_t out;
  memcpy(&out, S.warps[(size_t)(lin / WARP)].slot[half][src], sizeof out);
  return out;
}

/* ---- what the warp-wide instructions (emu_ptx.cpp) need of the scheduler ------------------ */
const unsigned char (*emu_warp_exchange(int instruction, const void *mine, size_t bytes))[EMU_WARP_PAYLOAD] {
  if (bytes > EMU_WARP_PAYLOAD) emu_die("internal: a warp exchange of %zu bytes", bytes);
  const int kind = OP_FIRST_EXCHANGE + instruction;
  const unsigned half = warp_arrive(kind, 0xffffffffu, mine, bytes, WARP);
  return S.warps[(size_t)(linear_of(S.cur) / WARP)].slot[half];
}

int emu_thread_linear(const char *what) { return linear_of(current(what)); }

void emu_kernel_fail(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail("%s", msg);
  abort(); /* not reached: fail does not return */
}

bool emu_in_dynamic_shared(const void *p, size_t bytes) {
  const unsigned char *a = (const unsigned char *)p;
  return S.launch && S.dyn_shared && a >= S.dyn_shared && bytes <= S.launch->shared &&
         (size_t)(a - S.dyn_shared) <= S.launch->shared - bytes;
}

/* ---- launch checks: the per-kernel limit of the dynamic shared memory ---------------------- */
cudaError_t txl_emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value) {
  if (!kernel) return emu_set_error(cudaErrorInvalidValue);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return emu_set_error(cudaErrorInvalidValue);
  /* above the architecture's opt-in limit the CUDA runtime answers cudaErrorInvalidValue */
  if (value < 0 || value > txl_emu_arch().shared_optin) return emu_set_error(cudaErrorInvalidValue);
  g_max_dynamic_shared[kernel] = value;
  return cudaSuccess;
}
