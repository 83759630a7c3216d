/* The table of GPU peaks (kernels/cuda/peaks.c) against NVIDIA's published figures: each part at
 * its SM count and boost clock must give the datasheet's (or whitepaper's) TFLOP/s, and a device
 * name must find its own row (a part before a shorter name it contains, the capability's generic
 * row for any other part, nothing for a capability not in the table).
 *
 * Tolerance: NVIDIA prints its peaks rounded to the digit shown (19.5, 156, 989.4), so a row is
 * right when the computed peak is within half a unit of that last digit. A wrong rate is off by
 * a factor of two or more (64 vs 128 FMAs), far outside it. */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/peaks.h"
#include "tests/lib/test_util.h"

typedef struct {
  const char *name; /* as cudaDeviceProp.name */
  int major, minor, sms;
  double mhz;                    /* the clock the published figure is for */
  TxlPeakKind kind;
  double tflops, unit;           /* the published figure and its last printed digit */
} Case;

static const Case kCases[] = {
    /* A100 whitepaper, Table 1: 108 SMs, 1410 MHz */
    {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, TXL_PEAK_FP32, 19.5, 0.1},
    {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, TXL_PEAK_TF32, 156, 1},
    {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, TXL_PEAK_BF16, 312, 1},
    {"NVIDIA A100-PCIE-40GB", 8, 0, 108, 1410, TXL_PEAK_BF16, 312, 1},
    /* A30 datasheet: 56 SMs, 1440 MHz */
    {"NVIDIA A30", 8, 0, 56, 1440, TXL_PEAK_FP32, 10.3, 0.1},
    {"NVIDIA A30", 8, 0, 56, 1440, TXL_PEAK_BF16, 165, 1},
    /* H100 whitepaper, Table 3, H100 SXM5: 132 SMs; tensor figures at 1830 MHz, fp32 at 1980 */
    {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1830, TXL_PEAK_BF16, 989.4, 0.1},
    {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1830, TXL_PEAK_TF32, 494.7, 0.1},
    {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, TXL_PEAK_FP32, 66.9, 0.1},
    /* T4 datasheet: 40 SMs, 1590 MHz, 8.1 TFLOP/s fp32; no TF32 or bf16 tensor arithmetic */
    {"Tesla T4", 7, 5, 40, 1590, TXL_PEAK_FP32, 8.1, 0.1},
    {"Tesla T4", 7, 5, 40, 1590, TXL_PEAK_TF32, 0, 0.1},
    {"Tesla T4", 7, 5, 40, 1590, TXL_PEAK_BF16, 0, 0.1},
    /* ... but fp16 tensor cores: T4 datasheet 65 TFLOP/s (fp16, fp32 accumulation); Turing
     * whitepaper, Appendix A: Quadro RTX 6000 (72 SMs, 1770 MHz) 130.5, GeForce RTX 2080 Ti (68 SMs,
     * 1545 MHz) 53.8 (GeForce: half rate with fp32 sums) */
    {"Tesla T4", 7, 5, 40, 1590, TXL_PEAK_FP16, 65, 1},
    {"Quadro RTX 6000", 7, 5, 72, 1770, TXL_PEAK_FP16, 130.5, 0.1},
    {"NVIDIA GeForce RTX 2080 Ti", 7, 5, 68, 1545, TXL_PEAK_FP16, 53.8, 0.1},
    /* sm_80 and newer: fp16 at the bf16 rate (A100 312, H100 SXM5 989.4) */
    {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, TXL_PEAK_FP16, 312, 1},
    {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1830, TXL_PEAK_FP16, 989.4, 0.1},
    /* GA102 whitepaper, Appendix A: RTX 3090, 82 SMs, 1695 MHz (GeForce: half-rate fp32 sums) */
    {"NVIDIA GeForce RTX 3090", 8, 6, 82, 1695, TXL_PEAK_FP32, 35.6, 0.1},
    {"NVIDIA GeForce RTX 3090", 8, 6, 82, 1695, TXL_PEAK_TF32, 35.6, 0.1},
    {"NVIDIA GeForce RTX 3090", 8, 6, 82, 1695, TXL_PEAK_BF16, 71, 1},
    /* A10 datasheet: 72 SMs, 1695 MHz */
    {"NVIDIA A10", 8, 6, 72, 1695, TXL_PEAK_FP32, 31.2, 0.1},
    {"NVIDIA A10", 8, 6, 72, 1695, TXL_PEAK_TF32, 62.5, 0.1},
    {"NVIDIA A10", 8, 6, 72, 1695, TXL_PEAK_BF16, 125, 1},
    /* L40S datasheet: 142 SMs, 2520 MHz */
    {"NVIDIA L40S", 8, 9, 142, 2520, TXL_PEAK_FP32, 91.6, 0.1},
    {"NVIDIA L40S", 8, 9, 142, 2520, TXL_PEAK_TF32, 183, 1},
    /* L4 datasheet: 58 SMs, 2040 MHz */
    {"NVIDIA L4", 8, 9, 58, 2040, TXL_PEAK_FP32, 30.3, 0.1},
};

