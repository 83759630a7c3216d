/* txl_dist_gpu_for_rank and txl_dist_gpu_shared (dist/gpu.h): a rank that sees one GPU uses it
 * (per-task binding), a rank that sees several uses its node-local rank's, a clear message naming
 * the launcher when a node's ranks see fewer GPUs than there are ranks, or none; two ranks on one
 * GPU found by id. Exits 1 if any check fails. */
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
  char err[400];

  /* several GPUs, ranks <= GPUs: rank r drives GPU r, no message */
  for (int gpus = 2; gpus <= 8; gpus++)
    for (int size = 1; size <= gpus; size++)
      for (int r = 0; r < size; r++) {
        strcpy(err, "untouched");
        int g = txl_dist_gpu_for_rank(r, size, gpus, "node7", "mpirun", err, sizeof err);
        CHECK(g == r, "rank %d of %d, %d GPUs: got %d", r, size, gpus, g);
        CHECK(err[0] == '\0', "message on success: %s", err);
      }

  /* one visible GPU per rank (srun --gpus-per-task=1): every local rank uses device 0 */
  for (int size = 1; size <= 8; size++)
    for (int r = 0; r < size; r++)
      CHECK(txl_dist_gpu_for_rank(r, size, 1, "n", "srun", err, sizeof err) == 0, "rank %d of %d, 1 GPU", r, size);
  CHECK(has(txl_dist_gpu_rule(1), "the one GPU it sees") && has(txl_dist_gpu_rule(4), "node-local rank"),
        "rules: %s / %s", txl_dist_gpu_rule(1), txl_dist_gpu_rule(4));

  /* several GPUs but fewer than the ranks: every rank fails; the advice is the launcher's */
  const char *launchers[] = {"mpirun", "srun", "no launcher"};
  const char *advice[] = {"mpirun --map-by ppr:2:node", "srun --gpus-per-task=1", "CUDA_VISIBLE_DEVICES"};
  for (int l = 0; l < 3; l++)
    for (int r = 0; r < 4; r++) {
      int g = txl_dist_gpu_for_rank(r, 4, 2, "gpu-node-3", launchers[l], err, sizeof err);
      CHECK(g == -1, "rank %d: got %d", r, g);
      CHECK(has(err, "gpu-node-3") && has(err, launchers[l]) && has(err, "4 ranks") && has(err, "2 GPUs") &&
            has(err, advice[l]), "message: %s", err);
      CHECK(l == 1 || !has(err, "srun"), "%s advice names srun: %s", launchers[l], err);
      CHECK(!strchr(err, '\n'), "not one line: %s", err);
    }
  printf("more ranks than GPUs under srun: %s\n", (txl_dist_gpu_for_rank(0, 4, 2, "h", "srun", err, sizeof err), err));

  /* no GPU at all */
  CHECK(txl_dist_gpu_for_rank(0, 1, 0, "cpu-only", "srun", err, sizeof err) == -1, "0 GPUs");
  CHECK(has(err, "cpu-only") && has(err, "srun") && has(err, "no CUDA device"), "message: %s", err);
  printf("no GPU: %s\n", err);
  CHECK(txl_dist_gpu_for_rank(1, 2, -1, "cpu-only", "mpirun", err, sizeof err) == -1, "-1 GPUs");

  /* inconsistent arguments */
  CHECK(txl_dist_gpu_for_rank(2, 2, 4, "h", "mpirun", err, sizeof err) == -1, "local_rank == local_size");
  CHECK(txl_dist_gpu_for_rank(-1, 2, 4, "h", "mpirun", err, sizeof err) == -1, "negative local_rank");
  CHECK(txl_dist_gpu_for_rank(0, 0, 4, "h", "mpirun", err, sizeof err) == -1, "no ranks");

  /* no host or launcher name, no room for a message, a short buffer: no crash, still -1 / the GPU */
  CHECK(txl_dist_gpu_for_rank(0, 3, 2, NULL, NULL, NULL, 0) == -1, "NULL host, NULL err");
  CHECK(txl_dist_gpu_for_rank(1, 2, 2, NULL, NULL, NULL, 0) == 1, "NULL host, NULL err, success");
  char tiny[8];
  CHECK(txl_dist_gpu_for_rank(0, 4, 2, "a-very-long-host-name", "srun", tiny, sizeof tiny) == -1, "tiny");
  CHECK(strlen(tiny) == sizeof tiny - 1, "truncated message: %s", tiny);

  /* two node-local ranks on one GPU, by PCI bus id */
  char ids[4][16] = {"0000:17:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0"};
  int a = -1, b = -1;
  CHECK(!txl_dist_gpu_shared(ids[0], 4, sizeof ids[0], &a, &b), "distinct ids found shared: %d %d", a, b);
  strcpy(ids[3], ids[1]);
  CHECK(txl_dist_gpu_shared(ids[0], 4, sizeof ids[0], &a, &b) && a == 1 && b == 3, "shared 1 and 3: got %d %d", a, b);
  CHECK(!txl_dist_gpu_shared(ids[0], 1, sizeof ids[0], &a, &b), "one rank cannot share");

  printf("gpu_map: %s\n", g_fail ? "FAIL" : "PASS");
  return g_fail ? 1 : 0;
}
