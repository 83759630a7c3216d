/* The peaks of NVIDIA GPUs by architecture (see peaks.h).
 *
 * fp32: FMAs per SM per clock of the CUDA cores, from the CUDA C++ Programming Guide, "Arithmetic
 * Instructions", table "Throughput of Native Arithmetic Instructions" (32-bit floating-point
 * add, multiply, multiply-add: 64 results per clock per SM on 7.5 and 8.0, 128 on 8.6, 8.9, 9.0).
 * Tensor cores (dense, fp32 accumulation): derived from NVIDIA's architecture whitepapers and
 * datasheets, peak = SMs x boost clock x FMAs x 2, e.g.
 *   Turing whitepaper (T4): no TF32 or bf16 tensor arithmetic (fp16 / int8 only); fp16 with
 *     fp32 accumulation: T4 datasheet 65 TFLOP/s at 40 SMs x 1590 MHz and Quadro RTX 6000
 *     130.5 at 72 SMs x 1770 MHz -> 512; GeForce RTX 2080 Ti 53.8 at 68 SMs x 1545 MHz -> 256
 *     (GeForce: half rate with fp32 sums), so the capability's generic row takes 256;
 *   A100 whitepaper, Table 1: 108 SMs, 1410 MHz, 19.5 TFLOP/s fp32, 156 TF32, 312 bf16
 *     -> 64 / 512 / 1024 (A30 datasheet: 56 SMs, 1440 MHz, 10.3 / 82 / 165: the same rates);
 *   GA102 whitepaper, Appendix A: RTX 3090 (82 SMs, 1695 MHz) 35.6 / 35.6 / 71 (bf16 with fp32
 *     accumulate) -> 128 / 128 / 256; A10 datasheet (72 SMs, 1695 MHz) 31.2 / 62.5 / 125 ->
 *     128 / 256 / 512, A40 (84 SMs, 1740 MHz) 37.4 / 74.8 / 149.7 -> the same;
 *   Ada whitepaper, Appendix A: RTX 4090 (128 SMs, 2520 MHz) 82.6 / 82.6 / 165.2 -> 128 / 128 /
 *     256; L4 datasheet (58 SMs, 2040 MHz) 30.3 / 60 / 121 -> 128 / 256 / 512; L40S (142 SMs,
 *     2520 MHz) 91.6 / 183 / 362 -> 128 / 256 / 512; L40 (142 SMs, 2490 MHz) 90.5 / 90.5 / 181
 *     -> 128 / 128 / 256;
 *   H100 whitepaper, Table 3: H100 SXM5 132 SMs, 1830 MHz (tensor boost), 494.7 TF32 and 989.4
 *     bf16 -> 1024 / 2048, fp32 128 (66.9 TFLOP/s at 1980 MHz); H100 PCIe 114 SMs and H200 (132
 *     SMs) the same rates.
 * fp16 tensor cores (fp32 accumulation) on sm_80 and newer: the bf16 rate (the same whitepaper
 * tables list fp16 and bf16 alike).
 * Memory bandwidth: each part's datasheet. A row without a part (another board of that compute
 * capability) has none: the caller computes it from the memory clock and bus width.
 * The peaks are the hardware's; a kernel reaches them only at full occupancy with no stalls. */
#include "kernels/cuda/peaks.h"

#include <stddef.h>
#include <string.h>

/* The first row that matches wins: a part's name before a shorter one it contains ("L40S",
 * "L40", "L4"; "NVIDIA H200", not "H200", which "NVIDIA GH200" contains) and the capability's
 * row without part last. */
static const TxlGpuPeaks kPeaks[] = {
    /* Turing: T4, RTX 20 */
    {7, 5, "T4", "Tesla T4", {64, 0, 0, 512}, 320.0},
    {7, 5, "Quadro RTX", "Quadro RTX", {64, 0, 0, 512}, 0.0},
    {7, 5, NULL, "Turing (RTX 20)", {64, 0, 0, 256}, 0.0},
    /* Ampere GA100 */
    {8, 0, "A100-SXM4-80GB", "A100 SXM4 80GB", {64, 512, 1024, 1024}, 2039.0},
    {8, 0, "A100 80GB PCIe", "A100 PCIe 80GB", {64, 512, 1024, 1024}, 1935.0},
    {8, 0, "A100-SXM4-40GB", "A100 SXM4 40GB", {64, 512, 1024, 1024}, 1555.0},
    {8, 0, "A100-PCIE-40GB", "A100 PCIe 40GB", {64, 512, 1024, 1024}, 1555.0},
    {8, 0, "A30", "A30", {64, 512, 1024, 1024}, 933.0},
    {8, 0, NULL, "Ampere GA100 (A100, A30, A800)", {64, 512, 1024, 1024}, 0.0},
    /* Ampere GA10x: the data-center boards at full tensor rate, GeForce at half (fp32 sums) */
    {8, 6, "A10", "A10", {128, 256, 512, 512}, 600.0},
    {8, 6, "A40", "A40", {128, 256, 512, 512}, 696.0},
    {8, 6, "RTX 3090", "GeForce RTX 3090", {128, 128, 256, 256}, 936.0},
    {8, 6, NULL, "Ampere GA10x (RTX 30)", {128, 128, 256, 256}, 0.0},
    /* Ada */
    {8, 9, "L40S", "L40S", {128, 256, 512, 512}, 864.0},
    {8, 9, "L40", "L40", {128, 128, 256, 256}, 864.0},
    {8, 9, "L4", "L4", {128, 256, 512, 512}, 300.0},
    {8, 9, "RTX 4090", "GeForce RTX 4090", {128, 128, 256, 256}, 1008.0},
    {8, 9, NULL, "Ada (RTX 40)", {128, 128, 256, 256}, 0.0},
    /* Hopper */
    {9, 0, "H100 80GB HBM3", "H100 SXM5 80GB", {128, 1024, 2048, 2048}, 3350.0},
    {9, 0, "H100 PCIe", "H100 PCIe", {128, 1024, 2048, 2048}, 2000.0},
    {9, 0, "NVIDIA H200", "H200 SXM 141GB", {128, 1024, 2048, 2048}, 4800.0},
    {9, 0, NULL, "Hopper (H100, H200)", {128, 1024, 2048, 2048}, 0.0},
};

const TxlGpuPeaks *txl_gpu_peaks_find(int major, int minor, const char *name) {
  for (size_t i = 0; i < sizeof kPeaks / sizeof kPeaks[0]; i++) {
    const TxlGpuPeaks *r = &kPeaks[i];
    if (r->major != major || r->minor != minor) continue;
    if (!r->part || (name && strstr(name, r->part))) return r;
  }
  return NULL;
}

double txl_gpu_peak_flops(const TxlGpuPeaks *row, TxlPeakKind kind, int sms, double clock_hz) {
  if (!row || kind < 0 || kind >= TXL_PEAK_KINDS) return 0.0;
  return (double)sms * clock_hz * (double)row->fma[kind] * 2.0;
}

const char *txl_peak_kind_name(TxlPeakKind kind) {
  switch (kind) {
    case TXL_PEAK_FP32: return "fp32 CUDA cores";
    case TXL_PEAK_TF32: return "TF32 tensor cores";
    case TXL_PEAK_BF16: return "bf16 tensor cores";
    case TXL_PEAK_FP16: return "fp16 tensor cores";
    case TXL_PEAK_KINDS: break;
  }
  return "?";
}
