/* The architectures the emulator can stand for (see emu_arch.h). Limits per compute capability
 * from the CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications
 * per Compute Capability": shared memory per block opt-in 64 / 163 / 99 / 99 / 227 KiB and per
 * SM 64 / 164 / 100 / 100 / 228 KiB, resident threads per SM 1024 / 2048 / 1536 / 1536 / 2048
 * for 7.5 / 8.0 / 8.6 / 8.9 / 9.0; 1024 threads and 64 K 32-bit registers per block, 64 K per SM
 * on all five. Parts (SMs, boost clock, memory): the datasheets of T4, A100 SXM4 80GB, A10, L4,
 * H100 SXM5. */
#include "kernels/emu/emu_arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t GiB = (size_t)1 << 30;
static const int KiB = 1024;

static const TxlEmuArch kArchs[] = {
    {"sm_75", 7, 5, "Tesla T4 (txl CPU emulator, sm_75)", 40, 1590000, 5001000, 256, 15 * GiB,
     48 * KiB, 64 * KiB, 64 * KiB, 1024, 1024, 65536, 65536},
    {"sm_80", 8, 0, "NVIDIA A100-SXM4-80GB (txl CPU emulator, sm_80)", 108, 1410000, 1593000, 5120,
     80 * GiB, 48 * KiB, 163 * KiB, 164 * KiB, 1024, 2048, 65536, 65536},
    {"sm_86", 8, 6, "NVIDIA A10 (txl CPU emulator, sm_86)", 72, 1695000, 6251000, 384, 24 * GiB,
     48 * KiB, 99 * KiB, 100 * KiB, 1024, 1536, 65536, 65536},
    {"sm_89", 8, 9, "NVIDIA L4 (txl CPU emulator, sm_89)", 58, 2040000, 6251000, 192, 24 * GiB,
     48 * KiB, 99 * KiB, 100 * KiB, 1024, 1536, 65536, 65536},
    {"sm_90", 9, 0, "NVIDIA H100 80GB HBM3 (txl CPU emulator, sm_90)", 132, 1980000, 2619000, 5120,
     80 * GiB, 48 * KiB, 227 * KiB, 228 * KiB, 1024, 2048, 65536, 65536},
};

static const TxlEmuArch *select_arch(void) {
  const char *env = getenv("TXL_EMU_ARCH");
  if (!env || !env[0]) env = "sm_90";
  for (const TxlEmuArch &a : kArchs)
    if (strcmp(env, a.id) == 0) return &a;
  fflush(stdout);
  fprintf(stderr,
          "txl: error: cuda emulator: TXL_EMU_ARCH=%s: expected sm_75, sm_80, sm_86, sm_89 or sm_90\n",
          env);
  exit(1);
}

const TxlEmuArch &txl_emu_arch(void) {
  static const TxlEmuArch *arch = select_arch();
  return *arch;
}
