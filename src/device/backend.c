#include "src/device/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "dist/gpu.h"
#include "dist/launcher.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threads.h"
#include "src/base/error.h"
#ifdef TXL_HAVE_CUDA
#define TXL_BACKEND_NCCL 1
#include "dist/nccl.h"
#endif
#ifdef TXL_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/profile.h"
#endif

const char *txl_backend_precision_name(TxlBackendPrecision p) {
  switch (p) {
  case TXL_BACKEND_FP32: return "fp32";
  case TXL_BACKEND_TF32: return "tf32";
  case TXL_BACKEND_BF16: return "bf16";
  case TXL_BACKEND_FP16: return "fp16";
  }
  return "?";
}

/* CPU threads of a rank: run.threads, else $OMP_NUM_THREADS, else the node's cores / ranks on it. */
static int rank_threads(const TxlDeviceSpec *s, const TxlDist *d) {
  if (s->threads > 0) return s->threads;
  const char *env = getenv("OMP_NUM_THREADS");
  if (env && atoi(env) > 0) return atoi(env);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  long n = cores / (d->local_size > 0 ? d->local_size : 1);
  return n < 1 ? 1 : (int)n;
}

/* What a device does beyond its op table: the counts of txl_backend_api_counts and the others,
 * CUDA graphs (NULL: the device captures none), the release at close. One table per device,
 * chosen once by txl_backend_open, so that the functions below are one call each. */
typedef struct TxlDeviceFns {
  int (*api_counts)(long *launches, long *syncs);
  long (*graph_launches)(void);
  size_t (*memory_held)(void);
  long (*scratch_moves)(void);
  void (*graph_begin)(void);
  void *(*graph_end)(void);
  void (*graph_launch)(void *graph);
  void (*graph_destroy)(void *graph);
  void (*release)(void);
  /* the device profile (kernels/cuda/profile.h); NULL: the device has none */
  const TxlOps *(*profile_create)(const TxlOps *inner, int tf32, int max_marks);
  void (*profile_set_model)(TxlGemmOfFn fn, void *ctx, const void *grad, size_t grad_bytes);
  void (*profile_step)(int begin);
  const TxlProfileTotals *(*profile_totals)(void);
  void (*profile_destroy)(void);
} TxlDeviceFns;

/* The CPU counts nothing, holds no device memory and captures nothing. */
static int cpu_api_counts(long *launches, long *syncs) {
  *launches = *syncs = -1;
  return 0;
}
static long cpu_graph_launches(void) { return -1; }
static size_t cpu_memory_held(void) { return 0; }
static long cpu_scratch_moves(void) { return 0; }
static void cpu_release(void) {}
static const TxlDeviceFns CPU_DEVICE = {cpu_api_counts, cpu_graph_launches, cpu_memory_held, cpu_scratch_moves,
                                        NULL, NULL, NULL, NULL, cpu_release, NULL, NULL, NULL, NULL, NULL};

/* The CUDA backend of this build, NULL where it has none: its device functions, its GPU count,
 * its op tables (kernels/cuda/ops_table.cu) and its opening; the rest of this file reaches CUDA
 * through it only (open_cuda aside). */
typedef struct {
  TxlDeviceFns fns;
  int (*device_count)(void);
  const TxlOps *(*ops)(TxlDtype act);
  void (*open)(TxlBackend *b, const TxlDeviceSpec *s, const TxlDist *d, int collectives);
} CudaBackend;

#ifdef TXL_HAVE_CUDA
/* Two ranks of a node must not compute on one GPU (each sees one, the same: a node's single GPU
 * without per-task binding): their choices compared by PCI bus id. collective: all ranks */
