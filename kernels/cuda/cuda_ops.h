/* The CUDA backend's ops, one function per TxlOps member and activation type (see below), each
 * with exactly that member's signature (see kernels/ops.def for what each computes, the shapes and the += / =
 * conventions), so that the backend table can take them directly. Plain C API (the rest of txl
 * is C11); every pointer argument of an op is device memory, except the host_* ones.
 *
 * Execution model: one host thread drives one device (txl_cuda_set_device picks it before the
 * first op). All kernels, copies, memsets and cuBLAS / cuBLASLt calls go to one non-blocking
 * compute stream (stream.cu), so ops run in call order; to_host waits for the work before it. The
 * stream and the cuBLAS handle are made on the first call, on the current device; the scratch buffers of the reductions (layer-norm dw/db partials,
 * column-sum and sum-of-squares partials, the sort of the embedding backward) by the op reserve,
 * on the current device, for the largest calls to come (no other op allocates).
 *
 * txl_ops_cuda(act) (ops_table.cu) is the backend table made of them. */
#ifndef TXL_KERNELS_CUDA_OPS_H
#define TXL_KERNELS_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/peaks.h"
#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use; 0 (not an error) when there is no device, no
 * driver, or the driver is too old for the runtime. */
int txl_cuda_device_count(void);

/* Makes `gpu` this host thread's device and describes it: name, memory in bytes, streaming
 * multiprocessors, compute capability, and its peaks from the table of kernels/cuda/peaks.c
 * (SMs x clock x FMAs per SM and clock of that architecture and part x 2). */
typedef struct {
  char name[256]; /* as cudaDeviceProp.name */
  size_t memory;
  size_t free_memory; /* free when set: what this process may still allocate (cudaMemGetInfo) */
  int sms, major, minor;
  double peak[TXL_PEAK_KINDS]; /* FLOP/s of the fp32 CUDA cores, TF32, bf16, fp16 tensor cores
                                * (dense); 0 where the part has no such arithmetic or the
                                * capability is not in the table */
  double dram_peak;  /* bytes/s: the part's datasheet figure, else 2 x memory clock x bus width */
} TxlCudaDevice;
void txl_cuda_set_device(int gpu, TxlCudaDevice *info);
/* The PCI bus id of visible device gpu ("0000:17:00.0"): the same physical GPU has the same id
 * whatever index each process sees it at (CUDA_VISIBLE_DEVICES). */
void txl_cuda_device_bus_id(int gpu, char *out, int n);

/* The backend's compute stream (a cudaStream_t, as void * for C callers: dist/nccl.h takes CUDA
 * handles so), made on the current device if it does not exist yet. stream.cu. */
void *txl_cuda_compute_stream(void);

/* How the host waits for the device (host_wait.cu): every wait of the backend (a read to the host,
 * the upload ring, the profile, NCCL's stream) is txl_cuda_wait_event on an event recorded after
 * the work, or txl_cuda_wait_stream on a stream (both take CUDA handles as void *). By default they
 * are the runtime's blocking waits (cudaEventSynchronize, cudaStreamSynchronize). With a host wait
 * set (not NULL), a wait calls fn(ready, ctx, what), which returns once ready(ctx) (a
 * cudaEventQuery) returned 1, or ends the job, then completes with the runtime's wait (which
 * finds the work done): dist/nccl.c sets dist/'s deadline there while a communicator of several
 * ranks is open, so that a GPU waiting for a collective another rank never reaches does not hold
 * the host for ever. `what` names the wait in words ("a read to the host"). NULL: the default. */
typedef void (*TxlCudaHostWait)(int (*ready)(void *ctx), void *ctx, const char *what);
void txl_cuda_set_host_wait(TxlCudaHostWait fn);
void txl_cuda_wait_event(void *event, const char *what);
void txl_cuda_wait_stream(void *stream, const char *what);

/* Milliseconds per call of fn(ctx) (work queued on the compute stream), timed with CUDA events
 * over `iters` calls after `warmup` untimed ones (benchmarks). */
double txl_cuda_time_ms(void (*fn)(void *ctx), void *ctx, int warmup, int iters);

/* GEMM arithmetic of the fp32 table's txl_cuda_gemm (run.precision fp32 or tf32). Operands and
 * results stay fp32 in memory; TF32 rounds the operands inside the tensor cores (10-bit
 * mantissa) and accumulates in fp32. The bf16 and fp16 tables' txl_cuda_gemm_bf16 /
 * txl_cuda_gemm_fp16 always compute in fp32 on their operands (exactly widened) and are not
 * affected. */
typedef enum { TXL_GEMM_FP32 = 0, TXL_GEMM_TF32 = 1 } TxlGemmMath;
void txl_cuda_set_gemm_math(TxlGemmMath math);

/* The route of the relative attention's forward in the bf16 and fp16 tables (rel_attn.cu):
 * TXL_ATTN_GEMM (the default: gathers, cuBLAS GEMMs and row kernels, the score matrices in
 * memory) or TXL_ATTN_FUSED (rel_attn_fused.cu: one tensor-core kernel, no score matrix; taken
 * where the device is sm_80 or newer and the head size at most 128, the GEMM route elsewhere).
 * Both save the same log-sum-exp, which the backward (the GEMM route's) reads. The fp32 table
 * always takes the GEMM route. */
