#include "src/device/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "dist/gpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/threads.h"
#include "src/base/error.h"
#if defined(TXL_HAVE_CUDA) && !defined(TXL_CUDA_EMU)
#define TXL_BACKEND_NCCL 1
#include "dist/nccl.h"
#endif
#ifdef TXL_HAVE_CUDA
#include "kernels/cuda/cuda_ops.h"
#endif

/* CPU threads of a rank: run.threads, else $OMP_NUM_THREADS, else the node's cores / ranks on it. */
static int rank_threads(const TxlConfig *c, const TxlDist *d) {
  if (c->threads > 0) return c->threads;
  const char *env = getenv("OMP_NUM_THREADS");
  if (env && atoi(env) > 0) return atoi(env);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  long n = cores / (d->local_size > 0 ? d->local_size : 1);
  return n < 1 ? 1 : (int)n;
}

#ifdef TXL_HAVE_CUDA
static void open_cuda(TxlBackend *b, const TxlConfig *c, const TxlDist *d, int collectives) {
  char err[512];
  const int n_gpus = txl_cuda_device_count();
  const int gpu = txl_dist_gpu_for_rank(d->local_rank, d->local_size, n_gpus, d->host, err, sizeof err);
  txl_fatal_if_any(gpu < 0, "run.device = cuda: %s", err);
  TxlCudaDevice info;
  txl_cuda_set_device(gpu, &info);
  /* TF32 and bf16 tensor arithmetic came with sm_80 (Ampere); cuBLAS has no such GEMMs before.
   * fp16 tensor cores came with sm_70 (Volta): fp16 runs on sm_75 (T4) too. */
  const int tensor_ok =
      c->precision == TXL_PRECISION_FP32 || c->precision == TXL_PRECISION_FP16 || info.major >= 8;
  txl_fatal_if_any(!tensor_ok, "run.precision = %s needs compute capability 8.0 or newer; cuda:%d (%s) is sm_%d%d: use "
                   "run.precision = fp32 or fp16",
                   txl_config_choice_name(TXL_CFG_KEY_precision, c->precision), gpu, info.name, info.major, info.minor);
  /* fp32 / tf32: the fp32 table, with exact or TF32 GEMMs; bf16 / fp16: the table that stores the
   * activations in bf16 / fp16 (its GEMMs take those operands; the TF32 setting does not apply) */
  const int bf16 = c->precision == TXL_PRECISION_BF16, fp16 = c->precision == TXL_PRECISION_FP16;
  txl_cuda_set_gemm_math(c->precision == TXL_PRECISION_TF32 ? TXL_GEMM_TF32 : TXL_GEMM_FP32);
  b->gpu = gpu;
  const TxlPeakKind kind = bf16                                    ? TXL_PEAK_BF16
                           : fp16                                  ? TXL_PEAK_FP16
                           : c->precision == TXL_PRECISION_TF32 ? TXL_PEAK_TF32
                                                                   : TXL_PEAK_FP32;
  b->peak_flops = info.peak[kind];
  b->peak_of = txl_peak_kind_name(kind);
  b->free_bytes = (double)info.free_memory;
  snprintf(b->device, sizeof b->device, "cuda:%d (%.200s, sm_%d%d, %.1f GiB, %s)", gpu, info.name, info.major,
           info.minor, (double)info.memory / 1073741824.0,
           bf16                                 ? "bf16 activations and GEMMs"
           : fp16                               ? "fp16 activations and GEMMs"
           : c->precision == TXL_PRECISION_TF32 ? "TF32 GEMMs"
                                                : "fp32");
#ifdef TXL_BACKEND_NCCL
  if (collectives && d->world > 1) b->nccl = txl_nccl_create(d->rank, d->world, gpu, txl_cuda_compute_stream());
#else /* the CPU emulator of the kernels (tests/cuda/emu): no NCCL there */
  if (collectives && d->world > 1)
    txl_fatal_all("run.device = cuda on the CPU emulator of the kernels runs one rank only (no NCCL)");
#endif
}
#endif