static void check_gpus_distinct(const TxlDist *d, int gpu, int n_gpus, const char *launcher) {
  enum { ID = 32 };
  char mine[ID] = "", *all = txl_calloc((size_t)d->local_size, ID, "the node's GPU ids");
  txl_cuda_device_bus_id(gpu, mine, ID);
  txl_dist_node_allgather(mine, ID, all);
  int a = 0, b = 0;
  const int shared = txl_dist_gpu_shared(all, d->local_size, ID, &a, &b);
  free(all);
  char how[256];
  txl_dist_gpu_advice(launcher, n_gpus, how, sizeof how);
  txl_fatal_if_any(shared && d->local_rank == b,
                   "run.device = cuda: host %s (%s): node-local ranks %d and %d would both compute on the GPU at PCI "
                   "bus id %s (each sees %d GPU%s, the same): %s", d->host, launcher, a, b, mine, n_gpus,
                   n_gpus == 1 ? "" : "s", how);
}

static void open_cuda(TxlBackend *b, const TxlDeviceSpec *s, const TxlDist *d, int collectives) {
  char err[512];
  const int n_gpus = txl_cuda_device_count();
  const char *launcher = txl_launcher_name(txl_launcher_detect());
  const int gpu = txl_dist_gpu_for_rank(d->local_rank, d->local_size, n_gpus, d->host, launcher, err, sizeof err);
  txl_fatal_if_any(gpu < 0, "run.device = cuda: %s", err);
  check_gpus_distinct(d, gpu, n_gpus, launcher);
  snprintf(b->gpu_rule, sizeof b->gpu_rule, "rank 0 sees %d GPU%s: %s; no two ranks of a node on one GPU (PCI bus "
           "ids compared)", n_gpus, n_gpus == 1 ? "" : "s", txl_dist_gpu_rule(n_gpus));
  TxlCudaDevice info;
  txl_cuda_set_device(gpu, &info);
  /* TF32 and bf16 tensor arithmetic came with sm_80 (Ampere); cuBLAS has no such GEMMs before.
   * fp16 tensor cores came with sm_70 (Volta): fp16 runs on sm_75 (T4) too. */
  const int tensor_ok =
      s->precision == TXL_BACKEND_FP32 || s->precision == TXL_BACKEND_FP16 || info.major >= 8;
  txl_fatal_if_any(!tensor_ok, "run.precision = %s needs compute capability 8.0 or newer; cuda:%d (%s) is sm_%d%d: use "
                   "run.precision = fp32 or fp16",
                   txl_backend_precision_name(s->precision), gpu, info.name, info.major, info.minor);
  /* fp32 / tf32: the fp32 table, with exact or TF32 GEMMs; bf16 / fp16: the table that stores the
   * activations in bf16 / fp16 (its GEMMs take those operands; the TF32 setting does not apply) */
  const int bf16 = s->precision == TXL_BACKEND_BF16, fp16 = s->precision == TXL_BACKEND_FP16;
  const int tf32 = s->precision == TXL_BACKEND_TF32;
  txl_cuda_set_gemm_math(tf32 ? TXL_GEMM_TF32 : TXL_GEMM_FP32);
  txl_cuda_set_attn_impl(s->fused_attn ? TXL_ATTN_FUSED : TXL_ATTN_GEMM);
  b->gpu = gpu;
  b->tf32 = tf32;
  const TxlPeakKind kind = bf16                                    ? TXL_PEAK_BF16
                           : fp16                                  ? TXL_PEAK_FP16
                           : tf32                                  ? TXL_PEAK_TF32
                                                                   : TXL_PEAK_FP32;
  b->peak_flops = info.peak[kind];
  b->peak_fp32_flops = info.peak[TXL_PEAK_FP32];
  b->dram_bytes_s = info.dram_peak;
  b->peak_of = txl_peak_kind_name(kind);
  b->free_bytes = (double)info.free_memory;
  snprintf(b->device, sizeof b->device, "cuda:%d (%.200s, sm_%d%d, %.1f GiB, %s)", gpu, info.name, info.major,
           info.minor, (double)info.memory / 1073741824.0,
           bf16                                 ? "bf16 activations and GEMMs"
           : fp16                               ? "fp16 activations and GEMMs"
           : tf32                               ? "TF32 GEMMs"
                                                : "fp32");
#ifdef TXL_BACKEND_NCCL
  if (collectives && d->world > 1) b->nccl = txl_nccl_create(d->rank, d->world, gpu, txl_cuda_compute_stream());
#endif
}

