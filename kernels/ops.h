/* The operations a Transformer-XL is made of, as one table of function pointers per backend.
 * The model (src/model) calls only these; it never knows which device runs them. The ops, their
 * signatures and what each computes are listed once, in kernels/ops.def.
 *
 * Conventions for every op:
 *   - outputs first, then inputs, then sizes; gradient pointers are prefixed `d`;
 *   - gradients of PARAMETERS accumulate (+=); gradients of ACTIVATIONS overwrite (=),
 *     except where an op says "(+=, residual stream)";
 *   - tensors are row-major, time-major ([T, B, ...]); every pointer is device memory of the
 *     backend (host memory for the CPU backend);
 *   - no op allocates: scratch comes from a workspace whose size the backend reports, or from
 *     what the op reserve made when the run was created.
 *
 * Storage types. A table stores activations in one type, `act` (TXL_F32, or TXL_BF16 / TXL_F16
 * for the mixed-precision CUDA tables); every op computes in fp32 after widening and rounds once when it
 * stores. In the signatures:
 *   - `void *` / `const void *` tensors are in the table's `act` type: activations, their
 *     gradients, and the GEMM operands (weights as the model's compute copy, see src/model);
 *   - `float *` tensors are fp32 whatever the table: parameters read by element-wise ops (biases,
 *     LayerNorm weights, u, v_b), parameter gradients, LayerNorm statistics, losses, the
 *     attention's saved statistics, Adam's state;
 *   - where one op serves both (a GEMM's C, the embedding backward's destination, add), a
 *     TxlDtype argument says which.
 * The CPU table is TXL_F32 only (an op asked for bf16 or fp16 there ends the job as an internal
 * error). */
#ifndef TXL_KERNELS_OPS_H
#define TXL_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/adam.h"
#include "kernels/common/clip.h"
#include "kernels/common/dropout.h"
#include "kernels/common/group.h"

/* Storage type of a tensor: fp32, bfloat16 (kernels/common/bf16.h) or IEEE binary16
 * (kernels/common/fp16.h). */
typedef enum { TXL_F32 = 0, TXL_BF16 = 1, TXL_F16 = 2 } TxlDtype;

/* Bytes of one element of type t. */
static inline size_t txl_dtype_size(TxlDtype t) { return t == TXL_F32 ? 4 : 2; }

/* Shape of one relative-attention call. K = M + L keys: M memory rows, then the L current rows. */
typedef struct {
  int L;           /* query rows (current segment length)                         */
  int M;           /* memory rows before them                                      */
  int B;           /* batch columns on this rank                                   */
  int H;           /* heads                                                        */
  int dh;          /* head size                                                    */
  int col0;        /* global index of this rank's first column (dropout key)       */
  int same_length; /* 0: causal mask only; 1: also mask j <= i - same_shift         */
  int same_shift;  /* s in [0, L] (see src/model for how it follows from mem_len)   */
  float scale;     /* 1 / sqrt(dh)                                                 */
  /* Row strides, in elements: rows ld apart, the gaps neither read nor written. Every caller sets
   * all three (no "0 means packed"); one smaller than its rows' width is an internal error. */
  int ldq;         /* between consecutive (i, c) rows of q, vec, dq and dvec (>= H*dh) */
  int ldkv;        /* between consecutive (j, c) rows of kv and dkv (>= 2*H*dh): k at 0,
                      v at H*dh of each row                                           */
  int ldr;         /* between consecutive rows p of r and dr (>= H*dh)                */
} TxlAttnShape;

/* The table: a name, the activation type, then one function pointer per op of kernels/ops.def
 * (where each op's contract is written beside it), in that file's order. */
typedef struct TxlOps {
  const char *name; /* "cpu", "cuda", "cuda-bf16" or "cuda-fp16" */
  TxlDtype act;     /* storage type of activations (the `void *` tensors of the ops) */
  int row_align;    /* elements the rows of a GEMM operand are padded to (src/model/params.h):
                       8 on CUDA (16 bytes of bf16 / fp16, cuBLAS's fast kernels), 1 on the CPU */
  int host_memory;  /* 1 where the backend's memory is the host's (the CPU): a result read back
                       costs no wait, so shapes that depend on the data (the adaptive softmax's
                       clusters, src/model/adaptive.c) are read and used as they are; 0 on a GPU
                       (and the counting backend, which stands for one), where they are padded to
                       fixed capacities instead */
#define TXL_OP(kind, ret, name, params) ret(*name) params;
#include "kernels/ops.def"
#undef TXL_OP
} TxlOps;

/* The CPU backend (kernels/cpu). Always available. */
const TxlOps *txl_ops_cpu(void);

#endif
