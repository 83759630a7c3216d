/* Layer norm over the last dimension, as torch.nn.LayerNorm, of rows ld >= d floats apart (only
 * the first d of each row are read or written):
 *   mean = sum(x) / d,  var = sum((x - mean)^2) / d (biased),  rstd = 1 / sqrt(var + eps),
 *   out = (x - mean) * rstd * w + b.
 * The backward adds into dinp (+=, residual stream; skipped when dinp is NULL) and into dw, db
 * (+=, parameters). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_util.h"

/* One row: y = LayerNorm(x), its mean and rstd. */
static inline void ln_forward_row(float *y, float *mean, float *rstd, const float *x, const float *w,
                                  const float *b, int d, float eps) {
  float s = 0.0f; /* two passes in float: the mean, then the squared deviations */
#pragma omp simd reduction(+ : s)
  for (int j = 0; j < d; j++) s += x[j];
  const float mu = s / (float)d;
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int j = 0; j < d; j++) {
    const float c = x[j] - mu;
    ss += c * c;
  }
  const float rs = 1.0f / sqrtf(ss / (float)d + eps);
#pragma omp simd
  for (int j = 0; j < d; j++) y[j] = (x[j] - mu) * rs * w[j] + b[j];
  *mean = mu;
  *rstd = rs;
}

void txl_cpu_layernorm_forward(void *out_, float *mean, float *rstd, const void *inp_,
                               const float *w, const float *b, int64_t n, int d, int ld, float eps) {
  float *out = out_;
  const float *inp = inp_;
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t r = 0; r < n; r++) ln_forward_row(out + r * ld, mean + r, rstd + r, inp + r * ld, w, b, d, eps);
}

/* res = x + y and out = LayerNorm(res), row by row while the row is in cache. */
void txl_cpu_add_layernorm_forward(void *res_, void *out_, float *mean, float *rstd,
                                   const void *x_, const void *y_, const float *w, const float *b,
                                   int64_t n, int d, int ld, float eps) {
  float *res = res_;
  float *out = out_;
  const float *x = x_;
  const float *y = y_;
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
  for (int64_t r = 0; r < n; r++) {
    float *rr = res + r * ld;
    const float *xr = x + r * ld, *yr = y + r * ld;
#pragma omp simd
    for (int j = 0; j < d; j++) rr[j] = xr[j] + yr[j];
    ln_forward_row(out + r * ld, mean + r, rstd + r, rr, w, b, d, eps);
  }
}

/* dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dout * w,  xhat = (x - mean) * rstd,
 * added to dinp[r, :] (skipped when dx is NULL; written instead when `set`); the row's terms of
 * dw (dout * xhat) and db (dout) are added to pw, pb (skipped when pw is NULL). */
static inline void ln_backward_row(float *dx, int set, double *pw, double *pb, const float *dy,
                                   const float *x, const float *w, float mu, float rs, int d) {
  if (dx) {
    float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
    for (int j = 0; j < d; j++) {
      const float g = dy[j] * w[j];
      sg += g;
      sgx += g * ((x[j] - mu) * rs);
    }
    const float mg = sg / (float)d, mgx = sgx / (float)d;
#pragma omp simd
    for (int j = 0; j < d; j++) {
      const float xhat = (x[j] - mu) * rs;
      const float v = rs * (dy[j] * w[j] - mg - xhat * mgx);
      dx[j] = set ? v : dx[j] + v;
    }
  }
  if (pw) {
#pragma omp simd
    for (int j = 0; j < d; j++) {
      pw[j] += (double)(dy[j] * ((x[j] - mu) * rs));
      pb[j] += (double)dy[j];
    }
  }
}

/* dw, db are summed in double in an order fixed by the shape (see cpu_util.h): for d up to
 * TXL_CPU_COLSUM_MAX_N, per fixed row chunk during the same pass as dinp, the chunk partials
 * added in chunk order; for wider rows, a second pass over column blocks. */
void txl_cpu_layernorm_backward(void *dinp_, float *dw, float *db, const void *dout_,
                                const void *inp_, const float *w, const float *mean,
                                const float *rstd, int64_t n, int d, int ld) {
  float *dinp = dinp_;
  const float *dout = dout_;
  const float *inp = inp_;
  if (n <= 0 || d <= 0) return;
  const int par = n * d >= TXL_CPU_PAR_MIN_WORK;
  if (d <= TXL_CPU_COLSUM_MAX_N) {
    const int nc = txl_cpu_row_chunks(n, 2 * (int64_t)d);
    double part[TXL_CPU_PARTIAL_DOUBLES]; /* [nc][2][d]: dw then db partials of each chunk */
#pragma omp parallel for schedule(static) if (par && nc > 1)
    for (int c = 0; c < nc; c++) {
      double *pw = part + (int64_t)c * 2 * d, *pb = pw + d;
      for (int j = 0; j < d; j++) pw[j] = 0.0, pb[j] = 0.0;
      for (int64_t r = n * c / nc; r < n * (c + 1) / nc; r++)
        ln_backward_row(dinp ? dinp + r * ld : NULL, 0, pw, pb, dout + r * ld, inp + r * ld, w, mean[r],
                        rstd[r], d);
    }
    for (int j = 0; j < d; j++) {
      double sw = dw[j], sb = db[j];
      for (int c = 0; c < nc; c++) sw += part[(int64_t)c * 2 * d + j], sb += part[(int64_t)c * 2 * d + d + j];
      dw[j] = (float)sw;
      db[j] = (float)sb;
    }
    return;
  }
  const int nblk = (d + TXL_CPU_COL_BLOCK - 1) / TXL_CPU_COL_BLOCK;
#pragma omp parallel if (par)
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < (dinp ? n : 0); r++)
      ln_backward_row(dinp + r * ld, 0, NULL, NULL, dout + r * ld, inp + r * ld, w, mean[r], rstd[r], d);