static const CudaBackend CUDA_BACKEND = {
    {txl_cuda_api_counts, txl_cuda_graph_launches, txl_cuda_memory_held, txl_cuda_scratch_moves, txl_cuda_graph_begin,
     txl_cuda_graph_end, txl_cuda_graph_launch, txl_cuda_graph_destroy, txl_cuda_release, txl_cuda_profile_create,
     txl_cuda_profile_set_model, txl_cuda_profile_step, txl_cuda_profile_totals, txl_cuda_profile_destroy},
    txl_cuda_device_count, txl_ops_cuda, open_cuda};
static const CudaBackend *const CUDA = &CUDA_BACKEND;
#else
static const CudaBackend *const CUDA = NULL;
#endif

/* GPUs this rank sees: the CUDA runtime's count; none in a build without the CUDA backend. */
static int visible_gpus(void) { return CUDA ? CUDA->device_count() : 0; }

/* GPUs SLURM allocated to this node (a build without CUDA cannot count them otherwise). */
static int allocated_gpus(void) {
  const char *v = getenv("SLURM_GPUS_ON_NODE");
  return v && atoi(v) > 0 ? atoi(v) : 0;
}

int txl_backend_resolve_device(TxlBackendDevice *device, const TxlDist *d, char *note, size_t n) {
  note[0] = 0;
  const int mine = visible_gpus(), allocated = allocated_gpus();
  int neg = -mine; /* the fewest GPUs any rank sees, as a maximum */
  if (d->world > 1) txl_dist_allreduce_max_i32(&neg, 1);
  const int fewest = -neg;
  const char *no_cuda = CUDA ? "" : " (this txl was built without the CUDA backend)";
  if (*device == TXL_BACKEND_AUTO) {
    *device = fewest > 0 ? TXL_BACKEND_CUDA : TXL_BACKEND_CPU;
    if (fewest > 0)
      snprintf(note, n, "run.device = auto: cuda (every rank sees a GPU; rank 0 sees %d)", mine);
    else
      snprintf(note, n, "run.device = auto: cpu (%s%s)", mine > 0 ? "some rank sees no GPU" : "no GPU visible",
               no_cuda);
    return 1;
  }
  if (*device == TXL_BACKEND_CPU && (mine > 0 || allocated > 0)) {
    if (mine > 0)
      snprintf(note, n, "warning: rank 0 sees %d GPU%s, but run.device = cpu: this run trains on the CPU (run.device "
               "= cuda or auto uses them)", mine, mine == 1 ? "" : "s");
    else
      snprintf(note, n, "warning: SLURM allocated %d GPU%s to this node, but run.device = cpu%s: this run trains on the "
               "CPU", allocated, allocated == 1 ? "" : "s", no_cuda);
    return 2;
  }
  return 0;
}

const TxlOps *txl_backend_ops(const TxlDeviceSpec *s, char *err, size_t errlen) {
  const int bf16 = s->precision == TXL_BACKEND_BF16, fp16 = s->precision == TXL_BACKEND_FP16;
  if (s->device == TXL_BACKEND_CPU) {
    if (!bf16 && !fp16) return txl_ops_cpu();
    snprintf(err, errlen, "run.precision = %s needs run.device = cuda (the CPU backend computes and stores in "
             "fp32; use fp32)", bf16 ? "bf16" : "fp16");
    return NULL;
  }
  if (CUDA) return CUDA->ops(bf16 ? TXL_BF16 : fp16 ? TXL_F16 : TXL_F32);
  snprintf(err, errlen, "run.device = cuda: this txl was built without the CUDA backend (configure it where a CUDA "
           "toolkit is installed, with TXL_CUDA=AUTO or ON; see README, The two commands)");
  return NULL;
}

