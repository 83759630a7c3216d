/* layernorm forward against a double reference (out, mean, rstd), backward against central
 * finite differences of the double reference (dinp, dw, db all accumulate into pre-filled
 * buffers; dinp = NULL accumulates only dw, db), odd shapes, a row whose variance is below eps
 * (eps placement), a row with a large mean (cancellation), and thread-count independence. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static const float kEps = 1e-5f;

/* out = (x - mean) / sqrt(var + eps) * w + b, var biased: torch.nn.LayerNorm. */
static void ln_ref(double *out, double *mean, double *rstd, const double *x, const double *w,
                   const double *b, int64_t n, int d, double eps) {
  for (int64_t r = 0; r < n; r++) {
    const double *xr = x + r * d;
    double mu = 0.0, var = 0.0;
    for (int j = 0; j < d; j++) mu += xr[j];
    mu /= d;
    for (int j = 0; j < d; j++) var += (xr[j] - mu) * (xr[j] - mu);
    var /= d;
    const double rs = 1.0 / sqrt(var + eps);
    if (mean) mean[r] = mu, rstd[r] = rs;
    for (int j = 0; j < d; j++) out[r * d + j] = (xr[j] - mu) * rs * w[j] + b[j];
  }
}

typedef struct {
  double *x, *w, *b, *out;
  const double *proj;
  int64_t n;
  int d;
} LnCtx;

static double ln_loss(void *p) {
  LnCtx *c = p;
  ln_ref(c->out, NULL, NULL, c->x, c->w, c->b, c->n, c->d, kEps);
  return ot_dot(c->out, c->proj, c->n * c->d);
}

/* Analytic double backward (for the shape too large for finite differences). */
static void ln_ref_backward(double *dx, double *dw, double *db, const double *dy, const double *x,
                            const double *w, int64_t n, int d, double eps) {
  for (int64_t r = 0; r < n; r++) {
    const double *xr = x + r * d, *g = dy + r * d;
    double mu = 0.0, var = 0.0;
    for (int j = 0; j < d; j++) mu += xr[j];
    mu /= d;
    for (int j = 0; j < d; j++) var += (xr[j] - mu) * (xr[j] - mu);
    var /= d;
    const double rs = 1.0 / sqrt(var + eps);
    double sg = 0.0, sgx = 0.0;
    for (int j = 0; j < d; j++) {
      const double xh = (xr[j] - mu) * rs;
      sg += g[j] * w[j];
      sgx += g[j] * w[j] * xh;
      dw[j] += g[j] * xh;
      db[j] += g[j];
    }
    for (int j = 0; j < d; j++) {
      const double xh = (xr[j] - mu) * rs;
      dx[r * d + j] += rs * (g[j] * w[j] - sg / d - xh * sgx / d);
    }
  }
}

