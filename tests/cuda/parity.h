/* What every CUDA parity test shares besides tests/lib/test_util.h (its random source, buffers
 * and comparisons check_close, check_bits, check_fail): random inputs, device copies, activations
 * of either type, and the layer-norm bounds. The tolerance argument (TOL_C, OT_U) is in the file
 * comment of tests/cuda/test_parity.c; each test states its bounds per op.
 *
 * A test's main calls parity_begin() first (it prints "SKIPPED: no CUDA device" and exits 77
 * where there is no device) and returns parity_end() (1 when any check failed). */
#ifndef TXL_TESTS_CUDA_PARITY_H
#define TXL_TESTS_CUDA_PARITY_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "tests/lib/test_util.h"

#define U_BF16 (1.0 / 256.0)      /* 2^-8: the unit roundoff of bf16 (kernels/common/bf16.h) */
#define U_FP16 (1.0 / 2048.0)     /* 2^-11: the unit roundoff of fp16 (kernels/common/fp16.h) */
#define ETA_FP16 0x1p-25          /* half the spacing of fp16's subnormals: the absolute error of a
                                   * rounding to fp16 below 2^-14, where 2^-11 relative does not hold */
#define TOL_C 4.0                 /* 2 backends x 2 of slack (see test_parity.c) */

void parity_begin(const char *what);
int parity_end(void);
/* 1 when the device has TF32 and bf16 tensor arithmetic (compute capability 8.0 or newer, read
 * through txl_cuda_set_device); else prints "SKIPPED on sm_XY (NAME): WHAT needs sm_80 or newer"
 * and returns 0, and the test leaves those cases out (sm_75: TXL_EMU_ARCH=sm_75, a T4). */
int parity_has_tf32_bf16(const char *what);
/* The activation types of the CUDA tables this device runs, into acts[] (returns how many): fp32;
 * bf16 where parity_has_tf32_bf16(what) (which prints the skip line otherwise); fp16 always (its
 * tensor cores came with sm_70, before the oldest architecture txl supports, sm_75). */
int parity_acts(TxlDtype acts[3], const char *what);

double parity_urand(void);                            /* uniform in [0, 1), fixed seed */
float *host_rand(int64_t n, double lo, double hi);    /* ot_alloc'ed, uniform in [lo, hi) */
float *host_copy(const float *x, int64_t n);
void *dev_from(const void *host, size_t bytes, const char *what);
float *host_from(const float *dev, int64_t n);        /* a new host copy of device data */
/* Device memory of n floats filled with NaN: an output every element of which must be written. */
float *dev_poison(int64_t n, const char *what);

/* Activations in the act type of a table (TXL_F32, TXL_BF16 or TXL_F16): a test of the bf16 or
 * fp16 table rounds its random inputs to that type on the host first (round_act), so that the
 * CPU op, run in fp32 on them, sees exactly the values the device reads; the device's outputs come
 * back widened. fp16's range is 2^-24 .. 65504: a test keeps its inputs and outputs well inside
 * it (no overflow; values below 2^-14 are covered by the absolute term ETA_FP16). */
const char *act_name(TxlDtype act);                  /* "fp32", "bf16" or "fp16" */
void round_act(float *x, int64_t n, TxlDtype act);   /* x rounded to act in place (fp32: as is) */
float round_act1(float x, TxlDtype act);             /* one value rounded to act (fp32: as is) */
/* The error of one rounding to act of a value v: |act(v) - v| <= act_unit(act) |v| + act_eta(act):
 * fp32 0 and 0 (the stored value is the fp32 one), bf16 2^-8 and 0 (bf16 has fp32's exponent
 * range), fp16 2^-11 and 2^-25. */
double act_unit(TxlDtype act);
double act_eta(TxlDtype act);
void *dev_act(const float *host, int64_t n, TxlDtype act, const char *what); /* device copy */
void to_device_act(void *dev, const float *host, int64_t n, TxlDtype act);   /* into dev     */
float *host_from_act(const void *dev, int64_t n, TxlDtype act); /* a new widened host copy */
/* Device memory of n NaNs of the act type (bf16: 0x7fc0, fp16: 0x7fff): every element must be
 * written. */
void *dev_poison_act(int64_t n, TxlDtype act, const char *what);
/* The bound of an output stored in the act type, from its fp32 bound b_i against want_i (the CPU
 * reference): with bf16 the device's fp32 value v_i, within b_i of want_i, is rounded once,
 * |bf16(v) - v| <= 2^-8 |v| <= 2^-8 (|want_i| + b_i), so b_i becomes
 * b_i (1 + 2^-8) + 2^-8 |want_i|; with fp16 likewise with u = 2^-11, plus 2^-25 for a value that
 * lands among the subnormals: b_i (1 + u) + u |want_i| + eta (act_unit, act_eta). fp32:
 * unchanged. */
void bounds_act(double *bound, const float *want, int64_t n, TxlDtype act);

/* Padded rows (rows ld > d apart): an op reads and writes the first d elements of each row only,
 * with the same arithmetic, so its results are the bits of the same op on packed rows (which the
 * tests check against the CPU) and the gaps keep what they held, PAD_FILL (test_util.h). The checks
 * name themselves "OP ACT rows ld LD of d D: PART". */
/* A new [n, ld] host copy of packed rows x [n, d], the gaps PAD_FILL (ot_pad_rows). */
float *pad_rows(const float *x, int64_t n, int d, int ld);
/* The device's padded rows [n, ld] (act type) against the packed result [n, d], gaps included. */
void check_padded(const char *op, const char *part, TxlDtype act, const void *dev_padded, const void *dev_packed,
                  int64_t n, int d, int ld);
/* Two fp32 device vectors of the padded and the packed call (row statistics, parameter gradients,
 * losses): the same bits. */
void check_same_dev(const char *op, const char *part, TxlDtype act, int d, int ld, const float *dev_got,
                    const float *dev_want, int64_t n);

/* Bounds of the layer-norm forward of the n rows of x [n, d] (the derivation is in the tests that
 * call it): out[r, j] <= k_d ((|x| + mean_j |x|) rstd |w| + |b|), mean[r] <= k_d mean_j |x|,
 * rstd[r] <= k_d rstd. */
void layernorm_forward_bounds(double *bo, double *bm, double *br, const float *x, const float *w,
                              const float *b, const float *rstd, int64_t n, int d, double k_d);

/* Bounds of the layer-norm backward of n rows of d (the derivation is in the tests that call
 * it): dinp[r, j] <= k_d (|dinp0| + rstd (|g| + mean_j |g| + |xhat| mean_j |g xhat|)),
 * g = dout w, xhat = (x - mean) rstd (dinp0 NULL: the input gradient is overwritten, not added
 * to); dw[j] <= k_n (|dw0| + sum_r |dout xhat|), db[j] <= k_n (|db0| + sum_r |dout|). */
void layernorm_backward_bounds(double *bdi, double *bdw, double *bdb, const float *dy, const float *x,
                               const float *w, const float *mean, const float *rstd, const float *dinp0,
                               const float *dw0, const float *db0, int64_t n, int d, double k_d, double k_n);

#endif
