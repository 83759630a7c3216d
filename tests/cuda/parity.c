/* Shared parts of the CUDA parity tests (see parity.h). */
#include "tests/cuda/parity.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/cuda/cuda_ops.h"

/* ---- inputs ------------------------------------------------------------------------------ */

static OtRng g_rng = {0x9E3779B97F4A7C15ull}; /* one sequence for the whole test program */

double parity_urand(void) { return ot_uniform(&g_rng); }

float *host_rand(int64_t n, double lo, double hi) {
  float *x = ot_alloc(n);
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * parity_urand());
  return x;
}

float *host_copy(const float *x, int64_t n) {
  float *y = ot_alloc(n);
  memcpy(y, x, (size_t)n * sizeof(float));
  return y;
}

/* A device copy of host data. */
void *dev_from(const void *host, size_t bytes, const char *what) {
  void *d = txl_cuda_alloc(bytes, what);
  txl_cuda_to_device(d, host, bytes);
  return d;
}

/* The device array back on the host (a new allocation). */
float *host_from(const float *dev, int64_t n) {
  float *h = ot_alloc(n);
  txl_cuda_to_host(h, dev, (size_t)n * sizeof(float));
  return h;
}

float *dev_poison(int64_t n, const char *what) { return dev_poison_act(n, TXL_F32, what); }

/* ---- activations of either type ----------------------------------------------------------- */

const char *act_name(TxlDtype act) { return act == TXL_BF16 ? "bf16" : act == TXL_F16 ? "fp16" : "fp32"; }

float round_act1(float x, TxlDtype act) {
  return act == TXL_BF16 ? txl_bf16_round(x) : act == TXL_F16 ? txl_fp16_round(x) : x;
}

void round_act(float *x, int64_t n, TxlDtype act) {
  for (int64_t i = 0; i < n; i++) x[i] = round_act1(x[i], act);
}

double act_unit(TxlDtype act) { return act == TXL_BF16 ? U_BF16 : act == TXL_F16 ? U_FP16 : 0.0; }
double act_eta(TxlDtype act) { return act == TXL_F16 ? ETA_FP16 : 0.0; }

/* The 16-bit storage of x (bf16 or fp16), widened back by half_to_float. */
static uint16_t half_from_float(float x, TxlDtype act) {
  return act == TXL_BF16 ? txl_bf16_from_float(x) : txl_fp16_from_float(x).bits;
}
static float half_to_float(uint16_t h, TxlDtype act) {
  return act == TXL_BF16 ? txl_bf16_to_float(h) : txl_fp16_to_float(txl_fp16_from_bits(h));
}

void to_device_act(void *dev, const float *host, int64_t n, TxlDtype act) {
  if (act == TXL_F32) {
    txl_cuda_to_device(dev, host, (size_t)n * sizeof(float));
    return;
  }
  uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
  if (!h) { fprintf(stderr, "out of host memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++) h[i] = half_from_float(host[i], act);
  txl_cuda_to_device(dev, h, (size_t)n * sizeof(uint16_t));
  free(h);
}

void *dev_act(const float *host, int64_t n, TxlDtype act, const char *what) {
  void *d = txl_cuda_alloc((size_t)n * txl_dtype_size(act), what);
  to_device_act(d, host, n, act);
  return d;
}

float *host_from_act(const void *dev, int64_t n, TxlDtype act) {
  if (act == TXL_F32) return host_from(dev, n);
  uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof(uint16_t));
  float *x = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!h || !x) { fprintf(stderr, "out of host memory\n"); exit(1); }
  txl_cuda_to_host(h, dev, (size_t)n * sizeof(uint16_t));
  for (int64_t i = 0; i < n; i++) x[i] = half_to_float(h[i], act);
  free(h);
  return x;
}