static void test_layernorm(int64_t n, int d, int use_fd, OtRng *rng) {
  char name[128];
  const int64_t N = n * d;
  float *x = ot_alloc(N), *w = ot_alloc(d), *b = ot_alloc(d), *out = ot_alloc(N);
  float *mean = ot_alloc(n), *rstd = ot_alloc(n), *dy = ot_alloc(N);
  float *dx = ot_alloc(N), *dw = ot_alloc(d), *db = ot_alloc(d);
  ot_fill(x, N, -2.0f, 2.0f, rng);
  if (n >= 3 && d > 1) {
    for (int j = 0; j < d; j++) x[1 * d + j] = 1e-3f * x[1 * d + j]; /* var ~ 1e-6/3 < eps */
    for (int j = 0; j < d; j++) x[2 * d + j] += 50.0f;                /* mean ~ 50, var ~ 1.3 */
  }
  ot_fill(w, d, 0.5f, 1.5f, rng);
  ot_fill(b, d, -0.5f, 0.5f, rng);
  ot_fill(dy, N, -1.0f, 1.0f, rng);
  ot_fill(dx, N, -1.0f, 1.0f, rng); /* all three gradients accumulate */
  ot_fill(dw, d, -1.0f, 1.0f, rng);
  ot_fill(db, d, -1.0f, 1.0f, rng);

  double *xd = ot_alloc_d(N), *wd = ot_alloc_d(d), *bd = ot_alloc_d(d), *outd = ot_alloc_d(N);
  double *meand = ot_alloc_d(n), *rstdd = ot_alloc_d(n), *dyd = ot_alloc_d(N);
  ot_to_double(xd, x, N), ot_to_double(wd, w, d), ot_to_double(bd, b, d), ot_to_double(dyd, dy, N);
  ln_ref(outd, meand, rstdd, xd, wd, bd, n, d, kEps);
  txl_cpu_layernorm_forward(out, mean, rstd, x, w, b, n, d, d, kEps);

  /* Forward error bounds, per row (u = 2^-24):
   *   mean: a d-term fp32 sum then a division: dmu <= (d + 1) u sum|x| / d;
   *   var: d squared deviations (their own error from dmu is second order, sum (x - mu) = 0),
   *        summed: relative (d + 3) u; rstd = 1 / sqrt(var + eps) adds 3 roundings and halves
   *        the relative error of var: er = ((d + 3) / 2 + 3) u, doubled for slack;
   *   out: |w| rstd (|x - mu| (er + 4u) + dmu) + 2u (|out| + |b|).                           */
  double *bo = ot_alloc_d(N), *bm = ot_alloc_d(n), *br = ot_alloc_d(n), *dxh = ot_alloc_d(n);
  for (int64_t r = 0; r < n; r++) {
    double sa = 0.0;
    for (int j = 0; j < d; j++) sa += fabs(xd[r * d + j]);
    const double dmu = (d + 1) * OT_U * sa / d, er = (d + 9) * OT_U;
    bm[r] = 1.01 * dmu;
    br[r] = 1.01 * er * rstdd[r];
    dxh[r] = dmu * rstdd[r] + er * 4.0; /* error of the saved xhat = (x - mean) rstd, |xhat| <= ~4 */
    for (int j = 0; j < d; j++) {
      const int64_t k = r * d + j;
      bo[k] = 1.01 * (fabs(wd[j]) * rstdd[r] * (fabs(xd[k] - meand[r]) * (er + 4 * OT_U) + dmu) +
                      2 * OT_U * (fabs(outd[k]) + fabs(bd[j])));
    }
  }
  snprintf(name, sizeof name, "layernorm_forward out n=%lld d=%d", (long long)n, d);
  ot_check_bound(name, out, outd, bo, N);
  ot_check_bound("layernorm_forward mean", mean, meand, bm, n);
  ot_check_bound("layernorm_forward rstd", rstd, rstdd, br, n);

  /* Backward: loss = sum(out * dy); gradients w.r.t. x, w, b of the double reference. */
  double *gx = ot_alloc_d(N), *gw = ot_alloc_d(d), *gb = ot_alloc_d(d);
  const double eps = 1e-6;
  double l1 = 0.0;
  for (int64_t k = 0; k < N; k++) l1 += fabs(outd[k] * dyd[k]);
  if (use_fd) {
    double *scratch = ot_alloc_d(N);
    LnCtx ctx = {xd, wd, bd, scratch, dyd, n, d};
    ot_fd_grad(gx, xd, N, eps, ln_loss, &ctx);
    ot_fd_grad(gw, wd, d, eps, ln_loss, &ctx);
    ot_fd_grad(gb, bd, d, eps, ln_loss, &ctx);
    free(scratch);
  } else {
    ln_ref_backward(gx, gw, gb, dyd, xd, wd, n, d, kEps);
  }
  /* Finite differences: truncation eps^2 f''' / 6 (~1e-12 here) plus ~100 double roundings of
   * the loss over 2 eps. */
  const double fd_tol = use_fd ? 100.0 * ldexp(1.0, -53) * l1 / eps + 1e-10 : 0.0;
  /* dinp per row: rstd (g - mean(g) - xhat mean(g xhat)), g = dy w. The two d-term means carry
   * gamma_d relative errors, the saved rstd er and xhat dxh: bound
   *   rstd ((d + 8) u + 2 er) (|g| + mean|g| + (|xhat| + dxh) mean|g xhat|) + rstd dxh mean|g|
   *   + u |dinp0 + grad| (the final +=) + fd_tol.                                            */
  double *bx = ot_alloc_d(N), *bw = ot_alloc_d(d), *bb = ot_alloc_d(d);
  for (int64_t r = 0; r < n; r++) {
    double mg = 0.0, mgx = 0.0;
    for (int j = 0; j < d; j++) {
      const double g = fabs(dyd[r * d + j] * wd[j]), xh = fabs((xd[r * d + j] - meand[r]) * rstdd[r]);
      mg += g / d, mgx += g * xh / d;
    }
    const double er = (d + 9) * OT_U;
    for (int j = 0; j < d; j++) {
      const int64_t k = r * d + j;
      const double g = fabs(dyd[k] * wd[j]), xh = fabs((xd[k] - meand[r]) * rstdd[r]);
      bx[k] = 1.01 * (rstdd[r] * (((d + 8) * OT_U + 2 * er) * (g + mg + (xh + dxh[r]) * mgx) +
                                  dxh[r] * mg) +
                      OT_U * (fabs(dx[k]) + fabs(gx[k]))) + fd_tol;
    }
  }
  /* dw[j] = dw0 + sum_r dy xhat: n + 1 terms, each with the saved-xhat error dxh:
   *   (n + 4) u (|dw0| + sum |dy xhat|) + sum |dy| dxh.   db: (n + 2) u (|db0| + sum |dy|). */
  for (int j = 0; j < d; j++) {
    double sw = fabs(dw[j]), sx = 0.0, sb = fabs(db[j]);
    for (int64_t r = 0; r < n; r++) {
      sw += fabs(dyd[r * d + j] * (xd[r * d + j] - meand[r]) * rstdd[r]);
      sx += fabs(dyd[r * d + j]) * dxh[r];
      sb += fabs(dyd[r * d + j]);
    }
    bw[j] = 1.01 * ((n + 4) * OT_U * sw + sx) + fd_tol;
    bb[j] = 1.01 * (n + 2) * OT_U * sb + fd_tol;
  }
  for (int64_t k = 0; k < N; k++) gx[k] += dx[k];
  for (int j = 0; j < d; j++) gw[j] += dw[j], gb[j] += db[j];
  float *dw2 = ot_alloc(d), *db2 = ot_alloc(d);
  memcpy(dw2, dw, (size_t)d * sizeof(float)), memcpy(db2, db, (size_t)d * sizeof(float));
  txl_cpu_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, n, d, d);
  /* dinp = NULL (rows that take no input gradient): the same dw, db, bit for bit */
  txl_cpu_layernorm_backward(NULL, dw2, db2, dy, x, w, mean, rstd, n, d, d);
  ot_check_same("layernorm_backward dinp=NULL: same dw", dw2, dw, (size_t)d * sizeof(float));
  ot_check_same("layernorm_backward dinp=NULL: same db", db2, db, (size_t)d * sizeof(float));
  free(dw2), free(db2);
  const char *how = use_fd ? "FD" : "double";
  snprintf(name, sizeof name, "layernorm_backward dinp (+=) vs %s", how);
  ot_check_bound(name, dx, gx, bx, N);
  snprintf(name, sizeof name, "layernorm_backward dw (+=) vs %s", how);
  ot_check_bound(name, dw, gw, bw, d);
  snprintf(name, sizeof name, "layernorm_backward db (+=) vs %s", how);
  ot_check_bound(name, db, gb, bb, d);

  free(x), free(w), free(b), free(out), free(mean), free(rstd), free(dy), free(dx), free(dw), free(db);
  free(xd), free(wd), free(bd), free(outd), free(meand), free(rstdd), free(dyd), free(bo), free(bm);
  free(br), free(dxh), free(gx), free(gw), free(gb), free(bx), free(bw), free(bb);
}

