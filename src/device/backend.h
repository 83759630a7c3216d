/* The device a rank computes on, chosen by run.device: the CPU backend (threads), or the CUDA
 * backend on the GPU of the rank's node-local index, with NCCL for the gradient all-reduce.
 * The only file of src/ that knows whether the build has CUDA: it is compiled into its own
 * library, txl_backend (CPU only, or with the CUDA backend and NCCL), or txl_backend_emu (the
 * CUDA backend on the kernels' CPU emulator, kernels/emu). */
#ifndef TXL_DEVICE_BACKEND_H
#define TXL_DEVICE_BACKEND_H

#include "dist/dist.h"
#include "dist/reduce.h"
#include "kernels/ops.h"
#include "kernels/profile.h"

/* The device a rank is asked for, in the backend's own terms: src/train/config_map.h makes it from
 * run.device, run.precision and run.threads, so that the backend knows no config. The messages
 * below name those keys, as the user wrote them. */
typedef enum { TXL_BACKEND_CPU, TXL_BACKEND_CUDA, TXL_BACKEND_AUTO } TxlBackendDevice;
typedef enum { TXL_BACKEND_FP32, TXL_BACKEND_TF32, TXL_BACKEND_BF16, TXL_BACKEND_FP16 } TxlBackendPrecision;
typedef struct {
  TxlBackendDevice device;
  TxlBackendPrecision precision;
  int threads; /* CPU threads of the rank; <= 0: $OMP_NUM_THREADS, else the node's cores / its ranks */
  int fused_attn; /* run.attn_impl = fused: the attention's fused forward where the GPU has it */
} TxlDeviceSpec;

/* "fp32", "tf32", "bf16", "fp16": a precision as run.precision writes it. */
const char *txl_backend_precision_name(TxlBackendPrecision p);

typedef struct {
  const TxlOps *ops;
  int threads;       /* CPU threads of the rank (the CPU backend's compute threads)            */
  int gpu;           /* the rank's GPU, -1 on the CPU                                           */
  int tf32;          /* the fp32 table's GEMMs run in TF32 (run.precision = tf32)                */
  int profiled;      /* ops is the device profile's table (txl_backend_profile_open)            */
  char device[384];  /* what the start-up summary prints: "cpu" or "cuda:0 (name, memory)"     */
  char gpu_rule[160]; /* on a GPU, how the ranks chose theirs (dist/gpu.h), for the summary; else "" */
  double peak_flops; /* the device's peak in FLOP/s of the arithmetic run.precision uses (GPU; 0
                      * on the CPU, where it is measured instead, or for an unknown GPU) */
  const char *peak_of; /* that arithmetic: "fp32 CUDA cores", "TF32 tensor cores", ... */
  double peak_fp32_flops; /* the GPU's fp32 CUDA-core peak in FLOP/s (0 on the CPU or unknown) */
  double dram_bytes_s; /* the GPU's memory bandwidth in bytes/s (0 on the CPU or unknown) */
  double free_bytes; /* the GPU's free memory when opened; 0 on the CPU (host memory is asked elsewhere) */
  void *nccl;        /* the NCCL communicator (GPU runs of several ranks), else NULL            */
  const struct TxlDeviceFns *fns; /* the device's functions beyond the ops (backend.c), chosen once by
                                   * txl_backend_open */
} TxlBackend;

/* run.device = auto made cpu or cuda: cuda where this build has the CUDA backend and every rank
 * sees a GPU. Writes into note (else "") the line a tool prints at start (rank 0's view): what auto
 * chose and why, or a warning when a rank sees GPUs (or SLURM allocated the node some) and
 * run.device = cpu. Returns 1 (auto resolved), 2 (the warning) or 0 (nothing to say). Before
 * anything depends on run.device (validation, estimates). collective */
int txl_backend_resolve_device(TxlBackendDevice *device, const TxlDist *d, char *note, size_t n);

/* The op table run.device and run.precision ask for, without opening a device (for estimates and
 * txl-train --check): NULL with a one-line message in err when this build or that device cannot
 * run them (bf16 on the CPU, cuda in a build without the CUDA backend). */
const TxlOps *txl_backend_ops(const TxlDeviceSpec *s, char *err, size_t errlen);

/* Opens the backend the spec asks for (its device cpu or cuda: resolved). A build without CUDA, a node without GPUs or with more
 * ranks than GPUs ends the job with a one-line error. `collectives`: also join the NCCL
 * communicator when several ranks run on GPUs (training). collective: all ranks */
void txl_backend_open(TxlBackend *b, const TxlDeviceSpec *s, const TxlDist *d, int collectives);

/* The gradient all-reduce over grad[0, n) (device memory): MPI for the CPU backend, NCCL on
 * GPUs, in buckets of bucket_mb MiB, overlapping the backward pass when `overlap` (dist/reduce.h).
 * NULL with one rank. collective: all ranks */
TxlReducer *txl_backend_reducer(TxlBackend *b, const TxlDist *d, double bucket_mb, int overlap, float *grad,
                                int64_t n);

/* Kernel launches and host synchronisations of this rank since the process started: 1 and the counts
 * where the build counts them (the CUDA backend on the kernels' CPU emulator, txl_backend_emu), else
 * 0 (the CPU; a real GPU, where nothing counts them). */
int txl_backend_api_counts(const TxlBackend *b, long *launches, long *syncs);

/* CUDA graphs launched by this rank since the process started, where counted (the emulated CUDA
 * backend); else -1. */
long txl_backend_graph_launches(const TxlBackend *b);
/* Bytes of device memory txl's own buffers hold now (txl_cuda_memory_held); 0 on the CPU. */
size_t txl_backend_device_held(const TxlBackend *b);

/* CUDA graphs of the backend's compute stream (kernels/cuda/cuda_ops.h; the CUDA backend only:
 * txl_backend_can_capture says 1): begin capturing, end with the instantiated graph, replay it,
 * free it (NULL: nothing). Any other backend ends the job as an internal error. */
int txl_backend_can_capture(const TxlBackend *b);
void txl_backend_capture_begin(const TxlBackend *b);
void *txl_backend_capture_end(const TxlBackend *b);
void txl_backend_graph_launch(const TxlBackend *b, void *graph);
void txl_backend_graph_destroy(const TxlBackend *b, void *graph);
/* A count that changes whenever the backend makes or frees a buffer of its own (not a run's) that
 * a captured graph may use: a graph captured at another count is stale (0 where nothing captures). */
long txl_backend_scratch_moves(const TxlBackend *b);

/* The device profile (kernels/profile.h; txl-train --bench --profile): b->ops becomes a table that
 * runs the backend's ops and counts and times each op family's calls in the steps bracketed by
 * txl_backend_profile_step; max_marks: the events a step may take. Returns 0 with nothing changed
 * where the device has no profile (the CPU). Before anything is made with b->ops. */
int txl_backend_profile_open(TxlBackend *b, int max_marks);
/* The model's layout, once it is made: which parameter a GEMM multiplies by (fn over model), and
 * the gradient buffer grad[0, bytes) (its zeroing is the optimizer's). */
void txl_backend_profile_model(const TxlBackend *b, TxlGemmOfFn fn, void *model, const void *grad, size_t bytes);
/* begin = 1 before a step, 0 after it (the host then waits for the device and adds the step). */
void txl_backend_profile_step(const TxlBackend *b, int begin);
const TxlProfileTotals *txl_backend_profile_totals(const TxlBackend *b);

/* collective: all ranks */
void txl_backend_close(TxlBackend *b);

#endif
