/* The emulated device's architecture, chosen by TXL_EMU_ARCH=sm_75|sm_80|sm_86|sm_89|sm_90
 * (default sm_90): its compute capability, a representative part and the limits a launch and
 * cudaFuncSetAttribute are checked against (emu_arch.cpp). Internal to the emulator. */
#ifndef TXL_KERNELS_EMU_ARCH_H
#define TXL_KERNELS_EMU_ARCH_H

#include <stddef.h>

struct TxlEmuArch {
  const char *id;         /* "sm_90" */
  int major, minor;
  const char *name;       /* cudaDeviceProp.name: the part, marked as emulated */
  int sms;
  int clock_khz;          /* boost clock */
  int mem_clock_khz, bus_bits;
  size_t memory;          /* bytes */
  int shared_per_block;   /* a launch's limit unless raised (48 KiB everywhere) */
  int shared_optin;       /* the most cudaFuncSetAttribute may raise it to */
  int shared_per_sm;
  int threads_per_block, threads_per_sm;
  int regs_per_block, regs_per_sm;
};

/* The architecture TXL_EMU_ARCH names, read once; an unknown value ends the process with one
 * line naming the variable and the accepted values. */
const TxlEmuArch &txl_emu_arch(void);

#endif