#pragma omp for schedule(static)
    for (int blk = 0; blk < nblk; blk++) {
      const int j0 = blk * TXL_CPU_COL_BLOCK;
      const int bw = d - j0 < TXL_CPU_COL_BLOCK ? d - j0 : TXL_CPU_COL_BLOCK;
      double aw[TXL_CPU_COL_BLOCK], ab[TXL_CPU_COL_BLOCK];
      for (int j = 0; j < bw; j++) aw[j] = dw[j0 + j], ab[j] = db[j0 + j];
      for (int64_t r = 0; r < n; r++) {
        const float *x = inp + r * ld + j0, *dy = dout + r * ld + j0;
        const float mu = mean[r], rs = rstd[r];
#pragma omp simd
        for (int j = 0; j < bw; j++) {
          aw[j] += (double)(dy[j] * ((x[j] - mu) * rs));
          ab[j] += (double)dy[j];
        }
      }
      for (int j = 0; j < bw; j++) dw[j0 + j] = (float)aw[j], db[j0 + j] = (float)ab[j];
    }
  }
}

/* One pass per row while it is in cache: the input gradient written (not added), its dropped
 * copy, and the row's dw / db terms into the same fixed chunk partials as the backward above, so
 * the results are those of the separate ops (zero, backward, copy, dropout) bit for bit. Rows
 * wider than TXL_CPU_COLSUM_MAX_N take the separate ops. */
void txl_cpu_layernorm_backward_dropout(void *dinp_, void *dbranch_, float *dw, float *db,
                                        const void *dout_, const void *inp_, const float *w,
                                        const float *mean, const float *rstd, int rows, int cols,
                                        int d, int ld, int col0, TxlDropout drop) {
  float *dinp = dinp_;
  float *dbranch = dbranch_;
  const float *dout = dout_;
  const float *inp = inp_;
  const int64_t n = (int64_t)rows * cols;
  if (n <= 0 || d <= 0) return;
  if (d > TXL_CPU_COLSUM_MAX_N) { /* the separate ops, row by row where the rows are padded */
    for (int64_t r = 0; r < n; r++) memset(dinp + r * ld, 0, (size_t)d * sizeof(float));
    txl_cpu_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, n, d, ld);
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK)
    for (int64_t r = 0; r < n; r++) {
      memcpy(dbranch + r * ld, dinp + r * ld, (size_t)d * sizeof(float));
      txl_cpu_dropout_rows(dbranch + r * ld, (int)(r / cols), 1, 1, d, d, col0 + (int)(r % cols), drop);
    }
    return;
  }
  const int nc = txl_cpu_row_chunks(n, 2 * (int64_t)d);
  double part[TXL_CPU_PARTIAL_DOUBLES]; /* [nc][2][d], as txl_cpu_layernorm_backward */
#pragma omp parallel for schedule(static) if (n * d >= TXL_CPU_PAR_MIN_WORK && nc > 1)
  for (int c = 0; c < nc; c++) {
    double *pw = part + (int64_t)c * 2 * d, *pb = pw + d;
    for (int j = 0; j < d; j++) pw[j] = 0.0, pb[j] = 0.0;
    for (int64_t r = n * c / nc; r < n * (c + 1) / nc; r++) {
      ln_backward_row(dinp + r * ld, 1, pw, pb, dout + r * ld, inp + r * ld, w, mean[r], rstd[r], d);
      memcpy(dbranch + r * ld, dinp + r * ld, (size_t)d * sizeof(float));
      /* one (row, column) pair: row r / cols, global column col0 + r % cols */
      txl_cpu_dropout_rows(dbranch + r * ld, (int)(r / cols), 1, 1, d, d, col0 + (int)(r % cols), drop);
    }
  }
  for (int j = 0; j < d; j++) {
    double sw = dw[j], sb = db[j];
    for (int c = 0; c < nc; c++) sw += part[(int64_t)c * 2 * d + j], sb += part[(int64_t)c * 2 * d + d + j];
    dw[j] = (float)sw;
    db[j] = (float)sb;
  }
}
