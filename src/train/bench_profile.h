/* The device profile's table (txl-train --bench --profile): per family of kernels/profile.h the
 * device and host time per step, the share of the step, the calls and launches, the work counted
 * from the shapes and what the time made of it (TFLOP/s, GB/s), and the share of the device's
 * roofline for that work. */
#ifndef TXL_TRAIN_BENCH_PROFILE_H
#define TXL_TRAIN_BENCH_PROFILE_H

#include "kernels/profile.h"
#include "src/device/backend.h"

/* Prints the table of p (rank 0's steps) for backend b; emulated: the CUDA emulator ran the steps
 * (its times are the CPU's: the table says they mean nothing for a GPU). */
void txl_bench_profile_print(const TxlProfileTotals *p, const TxlBackend *b, int emulated);

#endif
