/* What one call of a CUDA op executes on the device, counted from its shapes (not measured):
 * the work of the GEMMs (on tensor cores or on the CUDA cores), the arithmetic of the other
 * kernels, the global-memory bytes their operands and results move (each read or written once:
 * a lower bound for what caches let through), and the launches. Used by the benchmark's
 * --count (tests/cuda/bench_kernels.c) to print, per kernel family and recipe, what a training
 * step executes. Plain C. */
#ifndef TXL_KERNELS_CUDA_COST_H
#define TXL_KERNELS_CUDA_COST_H

#include "kernels/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TxlCudaCost {
  double tensor_flops; /* GEMM FLOPs (2 per multiply-add) on tensor cores: tf32, bf16 or fp16 operands */
  double core_flops;   /* FLOPs on the CUDA cores: fp32 GEMMs and every other kernel's arithmetic */
  double bytes;        /* global memory read + written */
  double launches;     /* kernel launches and cuBLAS calls */
} TxlCudaCost;

/* c += the cost of one txl_cuda_rel_attn_forward (backward = 0) or _backward (backward = 1)
 * call of shape s with activations of type act; tf32: the fp32 table's GEMMs run in TF32
 * (txl_cuda_set_gemm_math), ignored for TXL_BF16 and TXL_F16 (always on tensor cores). bd: the
 * call has r (the BD term; then u too, and vb unless rb); rb: it has attn_type 1's per-key bias;
 * neither: plain attention without u and vb (attn_type 2, 3). Same plan as the calls themselves
 * (kernels/cuda/rel_attn.cu). The bytes are those of the rows' elements: the row strides of s
 * (padded rows) do not change the count, as the gaps are neither read nor written. */
void txl_cuda_rel_attn_cost(TxlAttnShape s, TxlDtype act, int tf32, int backward, int bd, int rb, TxlCudaCost *c);

#ifdef __cplusplus
}
#endif

#endif
