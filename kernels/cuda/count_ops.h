/* A backend that computes nothing and counts: every op of kernels/ops.def adds what the CUDA
 * backend's call with the same arguments would execute (kernels/cuda/cost.h: tensor-core and
 * CUDA-core FLOPs, global-memory bytes, launches) to the cost of its kernel family. Running the
 * real model code over this table gives the counts of a training or evaluation step from the
 * launch shapes themselves (bench_cuda_kernels --count). Counts, not measurements.
 *
 * Memory is address space only (mmap without reserve, never touched): the largest recipes'
 * buffers cost nothing. to_host fills the host buffer with zeros; to_device, copies and the like
 * only count their bytes. One counting state per process (the table is a plain TxlOps). */
#ifndef TXL_KERNELS_CUDA_COUNT_OPS_H
#define TXL_KERNELS_CUDA_COUNT_OPS_H

#include "kernels/cuda/cost.h"
#include "kernels/ops.h"
#include "kernels/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel families a step's cost is split into. GEMMs are split by the parameter tensor they
 * multiply by or accumulate into (txl_count_set_gemm_family); the rest by op. */
typedef enum {
  TXL_COUNT_GEMM_FFN,       /* w_ff1, w_ff2 */
  TXL_COUNT_GEMM_ATTN_PROJ, /* w_qkv, w_r, w_o */
  TXL_COUNT_GEMM_IO,        /* the input and output layers: embeddings, adaptive projections, softmax */
  TXL_COUNT_ATTENTION,      /* rel_attn_forward / _backward: the O(L K dh) work */
  TXL_COUNT_LAYERNORM,
  TXL_COUNT_FFN_ELEMENTWISE, /* bias + ReLU + dropout and its backward */
  TXL_COUNT_EMBEDDING,      /* gathers, their scatter-add backward, the sinusoid positions */
  TXL_COUNT_SOFTMAX_XENT,
  TXL_COUNT_DROPOUT,
  TXL_COUNT_OPTIMIZER,      /* the optimizer chain of a step: the zeroing of the gradients, their sum
                               of squares, Adam, the bf16 weight copy */
  TXL_COUNT_OTHER,          /* biases, additions, other zeroing, copies, host <-> device transfers */
  TXL_COUNT_FAMILIES
} TxlCountFamily;

/* "gemm_ffn", "attention", ... (one word each: the printout is parsed by tests). */
const char *txl_count_family_name(int family);

/* The counting table with activations of type act (TXL_F32, TXL_BF16 or TXL_F16); tf32: its fp32
 * GEMMs (and the attention's products) count as TF32 on tensor cores (run.precision = tf32).
 * Resets the counts. */
const TxlOps *txl_count_ops(TxlDtype act, int tf32);

/* Which GEMM family a gemm call belongs to: fn says which parameter it multiplies by
 * (kernels/profile.h); NULL (the default) puts every GEMM into TXL_COUNT_GEMM_IO, without a
 * weight. */
void txl_count_set_gemm_family(TxlGemmOfFn fn, void *ctx);

/* The family the last call of the table counted into first (its kernel's; an epilogue's
 * arithmetic may go to another), -1 when it counted nothing (memory management, a dropout of
 * p = 0); txl_count_call_begin sets it to -1 before a call. For the profile, which runs each op
 * of its table through this one. */
void txl_count_call_begin(void);
int txl_count_call_family(void);

/* The gradient buffer, `bytes` from grad: a zero of it (the step's zeroing of the gradients) counts
 * in TXL_COUNT_OPTIMIZER, every other zero in TXL_COUNT_OTHER. NULL (the default): none. */
void txl_count_set_gradients(const void *grad, size_t bytes);

/* The GEMM calls whose operands start on 16 bytes and whose rows lie a multiple of 16 bytes apart
 * (pointer and leading dimension: what cuBLAS's fast kernels ask), since the last reset. */
typedef struct {
  double calls, all_aligned;         /* every call; those with A, B and C aligned */
  double weight_calls, weight_aligned; /* the calls with a weight operand; those whose weight is aligned */
} TxlCountAlign;
const TxlCountAlign *txl_count_gemm_align(void);

/* Sets every family's count to zero. */
void txl_count_reset(void);
/* The counts since the last reset, [TXL_COUNT_FAMILIES]. */
const TxlCudaCost *txl_count_costs(void);

#ifdef __cplusplus
}
#endif

#endif
