#include "src/train/bench_profile.h"

#include <stdio.h>

/* Seconds family s's counted work takes at least on b: the slowest of its tensor-core FLOPs at the
 * run's peak, its CUDA-core FLOPs at the fp32 peak and its bytes at the memory's bandwidth; 0 where
 * a peak is unknown. */
static double roofline_s(const TxlProfileSums *s, const TxlBackend *b) {
  if (b->peak_flops <= 0.0 || b->peak_fp32_flops <= 0.0 || b->dram_bytes_s <= 0.0) return 0.0;
  const double t[3] = {s->tensor_flops / b->peak_flops, s->core_flops / b->peak_fp32_flops, s->bytes / b->dram_bytes_s};
  return t[0] > t[1] ? (t[0] > t[2] ? t[0] : t[2]) : (t[1] > t[2] ? t[1] : t[2]);
}

/* One family's row, per step; emulated: with the launches and synchronisations the emulator saw. */
static void print_row(const char *name, const TxlProfileSums *s, double share, int steps, const TxlBackend *b,
                      int emulated) {
  const double n = steps, dev = s->device_s > 0.0 ? s->device_s : 0.0, roof = roofline_s(s, b);
  printf("profile: %-13s %10.3f %6.1f%% %9.3f %7.0f %8.0f %9.2f %9.2f %9.1f %7.1f%%", name, 1e3 * dev / n, share,
         1e3 * s->host_s / n, s->calls / n, s->launches / n, dev > 0.0 ? s->tensor_flops / dev / 1e12 : 0.0,
         dev > 0.0 ? s->core_flops / dev / 1e12 : 0.0, dev > 0.0 ? s->bytes / dev / 1e9 : 0.0,
         dev > 0.0 ? 100.0 * roof / dev : 0.0);
  if (emulated) printf(" %7.0f %6.0f", s->issued / n, s->syncs / n);
  printf("\n");
}

void txl_bench_profile_print(const TxlProfileTotals *p, const TxlBackend *b, int emulated) {
  if (p->steps == 0) return;
  printf("profile: %d steps on %s, each waited for, not captured as a graph; device time from a CUDA event at each "
         "change of family, host time from the clock there; launches and work counted from the shapes "
         "(kernels/cuda/cost.h), TFLOP/s and GB/s that work over the time; roofline: the time the work takes at the "
         "device's peaks (%s %.1f TFLOP/s, fp32 CUDA cores %.1f TFLOP/s, memory %.0f GB/s) as a share of the time\n",
         p->steps, b->device, b->peak_of ? b->peak_of : "?", b->peak_flops / 1e12, b->peak_fp32_flops / 1e12,
         b->dram_bytes_s / 1e9);
  if (emulated)
    printf("profile: the CUDA emulator ran these steps: its times are the CPU's and mean nothing for a GPU; the calls, "
           "launches and counted work are the GPU's; issued and syncs: the launches and host synchronisations the "
           "emulator saw\n");
  printf("profile: %-13s %10s %7s %9s %7s %8s %9s %9s %9s %8s", "family", "ms/step", "share", "host_ms", "calls",
         "launches", "tensor_TF", "core_TF", "GB/s", "roofline");
  if (emulated) printf(" %7s %6s", "issued", "syncs");
  printf("\n");
  TxlProfileSums all = {0};
  for (int f = 0; f < TXL_PROF_FAMILIES; f++) {
    const TxlProfileSums *s = &p->f[f];
    print_row(txl_profile_family_name(f), s, p->step_device_s > 0.0 ? 100.0 * s->device_s / p->step_device_s : 0.0,
              p->steps, b, emulated);
    all.device_s += s->device_s;
    all.host_s += s->host_s;
    all.calls += s->calls;
    all.launches += s->launches;
    all.tensor_flops += s->tensor_flops;
    all.core_flops += s->core_flops;
    all.bytes += s->bytes;
    all.issued += s->issued;
    all.syncs += s->syncs;
  }
  print_row("total", &all, p->step_device_s > 0.0 ? 100.0 * all.device_s / p->step_device_s : 0.0, p->steps, b,
            emulated);
  /* on a GPU the host runs ahead of the device unless the step is bound by its launches; the
   * emulator runs each call before it returns, so there the two are one */
  printf("profile: per step: device %.3f ms from the first call to the end, host %.3f ms issuing it%s\n",
         1e3 * p->step_device_s / p->steps, 1e3 * p->step_host_s / p->steps,
         !emulated && p->step_host_s >= 0.9 * p->step_device_s
             ? " (the host issues about as fast as the device runs: bound by the launches)"
             : "");
  if (emulated)
    printf("profile: launches counted from the shapes against those the emulator saw: %s\n",
           p->mismatch[0] ? p->mismatch : "the same in every op");
  if (p->truncated)
    printf("profile: %d of the %d steps took more marks than the profile's events: the rest of each went to the family "
           "of its last mark\n", p->truncated, p->steps);
  fflush(stdout);
}
