/* The CUDA backend's ops of kind ACT (kernels/ops.def: one function per activation type), each
 * written once as a template on the activation type and instantiated for the three tables
 * (private to kernels/cuda; C++ / CUDA only). Who expands kernels/ops.def into what:
 *
 *   kernels/cuda/cuda_ops.h   the C API: txl_cuda_<name> for every op; for an op of kind ACT
 *                             also txl_cuda_<name>_bf16 and txl_cuda_<name>_fp16, each a const
 *                             pointer to the instantiation of that table's activation type
 *   this file                 the templates' declarations, txl_act_<name><AT> with the op's
 *                             signature (AT: TXL_F32, TXL_BF16 or TXL_F16), and the macro that
 *                             instantiates one of them into those three entry points
 *   kernels/cuda/<file>.cu    the op's template (the file named in cuda_ops.h), then
 *                             TXL_CUDA_ACT_ENTRIES(<name>) after it
 *   kernels/cuda/ops_table.cu the tables "cuda", "cuda-bf16" and "cuda-fp16", member by member
 *
 * So adding an op of kind ACT is its entry in ops.def plus its template and that one line; a
 * template whose signature is not the op's, or a missing line, does not build (the entry points'
 * type is the TxlOps member's, and ops_table.cu takes all three). What differs between the
 * precisions is in TxlAct<AT> below, not in special cases of the ops. */
#ifndef TXL_KERNELS_CUDA_ACT_H
#define TXL_KERNELS_CUDA_ACT_H

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

/* The storage type T of the `void *` tensors of the table whose activations are of type AT: float,
 * txl_bf16 or txl_fp16, which cuda_util.h's txl_ld / txl_st read and write. Everything else that
 * differs between the tables follows from AT as a value, by one function each: a TxlDtype
 * argument's check (txl_cuda_require_dtype), the optimizers' copy of the weights
 * (txl_cuda_check_act_copy), the cuBLAS data type (txl_cuda_data_type) and the GEMMs' compute
 * type (gemm.cu: compute_type, the fp32 table's TF32 setting). */
template <TxlDtype AT> struct TxlAct;
template <> struct TxlAct<TXL_F32> { using T = float; };
template <> struct TxlAct<TXL_BF16> { using T = txl_bf16; };
template <> struct TxlAct<TXL_F16> { using T = txl_fp16; };

/* txl_act_<name><AT>: the op <name> of the table whose activations are of type AT. */
#define TXL_CUDA_ACT_DECL_ONE(ret, name, params)
#define TXL_CUDA_ACT_DECL_ACT(ret, name, params) template <TxlDtype AT> ret txl_act_##name params;
#define TXL_OP(kind, ret, name, params) TXL_CUDA_ACT_DECL_##kind(ret, name, params)
#include "kernels/ops.def"
#undef TXL_OP
#undef TXL_CUDA_ACT_DECL_ONE
#undef TXL_CUDA_ACT_DECL_ACT

/* The entry points of cuda_ops.h for the op `name`, after its template's definition (which they
 * instantiate): txl_cuda_<name> (TXL_F32), txl_cuda_<name>_bf16, txl_cuda_<name>_fp16. */
#define TXL_CUDA_ACT_ENTRIES(name)                                                        \
  extern "C" decltype(TxlOps::name) const txl_cuda_##name = txl_act_##name<TXL_F32>;      \
  extern "C" decltype(TxlOps::name) const txl_cuda_##name##_bf16 = txl_act_##name<TXL_BF16>; \
  extern "C" decltype(TxlOps::name) const txl_cuda_##name##_fp16 = txl_act_##name<TXL_F16>;

#endif
