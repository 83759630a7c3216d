/* kernels/cuda/cublas_load.c: a program built with the CUDA backend does not map cuBLAS or
 * cuBLASLt until it calls one of their functions; the first call opens both and finds every
 * function the backend uses (a name the library lacks ends the program with one line), and the
 * call reaches the library. cublasGetStatusName needs no GPU, so this runs everywhere the CUDA
 * build does. (Label cuda-build.) */
#include <cublas_v2.h>
#include <stdio.h>
#include <string.h>


/* Whether a mapping of the process names `lib` (/proc/self/maps). */
static int mapped(const char *lib) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) {
    printf("SKIPPED: no /proc/self/maps\n");
    return -1;
  }
  char line[4096];
  int found = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, lib)) found = 1;
  fclose(f);
  return found;
}

int main(void) {
  const int before = mapped("libcublas");
  if (before < 0) return 77; /* skipped */
  int failed = 0;
  if (before) {
    printf("FAIL: libcublas is mapped before any cuBLAS call\n");
    failed++;
  } else {
    printf("ok   no cuBLAS library mapped at start\n");
  }
  const char *name = cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED);
  if (name && !strcmp(name, "CUBLAS_STATUS_NOT_SUPPORTED")) {
    printf("ok   cublasGetStatusName through the loader: %s\n", name);
  } else {
    printf("FAIL: cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED) gave %s\n", name ? name : "NULL");
    failed++;
  }
  const int lt = mapped("libcublasLt"), blas = mapped("libcublas.so");
  if (lt == 1 && blas == 1) {
    printf("ok   libcublas and libcublasLt mapped after the first call\n");
  } else {
    printf("FAIL: after the first call libcublas mapped %d, libcublasLt %d\n", blas, lt);
    failed++;
  }
  printf("%s\n", failed ? "FAILED" : "PASSED");
  return failed ? 1 : 0;
}
