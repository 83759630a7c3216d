/* Peak arithmetic rates and memory bandwidth of NVIDIA GPUs by architecture, from one table
 * (peaks.c): per compute capability, and by part where one capability covers parts of different
 * rates. Plain C, no CUDA: the CUDA backend (memory.cu: txl_cuda_set_device) and the emulator's
 * build both use it, and its unit test runs everywhere. */
#ifndef TXL_KERNELS_CUDA_PEAKS_H
#define TXL_KERNELS_CUDA_PEAKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The arithmetic a peak is of: the fp32 CUDA cores, or the tensor cores on TF32, bf16 or fp16
 * operands (fp32 sums, dense: no 2:4 sparsity). */
typedef enum { TXL_PEAK_FP32, TXL_PEAK_TF32, TXL_PEAK_BF16, TXL_PEAK_FP16, TXL_PEAK_KINDS } TxlPeakKind;

typedef struct {
  int major, minor;
  const char *part;      /* a substring of cudaDeviceProp.name; NULL: any other part of the cc */
  const char *example;   /* the part(s) the row describes, for messages and tests */
  int fma[TXL_PEAK_KINDS]; /* dense FMAs per SM per clock; 0: not supported on this part */
  double dram_gbs;       /* the datasheet's memory bandwidth in GB/s; 0 for a row of no part */
} TxlGpuPeaks;

/* The row of a device: the first whose capability matches and whose part is in `name`, else
 * that capability's row without part; NULL for a capability not in the table. */
const TxlGpuPeaks *txl_gpu_peaks_find(int major, int minor, const char *name);

/* FLOP/s: SMs x clock x FMAs per SM per clock x 2 (an FMA is two operations). */
double txl_gpu_peak_flops(const TxlGpuPeaks *row, TxlPeakKind kind, int sms, double clock_hz);

/* "fp32 CUDA cores", "TF32 tensor cores", "bf16 tensor cores", "fp16 tensor cores". */
const char *txl_peak_kind_name(TxlPeakKind kind);

#ifdef __cplusplus
}
#endif

#endif
