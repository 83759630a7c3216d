/* The tensor-core and asynchronous-copy instructions the kernels issue, each behind one device
 * function (private to kernels/cuda; CUDA / C++ only). Under nvcc each is one inline PTX
 * instruction; under the CPU emulator (TXL_CUDA_EMU) the emulator's model of it
 * (kernels/emu/emu_ptx.cpp), which checks what the PTX ISA requires of its operands. A kernel
 * never writes asm itself: every instruction it issues is one the emulator models, and the
 * instruction self-test (tests/cuda/test_ptx.cu) checks on both against plain loops.
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8"; lane = the thread's
 * index in its warp, g = lane / 4, t = lane % 4; "low to high": element 0 in the low bits):
 *   m16n8k16 bf16 / f16  A 16x16 row-major: a[r] holds 2 elements, element i = 2r + h at row
 *                        g + 8 ((i / 2) % 2), column 2t + (i % 2) + 8 (i / 4);
 *                        B 16x8: b[r] element j = 2r + h at row 2t + (j % 2) + 8 (j / 2), column g
 *   m16n8k8 tf32         A 16x8: a[i] at row g + 8 (i % 2), column t + 4 (i / 2);
 *                        B 8x8: b[i] at row t + 4 i, column g
 *   m16n8k8 f16          A 16x8: a[r] element i = 2r + h at row g + 8 (i / 2), column 2t + (i % 2);
 *                        B 8x8: b[0] element j at row 2t + j, column g
 *   C and D (fp32)       c[i], d[i] at row g + 8 (i / 2), column 2t + (i % 2)
 * D = A B + C, products and sums in at least fp32 (the device's internal order and rounding are
 * not documented: the emulator sums exactly and rounds once; tests bound the difference).
 *
 * Architectures: the m16n8k16 shapes, tf32 and cp.async need sm_80 (the device code of an older
 * target traps, and the host never takes such a kernel there); m16n8k8 f16 and ldmatrix run
 * from sm_75. The emulator ends the process naming the instruction when the emulated
 * architecture (TXL_EMU_ARCH) lacks it. */
#ifndef TXL_KERNELS_CUDA_PTX_H
#define TXL_KERNELS_CUDA_PTX_H

#include <stdint.h>

#include "kernels/cuda/cuda_check.h"

#ifdef TXL_CUDA_EMU
#include "kernels/emu/emu_ptx.h"
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TXL_PTX_SM80 1
#endif

/* ---- conversion ------------------------------------------------------------------------------ */
/* x rounded to tf32 (10 mantissa bits, to nearest, ties away from zero: cvt.rna.tf32.f32), as
 * the bits of a .b32 register: the tf32 mma's operand. */
static __device__ __forceinline__ uint32_t txl_tf32_from_float(float x) {
#ifdef TXL_CUDA_EMU
  return txl_emu_tf32_from_float(x);
#elif defined(TXL_PTX_SM80)
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
#else
  (void)x;
  __trap();
  return 0;
#endif
}

/* ---- mma.sync: one warp, every lane with its fragments -------------------------------------- */
/* the shapes with four A registers and two B registers, d = a b + c in fp32 */
#define TXL_PTX_MMA_A4B2(instr)                                                                             \
  asm volatile(instr " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"                       \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),    \
                 "f"(c[2]), "f"(c[3]))