typedef enum { TXL_ATTN_GEMM = 0, TXL_ATTN_FUSED = 1 } TxlAttnImpl;
void txl_cuda_set_attn_impl(TxlAttnImpl impl);

/* One function per op of kernels/ops.def, with the op's signature: txl_cuda_<name>, and for an op
 * of kind ACT (it has activation tensors, the `void *` of its signature) two more,
 * txl_cuda_<name>_bf16 and txl_cuda_<name>_fp16: txl_cuda_<name> serves the "cuda" table
 * (activations fp32), txl_cuda_<name>_bf16 the "cuda-bf16" table (activations bf16) and
 * txl_cuda_<name>_fp16 the "cuda-fp16" table (activations IEEE fp16); those three are const
 * pointers to one template's instantiations (kernels/cuda/act.h), called as functions. Where an op takes a
 * TxlDtype, txl_cuda_<name> accepts TXL_F32 only, txl_cuda_<name>_bf16 TXL_BF16 or TXL_F32 and
 * txl_cuda_<name>_fp16 TXL_F16 or TXL_F32; any other ends the job as an internal error. The files are named after the ops: memory.cu (to_act in
 * elementwise.cu, upload and upload_reserve in upload.cu), gemm.cu, gemm_lt.cu (gemm_bias, gemm_wgrad_bias), elementwise.cu, ffn.cu,
 * embedding.cu, adaptive_group.cu, posemb.cu, dropout.cu, layernorm.cu, rel_attn*.cu, xent.cu, adam.cu. */
#define TXL_CUDA_DECL_ONE(ret, name, params) ret txl_cuda_##name params;
#define TXL_CUDA_DECL_ACT(ret, name, params)    \
  extern ret (*const txl_cuda_##name) params;       \
  extern ret (*const txl_cuda_##name##_bf16) params; \
  extern ret (*const txl_cuda_##name##_fp16) params;
#define TXL_OP(kind, ret, name, params) TXL_CUDA_DECL_##kind(ret, name, params)
#include "kernels/ops.def"
#undef TXL_OP
#undef TXL_CUDA_DECL_ONE
#undef TXL_CUDA_DECL_ACT

/* ---- the backend ------------------------------------------------------------------------- */
/* The table of the ops above for activations of type act (ops_table.cu): "cuda" (TXL_F32: the
 * txl_cuda_X functions), "cuda-bf16" (TXL_BF16: the txl_cuda_X_bf16 ones where an op has them)
 * or "cuda-fp16" (TXL_F16: the txl_cuda_X_fp16 ones). */
const TxlOps *txl_ops_cuda(TxlDtype act);

/* Releases the cuBLAS handle, the scratch buffers and the compute stream (optional, at exit; ops
 * may be called again afterwards, after a new txl_cuda_reserve where they need scratch, on a new
 * stream). */
void txl_cuda_release(void);

/* How many calls of gemm_bias / gemm_wgrad_bias (gemm_lt.cu) ran as one cuBLASLt matmul with the
 * fused epilogue, and how many as the unfused passes (the library had no algorithm for that
 * combination), since the process started. */
void txl_cuda_gemm_epilogue_counts(long *fused, long *unfused);

/* Kernel launches and host synchronisations since the process started, where this build can count
 * them: 1 and the counts on the CPU emulator of the kernels (kernels/emu: launches are kernels
 * and cuBLAS / cuBLASLt GEMM calls, syncs the runtime calls that make the host wait for the device,
 * by the rule of its README); 0 on a GPU, where nothing counts them (*launches and *syncs set to -1). */
int txl_cuda_api_counts(long *launches, long *syncs);
/* Bytes of device memory held now in the blocks of txl_cuda_alloc (cuBLAS', NCCL's and the CUDA
 * context's own memory not included). */
size_t txl_cuda_memory_held(void);
/* CUDA graphs launched since the process started (their kernels are not in txl_cuda_api_counts'
 * launches, which the host issued one by one), where counted (the emulator); else -1. */
long txl_cuda_graph_launches(void);

/* CUDA graphs of the compute stream (graph.cu; run.cuda_graph, src/train/graph_step.c):
 * graph_begin starts capturing the stream's work (global mode: a call that would synchronise or
 * allocate meanwhile fails, and ends the job); graph_end ends the capture and returns the
 * instantiated graph; graph_launch replays it on the compute stream (no host synchronisation);
 * graph_destroy frees it (NULL: nothing). */
void txl_cuda_graph_begin(void);
void *txl_cuda_graph_end(void);
void txl_cuda_graph_launch(void *graph);
void txl_cuda_graph_destroy(void *graph);
/* How many times a scratch buffer of the backend (the ops' reductions, cuBLASLt's workspace:
 * TxlCudaScratch, grown when a run is created) was made or freed since the process started: a
 * captured graph that uses one is stale when this changed since its capture. */
long txl_cuda_scratch_moves(void);
/* 1 while the compute stream is capturing. */
int txl_cuda_capturing(void);

#ifdef __cplusplus
}
#endif

#endif
