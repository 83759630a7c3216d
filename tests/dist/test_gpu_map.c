/* txl_dist_gpu_for_rank: one rank per GPU, a clear message when a node has more ranks than GPUs
 * or none. Exits 1 if any check fails. */
#include <stdio.h>
#include <string.h>

#include "dist/gpu.h"

static int g_fail = 0;

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                               \
      fputc('\n', stderr);                                                        \
      g_fail++;                                                                   \
    }                                                                             \
  } while (0)

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

int main(void) {
  char err[256];

  /* ranks <= GPUs: rank r drives GPU r, no message */
  for (int gpus = 1; gpus <= 8; gpus++)
    for (int size = 1; size <= gpus; size++)
      for (int r = 0; r < size; r++) {
        strcpy(err, "untouched");
        int g = txl_dist_gpu_for_rank(r, size, gpus, "node7", err, sizeof err);
        CHECK(g == r, "rank %d of %d, %d GPUs: got %d", r, size, gpus, g);
        CHECK(err[0] == '\0', "message on success: %s", err);
      }

  /* more ranks than GPUs: every rank fails, the message names the host and both counts */
  for (int r = 0; r < 4; r++) {
    int g = txl_dist_gpu_for_rank(r, 4, 2, "gpu-node-3", err, sizeof err);
    CHECK(g == -1, "rank %d: got %d", r, g);
    CHECK(has(err, "gpu-node-3") && has(err, "4 ranks") && has(err, "2 GPUs") &&
          has(err, "ppr:2:node"), "message: %s", err);
    CHECK(!strchr(err, '\n'), "not one line: %s", err);
  }
  CHECK(txl_dist_gpu_for_rank(0, 3, 1, "solo", err, sizeof err) == -1, "3 ranks, 1 GPU");
  CHECK(has(err, "solo") && has(err, "3 ranks") && has(err, "1 GPU;"), "message: %s", err);
  printf("more ranks than GPUs: %s\n", err);

  /* no GPU at all */
  CHECK(txl_dist_gpu_for_rank(0, 1, 0, "cpu-only", err, sizeof err) == -1, "0 GPUs");
  CHECK(has(err, "cpu-only") && has(err, "no CUDA device"), "message: %s", err);
  printf("no GPU: %s\n", err);
  CHECK(txl_dist_gpu_for_rank(1, 2, -1, "cpu-only", err, sizeof err) == -1, "-1 GPUs");

  /* inconsistent arguments */
  CHECK(txl_dist_gpu_for_rank(2, 2, 4, "h", err, sizeof err) == -1, "local_rank == local_size");
  CHECK(txl_dist_gpu_for_rank(-1, 2, 4, "h", err, sizeof err) == -1, "negative local_rank");
  CHECK(txl_dist_gpu_for_rank(0, 0, 4, "h", err, sizeof err) == -1, "no ranks");

  /* no host name, no room for a message, a short buffer: no crash, still -1 / the GPU */
  CHECK(txl_dist_gpu_for_rank(0, 2, 1, NULL, NULL, 0) == -1, "NULL host, NULL err");
  CHECK(txl_dist_gpu_for_rank(1, 2, 2, NULL, NULL, 0) == 1, "NULL host, NULL err, success");
  char tiny[8];
  CHECK(txl_dist_gpu_for_rank(0, 4, 2, "a-very-long-host-name", tiny, sizeof tiny) == -1, "tiny");
  CHECK(strlen(tiny) == sizeof tiny - 1, "truncated message: %s", tiny);

  printf("gpu_map: %s\n", g_fail ? "FAIL" : "PASS");
  return g_fail ? 1 : 0;
}