/* The row a name finds, by its example text ("" when none). */
static const char *row_of(int major, int minor, const char *name) {
  const TxlGpuPeaks *r = txl_gpu_peaks_find(major, minor, name);
  return r ? r->example : "";
}

int main(void) {
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const Case *c = &kCases[i];
    const TxlGpuPeaks *row = txl_gpu_peaks_find(c->major, c->minor, c->name);
    const double got = txl_gpu_peak_flops(row, c->kind, c->sms, c->mhz * 1e6) / 1e12;
    char what[160];
    snprintf(what, sizeof what, "%s, %s at %d SMs x %.0f MHz (TFLOP/s)", c->name, txl_peak_kind_name(c->kind),
             c->sms, c->mhz);
    ot_check_scalar(what, got, c->tflops, 0.5 * c->unit);
  }

  /* names: the longest part first, the generic row of the capability, nothing outside the table */
  const struct { int major, minor; const char *name, *row; } names[] = {
      {8, 9, "NVIDIA L40S", "L40S"},
      {8, 9, "NVIDIA L40", "L40"},
      {8, 9, "NVIDIA L4", "L4"},
      {8, 9, "NVIDIA GeForce RTX 4080", "Ada (RTX 40)"},
      {8, 0, "NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"},
      {8, 0, "NVIDIA A800 80GB PCIe", "Ampere GA100 (A100, A30, A800)"},
      {8, 6, "NVIDIA A10", "A10"},
      {9, 0, "NVIDIA H100 PCIe", "H100 PCIe"},
      {9, 0, "NVIDIA H200", "H200 SXM 141GB"},
      {9, 0, "NVIDIA GH200 480GB", "Hopper (H100, H200)"},
      {7, 0, "Tesla V100-SXM2-16GB", ""},
      {10, 0, "NVIDIA B200", ""},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *got = row_of(names[i].major, names[i].minor, names[i].name);
    ot_check_true("row of a device name", strcmp(got, names[i].row) == 0, "%s (sm_%d%d) -> '%s', expected '%s'",
                  names[i].name, names[i].major, names[i].minor, got, names[i].row);
  }
  ot_check_true("no peaks outside the table", txl_gpu_peak_flops(NULL, TXL_PEAK_FP32, 100, 1e9) == 0.0,
                "a device of no row has peak 0 (MFU not printed)");

  /* memory bandwidth: the part's datasheet figure where the row names a part */
  const TxlGpuPeaks *a100 = txl_gpu_peaks_find(8, 0, "NVIDIA A100-SXM4-80GB");
  const TxlGpuPeaks *h100 = txl_gpu_peaks_find(9, 0, "NVIDIA H100 80GB HBM3");
  const TxlGpuPeaks *any90 = txl_gpu_peaks_find(9, 0, "NVIDIA GH200 480GB");
  ot_check_scalar("A100 SXM4 80GB memory bandwidth (GB/s)", a100 ? a100->dram_gbs : -1, 2039, 0.5);
  ot_check_scalar("H100 SXM5 memory bandwidth (GB/s)", h100 ? h100->dram_gbs : -1, 3350, 0.5);
  ot_check_scalar("a part of no row: bandwidth from its clock and bus (0 here)", any90 ? any90->dram_gbs : -1, 0, 0);
  return ot_finish("gpu_peaks");
}