static __device__ __forceinline__ void txl_mma_bf16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                             const float c[4]) {
#ifdef TXL_CUDA_EMU
  txl_emu_mma(TXL_EMU_MMA_BF16_M16N8K16, d, a, b, c);
#elif defined(TXL_PTX_SM80)
  TXL_PTX_MMA_A4B2("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
#else
  (void)d, (void)a, (void)b, (void)c;
  __trap();
#endif
}

static __device__ __forceinline__ void txl_mma_f16_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                            const float c[4]) {
#ifdef TXL_CUDA_EMU
  txl_emu_mma(TXL_EMU_MMA_F16_M16N8K16, d, a, b, c);
#elif defined(TXL_PTX_SM80)
  TXL_PTX_MMA_A4B2("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
#else
  (void)d, (void)a, (void)b, (void)c;
  __trap();
#endif
}

/* a and b hold tf32 values (txl_tf32_from_float): the emulator refuses other bits */
static __device__ __forceinline__ void txl_mma_tf32_m16n8k8(float d[4], const uint32_t a[4], const uint32_t b[2],
                                                            const float c[4]) {
#ifdef TXL_CUDA_EMU
  txl_emu_mma(TXL_EMU_MMA_TF32_M16N8K8, d, a, b, c);
#elif defined(TXL_PTX_SM80)
  TXL_PTX_MMA_A4B2("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
#else
  (void)d, (void)a, (void)b, (void)c;
  __trap();
#endif
}

/* sm_75's shape: a [2], b [1] */
static __device__ __forceinline__ void txl_mma_f16_m16n8k8(float d[4], const uint32_t a[2], const uint32_t b[1],
                                                           const float c[4]) {
#ifdef TXL_CUDA_EMU
  txl_emu_mma(TXL_EMU_MMA_F16_M16N8K8, d, a, b, c);
#else
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
               "{%7,%8,%9,%10};\n"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

/* ---- ldmatrix: 1, 2 or 4 8x8 matrices of 16-bit elements from shared memory ---------------- */
/* Lane 8m + j gives the address of row j of matrix m (16 bytes, 16-byte aligned, in shared
 * memory; for .x1 and .x2 the other lanes' addresses are not read from sm_80 on, and must be
 * valid ones on sm_75). r[m] of lane L: row L / 4, elements 2 (L % 4) and 2 (L % 4) + 1 of
 * matrix m; with .trans (_trans), the same of the transposed matrix: rows 2 (L % 4) and
 * 2 (L % 4) + 1 of column L / 4. */
#ifdef TXL_CUDA_EMU
#define TXL_PTX_LDMATRIX(name, n, trans, ptx)                                              \
  static __device__ __forceinline__ void name(uint32_t r[n], const void *row) {          \
    txl_emu_ldmatrix(n, trans, r, row);                                                  \
  }
#else
#define TXL_PTX_SHARED(p) ((uint32_t)__cvta_generic_to_shared(p))
#define TXL_PTX_LDMATRIX(name, n, trans, ptx)                                              \
  static __device__ __forceinline__ void name(uint32_t r[n], const void *row) {          \
    TXL_PTX_LDMATRIX_ASM_##n(ptx)                                                        \
  }
#define TXL_PTX_LDMATRIX_ASM_1(ptx) asm volatile(ptx " {%0}, [%1];\n" : "=r"(r[0]) : "r"(TXL_PTX_SHARED(row)));
#define TXL_PTX_LDMATRIX_ASM_2(ptx) \
  asm volatile(ptx " {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(TXL_PTX_SHARED(row)));
#define TXL_PTX_LDMATRIX_ASM_4(ptx)                                                        \
  asm volatile(ptx " {%0,%1,%2,%3}, [%4];\n"                                             \
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])                          \
               : "r"(TXL_PTX_SHARED(row)));
#endif
TXL_PTX_LDMATRIX(txl_ldmatrix_x1, 1, 0, "ldmatrix.sync.aligned.m8n8.x1.shared.b16")
TXL_PTX_LDMATRIX(txl_ldmatrix_x2, 2, 0, "ldmatrix.sync.aligned.m8n8.x2.shared.b16")
TXL_PTX_LDMATRIX(txl_ldmatrix_x4, 4, 0, "ldmatrix.sync.aligned.m8n8.x4.shared.b16")
TXL_PTX_LDMATRIX(txl_ldmatrix_x1_trans, 1, 1, "ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16")
TXL_PTX_LDMATRIX(txl_ldmatrix_x2_trans, 2, 1, "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16")
TXL_PTX_LDMATRIX(txl_ldmatrix_x4_trans, 4, 1, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16")

/* ---- cp.async: global to shared memory, completed by a wait ---------------------------------- */
/* Copies `bytes` (4, 8 or 16; both addresses aligned to it; dst in shared memory, src in global
 * memory) of which only the first src_bytes (0..bytes) are read, the rest of dst zeroed. The
 * copy belongs to the thread's next committed group; dst holds it only after a wait that covers
 * that group (the emulator keeps dst NaN bytes until then). 16 bytes go through L2 only (.cg),
 * fewer through L1 too (.ca: .cg takes 16 only). */
static __device__ __forceinline__ void txl_cp_async(void *dst, const void *src, int bytes, int src_bytes) {
#ifdef TXL_CUDA_EMU
  txl_emu_cp_async(dst, src, bytes, src_bytes);
#elif defined(TXL_PTX_SM80)
  const uint32_t d = TXL_PTX_SHARED(dst);
  if (bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
  else if (bytes == 8)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes) : "memory");
#else
  (void)dst, (void)src, (void)bytes, (void)src_bytes;
  __trap();
#endif
}

/* Closes the thread's current group of copies (an empty group is a group). */
static __device__ __forceinline__ void txl_cp_async_commit(void) {
#ifdef TXL_CUDA_EMU
  txl_emu_cp_async_commit();
#elif defined(TXL_PTX_SM80)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}

/* Waits until at most N of the thread's committed groups are incomplete (the newest N); N = 0:
 * all of them. Copies not yet committed are not waited for. Other threads see the data after a
 * barrier that follows their writers' waits. */
template <int N>
static __device__ __forceinline__ void txl_cp_async_wait(void) {
  static_assert(N >= 0 && N < 8, "cp.async.wait_group takes a small constant");
#ifdef TXL_CUDA_EMU
  txl_emu_cp_async_wait(N);
#elif defined(TXL_PTX_SM80)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

#endif