const TxlOps *txl_backend_ops(const TxlConfig *c, char *err, size_t errlen) {
  const int bf16 = c->precision == TXL_PRECISION_BF16, fp16 = c->precision == TXL_PRECISION_FP16;
  if (c->device == TXL_DEVICE_CPU) {
    if (!bf16 && !fp16) return txl_ops_cpu();
    snprintf(err, errlen, "run.precision = %s needs run.device = cuda (the CPU backend computes and stores in "
             "fp32; use fp32)", bf16 ? "bf16" : "fp16");
    return NULL;
  }
#ifdef TXL_HAVE_CUDA
  return txl_ops_cuda(bf16 ? TXL_BF16 : fp16 ? TXL_F16 : TXL_F32);
#else
  snprintf(err, errlen, "run.device = cuda: this txl was built without the CUDA backend (configure it where a CUDA "
           "toolkit is installed, with TXL_CUDA=AUTO or ON; see README, Building)");
  return NULL;
#endif
}

void txl_backend_open(TxlBackend *b, const TxlConfig *c, const TxlDist *d, int collectives) {
  memset(b, 0, sizeof *b);
  b->gpu = -1;
  b->threads = rank_threads(c, d);
  txl_cpu_set_threads(b->threads);
  char err[512];
  b->ops = txl_backend_ops(c, err, sizeof err); /* a table of functions: no device touched yet */
  if (!b->ops) txl_fatal_all("%s", err);
  if (c->device == TXL_DEVICE_CPU) {
    snprintf(b->device, sizeof b->device, "cpu");
    return;
  }
#ifdef TXL_HAVE_CUDA
  open_cuda(b, c, d, collectives);
#else
  (void)collectives;
#endif
}

TxlReducer *txl_backend_reducer(TxlBackend *b, const TxlDist *d, const TxlConfig *c, float *grad, int64_t n) {
  if (d->world == 1) return NULL;
  const int64_t bucket = (int64_t)(c->bucket_mb * 1048576.0 / sizeof(float));
#ifdef TXL_BACKEND_NCCL
  if (b->nccl) {
    const TxlReduceTransport t = txl_nccl_transport(b->nccl);
    return txl_reducer_create_with(&t, grad, n, bucket, c->overlap_comm);
  }
#else
  (void)b;
#endif
  return txl_reducer_create(grad, n, bucket, c->overlap_comm);
}

int txl_backend_api_counts(const TxlBackend *b, long *launches, long *syncs) {
  *launches = *syncs = -1;
#ifdef TXL_HAVE_CUDA
  if (b->gpu >= 0) return txl_cuda_api_counts(launches, syncs);
#else
  (void)b;
#endif
  return 0;
}

long txl_backend_graph_launches(const TxlBackend *b) {
#ifdef TXL_HAVE_CUDA
  if (b->gpu >= 0) return txl_cuda_graph_launches();
#else
  (void)b;
#endif
  return -1;
}

size_t txl_backend_device_held(const TxlBackend *b) {
#ifdef TXL_HAVE_CUDA
  if (b->gpu >= 0) return txl_cuda_memory_held();
#else
  (void)b;
#endif
  return 0;
}

int txl_backend_can_capture(const TxlBackend *b) {
#ifdef TXL_HAVE_CUDA
  return b->gpu >= 0;
#else
  (void)b;
  return 0;
#endif
}

static void need_capture(const TxlBackend *b) {
  if (!txl_backend_can_capture(b)) txl_fatal("internal: a CUDA graph on the %s backend", b->device);
}

void txl_backend_capture_begin(const TxlBackend *b) {
  need_capture(b);
#ifdef TXL_HAVE_CUDA
  txl_cuda_graph_begin();
#endif
}

void *txl_backend_capture_end(const TxlBackend *b) {
  need_capture(b);
#ifdef TXL_HAVE_CUDA
  return txl_cuda_graph_end();
#else
  return NULL;
#endif
}

void txl_backend_graph_launch(const TxlBackend *b, void *graph) {
  need_capture(b);
#ifdef TXL_HAVE_CUDA
  txl_cuda_graph_launch(graph);
#else
  (void)graph;
#endif
}

void txl_backend_graph_destroy(const TxlBackend *b, void *graph) {
  if (!graph) return;
  need_capture(b);
#ifdef TXL_HAVE_CUDA
  txl_cuda_graph_destroy(graph);
#endif
}

long txl_backend_scratch_moves(const TxlBackend *b) {
#ifdef TXL_HAVE_CUDA
  if (b->gpu >= 0) return txl_cuda_scratch_moves();
#else
  (void)b;
#endif
  return 0;
}

void txl_backend_close(TxlBackend *b) {
#ifdef TXL_BACKEND_NCCL
  if (b->nccl) txl_nccl_destroy(b->nccl);
#endif
#ifdef TXL_HAVE_CUDA
  if (b->gpu >= 0) txl_cuda_release();
#endif
  memset(b, 0, sizeof *b);
  b->gpu = -1;
}
