/* Which parameter tensor a GEMM of the model multiplies by or accumulates into, told from its
 * operands' addresses in the model's buffers (kernels/profile.h's TxlGemmOfFn over a TxlModel):
 * how the device profile and bench_cuda_kernels --count split the GEMMs into families. */
#ifndef TXL_MODEL_GEMM_OF_H
#define TXL_MODEL_GEMM_OF_H

#include "kernels/profile.h"

/* model: a TxlModel. The first operand (B, then A, then C) that points into the compute copy of
 * the weights, the fp32 master weights or the gradients names the tensor: w_ff1 / w_ff2 are the
 * FFN's, w_qkv / w_r / w_o the attention's projections, any other (or none) the input and output
 * layers'. *weight: that operand (0 A, 1 B, 2 C), -1 for none. */
TxlGemmOf txl_model_gemm_of(void *model, const void *A, const void *B, const void *C, int *weight);

#endif
