/* The CPU backend's ops, one function per TxlOps member, with exactly the member's signature
 * (see kernels/ops.def for what each computes, the shapes and the += / = conventions).
 * Host memory throughout. Threads: OpenMP for the element-wise and row-wise ops, OpenBLAS for
 * gemm (kernels/cpu/threads.h sets both). Every op is deterministic: its result does not depend
 * on the number of threads or on their timing (fixed partitions, fixed reduction orders). */
#ifndef TXL_KERNELS_CPU_KERNELS_H
#define TXL_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

/* One txl_cpu_<name> per op of kernels/ops.def, with the op's signature. The files: memory.c
 * (with to_act), gemm.c, elementwise.c (bias, add, sumsq), embedding.c, adaptive_group.c, posemb.c,
 * dropout.c, ffn.c, layernorm.c, rel_attn.c (saves the probabilities before dropatt: [B, H, L, K]),
 * xent.c, adam.c (adam_update, adam_fused), sgd_lamb.c (sgd_update, lamb_moments, axpy, sgd_fused,
 * axpy_fused). */
#define TXL_OP(kind, ret, name, params) ret txl_cpu_##name params;
#include "kernels/ops.def"
#undef TXL_OP

/* The dropout op on rows [row0, row0 + rows) of a larger tensor: x points at row row0 (the masks
 * are those of the whole tensor's rows). Used by the fused ops, one row at a time. */
void txl_cpu_dropout_rows(float *x, int row0, int rows, int cols, int feats, int ld, int col0, TxlDropout d);

/* The fused optimizer passes' check of their p_act argument (kernels/ops.def): the CPU table's
 * activations are fp32, so the weights' compute copy is p itself; any other pointer ends the job
 * as an internal error naming op. */
void txl_cpu_check_act_copy(const void *p_act, const float *p, const char *op);

#endif
