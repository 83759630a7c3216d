/* A CBLAS sgemm recorder, preloaded into a txl process (LD_PRELOAD): every cblas_sgemm call the
 * process makes, from the model's GEMM ops and from the attention's per-head products alike, is
 * written as one line to the file named by TXL_BLAS_RECORD (in an MPI job, with ".RANK" appended:
 * Open MPI's OMPI_COMM_WORLD_RANK) and then made by the next library in
 * the search order (the one txl links). scripts/bench-blas.sh replays the lines (bench_blas.c).
 *
 * Line: "order trans_a trans_b M N K lda ldb ldc alpha beta" with order 101 (row-major) or 102
 * and the transposes as CBLAS numbers (111 no, 112 yes). Calls from several threads at once are
 * written one at a time (a mutex); their order among themselves is the scheduler's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*TxlSgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);

static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *record_file;
static TxlSgemm next_sgemm;

static void record_open(void) {
  const char *path = getenv("TXL_BLAS_RECORD");
  next_sgemm = (TxlSgemm)dlsym(RTLD_NEXT, "cblas_sgemm");
  if (!next_sgemm) {
    fprintf(stderr, "blas_record: no cblas_sgemm after the recorder in the search order\n");
    exit(1);
  }
  if (!path || !*path) {
    fprintf(stderr, "blas_record: TXL_BLAS_RECORD names no file to record into\n");
    exit(1);
  }
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  char name[4096];
  if (snprintf(name, sizeof name, rank ? "%s.%s" : "%s", path, rank) >= (int)sizeof name) {
    fprintf(stderr, "blas_record: TXL_BLAS_RECORD is too long a path\n");
    exit(1);
  }
  record_file = fopen(name, "w");
  if (!record_file) {
    perror(name);
    exit(1);
  }
}

static pthread_once_t record_once = PTHREAD_ONCE_INIT;

void cblas_sgemm(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
  pthread_once(&record_once, record_open);
  pthread_mutex_lock(&record_lock);
  fprintf(record_file, "%d %d %d %d %d %d %d %d %d %.9g %.9g\n", order, ta, tb, M, N, K, lda, ldb, ldc, (double)alpha,
          (double)beta);
  fflush(record_file);
  pthread_mutex_unlock(&record_lock);
  next_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
