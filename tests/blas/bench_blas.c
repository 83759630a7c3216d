/* The GEMMs of one txl training step, replayed against each CPU BLAS found here: the evidence for
 * the library txl's CPU backend links (scripts/bench-blas.sh records the calls, this times them).
 *
 *   bench_blas BEFORE.rec AFTER.rec [REPEATS]
 *
 * BEFORE and AFTER are blas_record.c's files of two runs that differ by exactly one training step
 * (txl-train --bench 1 and --bench 2: the warm-up, the peak probe and the setup are the same in
 * both): the calls AFTER has more of are that step's. Each library multiplies each distinct call
 * of the step (same shape, transposes, leading dimensions, alpha and beta) as often as the step
 * makes it, best of REPEATS (default 5) batches, on the same operands; the step's GEMM time is the
 * sum. Every library's products are checked against double-precision dot products at sampled
 * entries, within the bound of float summation (below), so that a library that is fast but wrong
 * for these calls shows it. One thread per library (the caller sets OMP_NUM_THREADS=1 and the
 * like): the view of one rank of a PxT = Px1 layout.
 *
 * Libraries: the one txl links (TXL_BLAS_LIBRARY, fixed at build time), BLIS (libblis.so.4) and
 * oneDNN (libdnnl.so.2, its row-major dnnl_sgemm), each opened here with dlopen where installed;
 * libxsmm (libxsmm_sgemm: its JIT kernels up to its size limit, beyond it the BLAS txl links) linked
 * in where it was found at configure time, as Debian ships only its static library.
 * Timings of a replay, outside the step: its operands stay in cache between the calls of a batch,
 * which the step's do not (other ops run between them). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TXL_HAVE_LIBXSMM
#include <libxsmm.h> /* initialised by its first call (each shape's untimed first call) */
#endif

#include "src/base/timer.h"
#include "tests/lib/test_util.h"

#ifndef TXL_BLAS_LIBRARY
#error "TXL_BLAS_LIBRARY: the BLAS library txl links (set by tests/blas/CMakeLists.txt)"
#endif

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112, MAX_CALLS = 4096, MAX_LIBS = 4, SAMPLES = 48 };

typedef struct {
  int order, ta, tb, M, N, K, lda, ldb, ldc;
  double alpha, beta;
  long before, after; /* how many times each record made it */
} Call;

typedef void (*CblasSgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                           float *, int);
typedef int (*DnnlSgemm)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                         int64_t, float, float *, int64_t);

typedef struct {
  const char *name, *soname;
  CblasSgemm cblas;
  DnnlSgemm dnnl;
  int linked_in; /* built into bench_blas (cblas set or NULL at build time), not opened with dlopen */
  double step_s, worst; /* the step's GEMM seconds; the largest error / bound of its checks */
} Lib;

static Call calls[MAX_CALLS];
static int n_calls;

static void read_record(const char *path, int after) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "bench_blas: %s: cannot open the record\n", path);
    exit(1);
  }
  Call c;
  int line = 0, got;
  while ((got = fscanf(f, "%d %d %d %d %d %d %d %d %d %lf %lf", &c.order, &c.ta, &c.tb, &c.M, &c.N, &c.K, &c.lda,
                       &c.ldb, &c.ldc, &c.alpha, &c.beta)) == 11) {
    line++;
    if (c.order != ROW_MAJOR || (c.ta != NO_TRANS && c.ta != TRANS) || (c.tb != NO_TRANS && c.tb != TRANS) ||
        c.M < 0 || c.N < 0 || c.K < 0) {
      fprintf(stderr, "bench_blas: %s:%d: not a row-major call of known transposes and sizes\n", path, line);
      exit(1);
    }
    int i = 0;
    while (i < n_calls && !(calls[i].ta == c.ta && calls[i].tb == c.tb && calls[i].M == c.M && calls[i].N == c.N &&
                            calls[i].K == c.K && calls[i].lda == c.lda && calls[i].ldb == c.ldb &&
                            calls[i].ldc == c.ldc && calls[i].alpha == c.alpha && calls[i].beta == c.beta))
      i++;
    if (i == n_calls) {
      if (n_calls == MAX_CALLS) {
        fprintf(stderr, "bench_blas: %s: more than %d distinct calls\n", path, MAX_CALLS);
        exit(1);
      }
      c.before = c.after = 0;
      calls[n_calls++] = c;
    }
    if (after)
      calls[i].after++;
    else
      calls[i].before++;
  }
  if (got != EOF || ferror(f)) {
    fprintf(stderr, "bench_blas: %s:%d: a line that is not a recorded call\n", path, line + 1);
    exit(1);
  }
  fclose(f);
}