void *dev_poison_act(int64_t n, TxlDtype act, const char *what) {
  float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!h) { fprintf(stderr, "out of host memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++) h[i] = NAN; /* bf16: 0x7fc0, fp16: 0x7fff */
  void *d = dev_act(h, n, act, what);
  free(h);
  return d;
}

/* ---- padded rows ------------------------------------------------------------------------- */

float *pad_rows(const float *x, int64_t n, int d, int ld) {
  float *p = ot_alloc(n * ld);
  ot_pad_rows(p, x, n, d, ld, PAD_FILL);
  return p;
}

/* "layernorm_forward bf16 rows ld 72 of d 67: out" */
static void padded_what(char *what, size_t n, const char *op, const char *part, TxlDtype act, int d, int ld) {
  snprintf(what, n, "%s %s rows ld %d of d %d: %s", op, act_name(act), ld, d, part);
}

void check_same_dev(const char *op, const char *part, TxlDtype act, int d, int ld, const float *dev_got,
                    const float *dev_want, int64_t n) {
  char what[192];
  padded_what(what, sizeof what, op, part, act, d, ld);
  float *got = host_from(dev_got, n), *want = host_from(dev_want, n);
  check_bits(what, got, want, n);
  free(got), free(want);
}

void check_padded(const char *op, const char *part, TxlDtype act, const void *dev_padded, const void *dev_packed,
                  int64_t n, int d, int ld) {
  char what[192];
  padded_what(what, sizeof what, op, part, act, d, ld);
  float *got = host_from_act(dev_padded, n * ld, act), *packed = host_from_act(dev_packed, n * d, act);
  float *want = pad_rows(packed, n, d, ld);
  check_bits(what, got, want, n * ld);
  free(got), free(packed), free(want);
}

void bounds_act(double *bound, const float *want, int64_t n, TxlDtype act) {
  const double u = act_unit(act), eta = act_eta(act);
  if (act != TXL_F32)
    for (int64_t i = 0; i < n; i++) bound[i] = bound[i] * (1.0 + u) + u * fabs((double)want[i]) + eta;
}

void layernorm_forward_bounds(double *bo, double *bm, double *br, const float *x, const float *w,
                              const float *b, const float *rstd, int64_t n, int d, double k_d) {
  for (int64_t r = 0; r < n; r++) {
    double mabs = 0.0;
    for (int j = 0; j < d; j++) mabs += fabs((double)x[r * d + j]);
    mabs /= d;
    bm[r] = k_d * mabs;
    br[r] = k_d * rstd[r];
    for (int j = 0; j < d; j++)
      bo[r * d + j] = k_d * ((fabs((double)x[r * d + j]) + mabs) * rstd[r] * fabs((double)w[j]) +
                             fabs((double)b[j]));
  }
}

void layernorm_backward_bounds(double *bdi, double *bdw, double *bdb, const float *dy, const float *x,
                               const float *w, const float *mean, const float *rstd, const float *dinp0,
                               const float *dw0, const float *db0, int64_t n, int d, double k_d, double k_n) {
  for (int j = 0; j < d; j++) {
    bdw[j] = fabs((double)dw0[j]);
    bdb[j] = fabs((double)db0[j]);
  }
  for (int64_t r = 0; r < n; r++) {
    double mg = 0.0, mgx = 0.0;
    for (int j = 0; j < d; j++) {
      const double g = (double)dy[r * d + j] * w[j];
      const double xh = ((double)x[r * d + j] - mean[r]) * rstd[r];
      mg += fabs(g);
      mgx += fabs(g * xh);
      bdw[j] += fabs((double)dy[r * d + j] * xh);
      bdb[j] += fabs((double)dy[r * d + j]);
    }
    mg /= d;
    mgx /= d;
    for (int j = 0; j < d; j++) {
      const double g = (double)dy[r * d + j] * w[j];
      const double xh = ((double)x[r * d + j] - mean[r]) * rstd[r];
      bdi[r * d + j] = k_d * ((dinp0 ? fabs((double)dinp0[r * d + j]) : 0.0) + rstd[r] * (fabs(g) + mg + fabs(xh) * mgx));
    }
  }
  for (int j = 0; j < d; j++) {
    bdw[j] *= k_n;
    bdb[j] *= k_n;
  }
}

static const char *g_what = "";

void parity_begin(const char *what) {
  g_what = what;
  const int devices = txl_cuda_device_count();
  if (devices == 0) {
    printf("SKIPPED: no CUDA device\n");
    exit(77);
  }
  printf("%s: CUDA devices: %d\n", what, devices);
}

int parity_has_tf32_bf16(const char *what) {
  TxlCudaDevice dev;
  txl_cuda_set_device(0, &dev);
  if (dev.major >= 8) return 1;
  printf("SKIPPED on sm_%d%d (%s): %s needs sm_80 or newer\n", dev.major, dev.minor, dev.name, what);
  return 0;
}

int parity_acts(TxlDtype acts[3], const char *what) {
  int n = 0;
  acts[n++] = TXL_F32;
  if (parity_has_tf32_bf16(what)) acts[n++] = TXL_BF16;
  acts[n++] = TXL_F16;
  return n;
}

int parity_end(void) {
  txl_cuda_release();
  return ot_finish(g_what);
}