void txl_backend_open(TxlBackend *b, const TxlDeviceSpec *s, const TxlDist *d, int collectives) {
  memset(b, 0, sizeof *b);
  b->gpu = -1;
  b->fns = &CPU_DEVICE;
  if (s->device == TXL_BACKEND_AUTO) txl_fatal("internal: the backend opened before run.device = auto was resolved");
  b->threads = rank_threads(s, d);
  txl_cpu_set_threads(b->threads);
  char err[512];
  b->ops = txl_backend_ops(s, err, sizeof err); /* a table of functions: no device touched yet */
  if (!b->ops) txl_fatal_all("%s", err);
  if (s->device == TXL_BACKEND_CPU) {
    snprintf(b->device, sizeof b->device, "cpu");
    return;
  }
  CUDA->open(b, s, d, collectives); /* b->ops is a CUDA table: this build has the backend */
  b->fns = &CUDA->fns;
}

TxlReducer *txl_backend_reducer(TxlBackend *b, const TxlDist *d, double bucket_mb, int overlap, float *grad,
                                int64_t n) {
  if (d->world == 1) return NULL;
  const int64_t bucket = (int64_t)(bucket_mb * 1048576.0 / sizeof(float));
#ifdef TXL_BACKEND_NCCL
  if (b->nccl) {
    const TxlReduceTransport t = txl_nccl_transport(b->nccl);
    return txl_reducer_create_with(&t, grad, n, bucket, overlap);
  }
#else
  (void)b;
#endif
  return txl_reducer_create(grad, n, bucket, overlap);
}

int txl_backend_api_counts(const TxlBackend *b, long *launches, long *syncs) {
  return b->fns->api_counts(launches, syncs);
}

long txl_backend_graph_launches(const TxlBackend *b) { return b->fns->graph_launches(); }

size_t txl_backend_device_held(const TxlBackend *b) { return b->fns->memory_held(); }

int txl_backend_can_capture(const TxlBackend *b) { return b->fns->graph_begin != NULL; }

static void need_capture(const TxlBackend *b) {
  if (!txl_backend_can_capture(b)) txl_fatal("internal: a CUDA graph on the %s backend", b->device);
}

void txl_backend_capture_begin(const TxlBackend *b) {
  need_capture(b);
  b->fns->graph_begin();
}

void *txl_backend_capture_end(const TxlBackend *b) {
  need_capture(b);
  return b->fns->graph_end();
}

void txl_backend_graph_launch(const TxlBackend *b, void *graph) {
  need_capture(b);
  b->fns->graph_launch(graph);
}

void txl_backend_graph_destroy(const TxlBackend *b, void *graph) {
  if (!graph) return;
  need_capture(b);
  b->fns->graph_destroy(graph);
}

long txl_backend_scratch_moves(const TxlBackend *b) { return b->fns->scratch_moves(); }

int txl_backend_profile_open(TxlBackend *b, int max_marks) {
  if (!b->fns->profile_create) return 0;
  b->ops = b->fns->profile_create(b->ops, b->tf32, max_marks);
  b->profiled = 1;
  return 1;
}

static void need_profile(const TxlBackend *b) {
  if (!b->profiled) txl_fatal("internal: a device profile on the %s backend without txl_backend_profile_open", b->device);
}

void txl_backend_profile_model(const TxlBackend *b, TxlGemmOfFn fn, void *model, const void *grad, size_t bytes) {
  need_profile(b);
  b->fns->profile_set_model(fn, model, grad, bytes);
}

void txl_backend_profile_step(const TxlBackend *b, int begin) {
  need_profile(b);
  b->fns->profile_step(begin);
}

const TxlProfileTotals *txl_backend_profile_totals(const TxlBackend *b) {
  need_profile(b);
  return b->fns->profile_totals();
}

void txl_backend_close(TxlBackend *b) {
#ifdef TXL_BACKEND_NCCL
  if (b->nccl) txl_nccl_destroy(b->nccl);
#endif
  if (b->profiled) b->fns->profile_destroy();
  if (b->fns) b->fns->release(); /* NULL: never opened */
  memset(b, 0, sizeof *b);
  b->gpu = -1;
  b->fns = &CPU_DEVICE;
}