/* Elements each operand spans: rows of a row-major matrix, ld apart. */
static size_t span(int rows, int cols, int ld) { return rows == 0 || cols == 0 ? 0 : (size_t)(rows - 1) * ld + cols; }
static size_t span_a(const Call *c) { return c->ta == TRANS ? span(c->K, c->M, c->lda) : span(c->M, c->K, c->lda); }
static size_t span_b(const Call *c) { return c->tb == TRANS ? span(c->N, c->K, c->ldb) : span(c->K, c->N, c->ldb); }
static size_t span_c(const Call *c) { return span(c->M, c->N, c->ldc); }

#ifdef TXL_HAVE_LIBXSMM
/* libxsmm_sgemm behind cblas_sgemm's signature (row-major only, as the records are): its
 * column-major product C^T = op(B)^T op(A)^T. */
static void xsmm_cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                             const float *B, int ldb, float beta, float *C, int ldc) {
  (void)order;
  const char xa = tb == TRANS ? 'T' : 'N', xb = ta == TRANS ? 'T' : 'N';
  const libxsmm_blasint m = N, n = M, k = K, ldx_a = ldb, ldx_b = lda, ldx_c = ldc;
  libxsmm_sgemm(&xa, &xb, &m, &n, &k, &alpha, B, &ldx_a, A, &ldx_b, &beta, C, &ldx_c);
}
#define XSMM_CBLAS_SGEMM xsmm_cblas_sgemm
#else
#define XSMM_CBLAS_SGEMM NULL
#endif

static void gemm(const Lib *l, const Call *c, const float *A, const float *B, float *C) {
  if (l->dnnl)
    l->dnnl(c->ta == TRANS ? 'T' : 'N', c->tb == TRANS ? 'T' : 'N', c->M, c->N, c->K, (float)c->alpha, A, c->lda, B,
            c->ldb, (float)c->beta, C, c->ldc);
  else
    l->cblas(ROW_MAJOR, c->ta, c->tb, c->M, c->N, c->K, (float)c->alpha, A, c->lda, B, c->ldb, (float)c->beta, C,
             c->ldc);
}

/* Checks sampled entries of C = alpha op(A) op(B) + beta C0 against double precision. The bound
 * of a float result: the K products and K - 1 additions of a dot product in any order (blocked,
 * FMA or not) are off by at most gamma_K sum |a b| with gamma_K = K u / (1 - K u), u = 2^-24
 * (Higham, Accuracy and Stability of Numerical Algorithms, 3.1); alpha's and beta's scalings and
 * the final addition add at most 3 roundings of |alpha dot| + |beta c0|. Returns the largest
 * |error| / bound of the samples (<= 1 for a correct library). */
static double check(const Call *c, const float *A, const float *B, const float *C0, const float *C) {
  const double u = OT_U, gk = c->K * u / (1.0 - c->K * u);
  double worst = 0.0;
  OtRng rng = ot_rng(5);
  for (int s = 0; s < SAMPLES && c->M > 0 && c->N > 0; s++) {
    const int i = ot_randint(&rng, c->M), j = ot_randint(&rng, c->N);
    double dot = 0.0, mag = 0.0;
    for (int k = 0; k < c->K; k++) {
      const double a = c->ta == TRANS ? A[(size_t)k * c->lda + i] : A[(size_t)i * c->lda + k];
      const double b = c->tb == TRANS ? B[(size_t)j * c->ldb + k] : B[(size_t)k * c->ldb + j];
      dot += a * b;
      mag += fabs(a * b);
    }
    const double c0 = C0[(size_t)i * c->ldc + j], want = c->alpha * dot + c->beta * c0;
    const double bound = fabs(c->alpha) * gk * mag + 3.0 * u * (fabs(c->alpha * dot) + fabs(c->beta * c0)) + 1e-30;
    const double got = C[(size_t)i * c->ldc + j], r = isfinite(got) ? fabs(got - want) / bound : INFINITY;
    if (!(r <= worst)) worst = r;
  }
  return worst;
}