static void test_threads(OtRng *rng) {
  const int64_t n = 1001;
  const int d = 131;
  const int64_t N = n * d;
  float *x = ot_alloc(N), *w = ot_alloc(d), *b = ot_alloc(d), *dy = ot_alloc(N);
  float *out[2], *mean[2], *rstd[2], *dx[2], *dw[2], *db[2];
  ot_fill(x, N, -2.0f, 2.0f, rng), ot_fill(w, d, 0.5f, 1.5f, rng), ot_fill(b, d, -1.0f, 1.0f, rng);
  ot_fill(dy, N, -1.0f, 1.0f, rng);
  for (int t = 0; t < 2; t++) {
    out[t] = ot_alloc(N), mean[t] = ot_alloc(n), rstd[t] = ot_alloc(n);
    dx[t] = ot_alloc(N), dw[t] = ot_alloc(d), db[t] = ot_alloc(d);
    omp_set_num_threads(t + 1);
    txl_cpu_layernorm_forward(out[t], mean[t], rstd[t], x, w, b, n, d, d, kEps);
    txl_cpu_layernorm_backward(dx[t], dw[t], db[t], dy, x, w, mean[t], rstd[t], n, d, d);
  }
  omp_set_num_threads(2);
  ot_check_same("layernorm out threads 1 vs 2", out[0], out[1], (size_t)N * sizeof(float));
  ot_check_same("layernorm dinp threads 1 vs 2", dx[0], dx[1], (size_t)N * sizeof(float));
  ot_check_same("layernorm dw threads 1 vs 2", dw[0], dw[1], (size_t)d * sizeof(float));
  ot_check_same("layernorm db threads 1 vs 2", db[0], db[1], (size_t)d * sizeof(float));
  for (int t = 0; t < 2; t++) free(out[t]), free(mean[t]), free(rstd[t]), free(dx[t]), free(dw[t]), free(db[t]);
  free(x), free(w), free(b), free(dy);
}

/* Rows ld > d apart: every op reads and writes the first d features of each row only, with the
 * same arithmetic, so its results are the packed rows' bits and the gaps keep their fill. Narrow
 * rows and rows wider than TXL_CPU_COLSUM_MAX_N (the separate-pass paths). */
