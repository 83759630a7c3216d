/* The emulator's models of the instructions kernels/cuda/ptx.h wraps (emu_ptx.cpp): what that
 * header calls under TXL_CUDA_EMU, and nothing a kernel calls directly.
 *
 * mma.sync and ldmatrix are warp-wide: every lane of a full warp must reach the same one (the
 * checks of a shuffle: emu_fibers.cpp), each hands over its fragments or its row address, and
 * each then reads what the PTX ISA's fragment layout gives it from the whole warp's. cp.async
 * copies are kept per thread, in groups, and written to their shared-memory destinations (NaN
 * bytes until then) by the wait that covers their group; a thread that returns with copies not
 * waited for is an error. Each model checks what the PTX ISA requires: the architecture, the
 * alignment, the state spaces (ldmatrix's rows and cp.async's destinations in the launch's
 * dynamic shared memory, which is the shared memory the emulator can tell; cp.async's sources in
 * a cudaMalloc allocation), tf32 operands rounded to tf32. */
#ifndef TXL_KERNELS_EMU_PTX_H
#define TXL_KERNELS_EMU_PTX_H

#include <stdint.h>

enum TxlEmuMma {
  TXL_EMU_MMA_BF16_M16N8K16, /* a [4], b [2]; sm_80 */
  TXL_EMU_MMA_F16_M16N8K16,  /* a [4], b [2]; sm_80 */
  TXL_EMU_MMA_TF32_M16N8K8,  /* a [4], b [2]; sm_80 */
  TXL_EMU_MMA_F16_M16N8K8,   /* a [2], b [1]; sm_75 */
};

/* d [4] = A B + c [4] for the warp, this lane's fragments a and b (ptx.h's layouts). */
void txl_emu_mma(TxlEmuMma shape, float d[4], const uint32_t *a, const uint32_t *b, const float c[4]);

/* cvt.rna.tf32.f32 */
uint32_t txl_emu_tf32_from_float(float x);

/* ldmatrix .x<n> (n = 1, 2, 4), .trans when trans: r [n] from the rows the lanes address. */
void txl_emu_ldmatrix(int n, int trans, uint32_t *r, const void *row);

/* cp.async of `bytes` (4, 8, 16), the first src_bytes read; commit_group; wait_group n. */
void txl_emu_cp_async(void *dst, const void *src, int bytes, int src_bytes);
void txl_emu_cp_async_commit(void);
void txl_emu_cp_async_wait(int n);

#endif