/* qsort's order of call indices: the most time per step in library 0 (the linked one) first */
static const double *sort_time;
static int slower_first(const void *a, const void *b) {
  const int i = *(const int *)a, j = *(const int *)b;
  const double ti = sort_time[(size_t)i * MAX_LIBS] * calls[i].after, tj = sort_time[(size_t)j * MAX_LIBS] * calls[j].after;
  return ti > tj ? -1 : ti < tj;
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: bench_blas BEFORE.rec AFTER.rec [REPEATS]\n");
    return 2;
  }
  const int repeats = argc == 4 ? atoi(argv[3]) : 5;
  if (repeats < 1) {
    fprintf(stderr, "bench_blas: REPEATS must be a positive count, not %s\n", argv[3]);
    return 2;
  }
  read_record(argv[1], 0);
  read_record(argv[2], 1);
  /* the step: what AFTER made more often */
  int n_step = 0;
  double flops = 0.0;
  size_t max_a = 0, max_b = 0, max_c = 0;
  for (int i = 0; i < n_calls; i++) {
    Call *c = &calls[i];
    if (c->after < c->before) {
      fprintf(stderr, "bench_blas: %s makes a %dx%dx%d call fewer times than %s: not one step more\n", argv[2], c->M,
              c->N, c->K, argv[1]);
      return 1;
    }
    c->after -= c->before; /* from here on: the step's count */
    if (c->after == 0) continue;
    calls[n_step++] = *c;
    flops += 2.0 * c->M * (double)c->N * c->K * (double)c->after;
    if (span_a(c) > max_a) max_a = span_a(c);
    if (span_b(c) > max_b) max_b = span_b(c);
    if (span_c(c) > max_c) max_c = span_c(c);
  }
  n_calls = n_step;
  if (n_calls == 0) {
    fprintf(stderr, "bench_blas: %s and %s record the same calls: no step between them\n", argv[1], argv[2]);
    return 1;
  }
  Lib libs[MAX_LIBS] = {{"linked", TXL_BLAS_LIBRARY, 0, 0, 0, 0, 0}, {"blis", "libblis.so.4", 0, 0, 0, 0, 0},
                        {"onednn", "libdnnl.so.2", 0, 0, 0, 0, 0},
                        {"libxsmm", "libxsmm.a", XSMM_CBLAS_SGEMM, 0, 1, 0, 0}};
  int n_libs = 0;
  for (int k = 0; k < MAX_LIBS; k++) {
    if (libs[k].linked_in) {
      if (libs[k].cblas)
        libs[n_libs++] = libs[k];
      else
        printf("bench_blas: %s was not found when txl was configured: skipped\n", libs[k].name);
      continue;
    }
    void *h = dlopen(libs[k].soname, RTLD_NOW | RTLD_LOCAL);
    if (h) {
      libs[k].dnnl = (DnnlSgemm)dlsym(h, "dnnl_sgemm");
      libs[k].cblas = (CblasSgemm)dlsym(h, "cblas_sgemm");
    }
    if (!h || (!libs[k].dnnl && !libs[k].cblas)) {
      if (k == 0) {
        fprintf(stderr, "bench_blas: %s: %s\n", libs[k].soname, h ? "no cblas_sgemm" : dlerror());
        return 1;
      }
      printf("bench_blas: %s (%s) not installed here: skipped\n", libs[k].name, libs[k].soname);
      continue;
    }
    libs[n_libs++] = libs[k];
  }
  /* operands in [-1, 1), 64-byte aligned like txl's buffers */
  float *A = ot_alloc((int64_t)max_a), *B = ot_alloc((int64_t)max_b), *C0 = ot_alloc((int64_t)max_c);
  float *C = ot_alloc((int64_t)max_c);
  OtRng rng = ot_rng(1);
  ot_fill(A, (int64_t)max_a, -1.0f, 1.0f, &rng);
  ot_fill(B, (int64_t)max_b, -1.0f, 1.0f, &rng);
  ot_fill(C0, (int64_t)max_c, -1.0f, 1.0f, &rng);
  double *per_call = ot_alloc_d((int64_t)n_calls * MAX_LIBS);
  for (int k = 0; k < n_libs; k++) {
    Lib *l = &libs[k];
    l->step_s = l->worst = 0.0;
    for (int i = 0; i < n_calls; i++) {
      const Call *c = &calls[i];
      memcpy(C, C0, span_c(c) * sizeof(float));
      gemm(l, c, A, B, C); /* also the warm-up of this shape */
      const double r = check(c, A, B, C0, C);
      if (!(r <= l->worst)) l->worst = r;
      double best = INFINITY;
      for (int rep = 0; rep < repeats; rep++) {
        const double t0 = txl_now_s();
        for (long n = 0; n < c->after; n++) gemm(l, c, A, B, C);
        const double dt = txl_now_s() - t0;
        if (dt < best) best = dt;
      }
      per_call[(size_t)i * MAX_LIBS + k] = best / (double)c->after;
      l->step_s += best;
    }
  }
  long total = 0;
  for (int i = 0; i < n_calls; i++) total += calls[i].after;
  printf("one training step: %ld sgemm calls of %d distinct kinds, %.1f MFLOP; best of %d batches each, one thread\n",
         total, n_calls, flops / 1e6, repeats);
  printf("%-8s %12s %10s %16s  %s\n", "library", "step GEMMs", "GFLOP/s", "max err/bound", "");
  int fails = 0;
  for (int k = 0; k < n_libs; k++) {
    const Lib *l = &libs[k];
    const int ok = l->worst <= 1.0;
    fails += !ok;
    printf("%-8s %9.3f ms %10.1f %16.3g  %s (%s)\n", l->name, 1e3 * l->step_s, flops / l->step_s / 1e9, l->worst,
           ok ? "ok" : "WRONG RESULTS", l->soname);
  }
  double best_mix = 0.0;
  for (int i = 0; i < n_calls; i++) {
    double b = INFINITY;
    for (int k = 0; k < n_libs; k++)
      if (libs[k].worst <= 1.0 && per_call[(size_t)i * MAX_LIBS + k] < b) b = per_call[(size_t)i * MAX_LIBS + k];
    best_mix += b * (double)calls[i].after;
  }
  printf("%-8s %9.3f ms %10.1f %16s  (the fastest library for each kind of call)\n", "best-mix", 1e3 * best_mix,
         flops / best_mix / 1e9, "");
  /* the kinds of call that take most of the step, in the linked library's time */
  printf("\nthe step's largest calls (time per step, ms):\n%-5s %-2s %6s %6s %6s %6s %6s", "calls", "op", "M", "N",
         "K", "alpha", "beta");
  for (int k = 0; k < n_libs; k++) printf(" %9s", libs[k].name);
  printf("\n");
  int order[MAX_CALLS];
  for (int i = 0; i < n_calls; i++) order[i] = i;
  sort_time = per_call;
  qsort(order, (size_t)n_calls, sizeof order[0], slower_first);
  for (int shown = 0; shown < 12 && shown < n_calls; shown++) {
    const int top = order[shown];
    const Call *c = &calls[top];
    printf("%5ld %c%c %6d %6d %6d %6.3g %6.3g", c->after, c->ta == TRANS ? 'T' : 'N', c->tb == TRANS ? 'T' : 'N', c->M,
           c->N, c->K, c->alpha, c->beta);
    for (int k = 0; k < n_libs; k++) printf(" %9.3f", 1e3 * per_call[(size_t)top * MAX_LIBS + k] * (double)c->after);
    printf("\n");
  }
  free(per_call);
  free(A);
  free(B);
  free(C0);
  free(C);
  return fails ? 1 : 0;
}