static void test_padded(int rows, int cols, int d, int ld, OtRng *rng) {
  const int64_t n = (int64_t)rows * cols;
  const float fill = -3072.0f;
  const TxlDropout drop = {0.3f, 5u, 7u, 2u, NULL};
  float *x = ot_alloc(n * d), *y = ot_alloc(n * d), *dy = ot_alloc(n * d), *w = ot_alloc(d), *b = ot_alloc(d);
  for (int64_t i = 0; i < n * d; i++)
    x[i] = (float)ot_uniform(rng) - 0.5f, y[i] = (float)ot_uniform(rng) - 0.5f, dy[i] = (float)ot_uniform(rng) - 0.5f;
  for (int j = 0; j < d; j++) w[j] = 0.5f + (float)ot_uniform(rng), b[j] = (float)ot_uniform(rng) - 0.5f;
  /* [6][n * ld]: x, y, dy, res, out, dinp padded; the packed ones [6][n * d] */
  float *p[6], *q[6];
  const float *src[6] = {x, y, dy, y, y, y};
  for (int k = 0; k < 6; k++) {
    p[k] = ot_alloc(n * ld), q[k] = ot_alloc(n * d);
    memcpy(q[k], src[k], (size_t)(n * d) * sizeof(float));
    for (int64_t r = 0; r < n; r++)
      for (int j = 0; j < ld; j++) p[k][r * ld + j] = j < d ? src[k][r * d + j] : fill;
  }
  float *qm = ot_alloc(n), *qr = ot_alloc(n), *pm = ot_alloc(n), *pr = ot_alloc(n);
  float *qg = calloc((size_t)2 * d, sizeof(float)), *pg = calloc((size_t)2 * d, sizeof(float)); /* dw, db */
  txl_cpu_add_layernorm_forward(q[3], q[4], qm, qr, q[0], q[1], w, b, n, d, d, 1e-5f);
  txl_cpu_add_layernorm_forward(p[3], p[4], pm, pr, p[0], p[1], w, b, n, d, ld, 1e-5f);
  txl_cpu_layernorm_backward(q[5], qg, qg + d, q[2], q[3], w, qm, qr, n, d, d);
  txl_cpu_layernorm_backward(p[5], pg, pg + d, p[2], p[3], w, pm, pr, n, d, ld);
  txl_cpu_layernorm_backward_dropout(q[1], q[4], qg, qg + d, q[2], q[3], w, qm, qr, rows, cols, d, d, 3, drop);
  txl_cpu_layernorm_backward_dropout(p[1], p[4], pg, pg + d, p[2], p[3], w, pm, pr, rows, cols, d, ld, 3, drop);
  txl_cpu_layernorm_forward(q[0], qm, qr, q[3], w, b, n, d, d, 1e-5f);
  txl_cpu_layernorm_forward(p[0], pm, pr, p[3], w, b, n, d, ld, 1e-5f);
  int same = memcmp(qm, pm, (size_t)n * sizeof(float)) == 0 && memcmp(qr, pr, (size_t)n * sizeof(float)) == 0 &&
             memcmp(qg, pg, (size_t)2 * d * sizeof(float)) == 0;
  int gaps = 1;
  for (int k = 0; k < 6; k++)
    for (int64_t r = 0; r < n; r++) {
      same &= memcmp(p[k] + r * ld, q[k] + r * d, (size_t)d * sizeof(float)) == 0;
      for (int j = d; j < ld; j++) gaps &= p[k][r * ld + j] == fill;
    }
  char what[128];
  snprintf(what, sizeof what, "layer-norm ops on rows %d apart (d %d, %dx%d): the packed bits, gaps untouched", ld, d,
           rows, cols);
  ot_check_true(what, same && gaps, "same %d gaps %d", same, gaps);
  for (int k = 0; k < 6; k++) free(p[k]), free(q[k]);
  free(x), free(y), free(dy), free(w), free(b), free(qm), free(qr), free(pm), free(pr), free(qg), free(pg);
}

int main(void) {
  OtRng rng = ot_rng(5);
  printf("layernorm (eps = 1e-5)\n");
  test_layernorm(1, 7, 1, &rng);
  test_layernorm(5, 1, 1, &rng); /* d = 1: out = b, gradients of x vanish */
  test_layernorm(13, 37, 1, &rng);
  test_layernorm(6, 64, 1, &rng);
  test_layernorm(300, 129, 0, &rng); /* parallel path, against the analytic double backward */
  test_layernorm(9, 4101, 0, &rng);  /* wide rows: the column-block path for dw, db */
  test_threads(&rng);
  test_padded(7, 5, 67, 72, &rng);
  test_padded(3, 2, 4101, 4104, &rng); /* wider than TXL_CPU_COLSUM_MAX_N */
  return ot_finish("test_op_layernorm");
}
