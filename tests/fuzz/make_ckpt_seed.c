/* Writes the seed of the checkpoint harness: a checkpoint of the model, config and state of
 * ckpt_model.h made by the project's writer (txl_ckpt_write).
 * usage: fuzz_make_ckpt_seed OUT.h5 (one rank) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "tests/fuzz/ckpt_model.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT.h5\n", argv[0]);
    return 2;
  }
  MPI_Init(&argc, &argv);
  TxlDims dims;
  fuzz_ckpt_dims(&dims);
  TxlParamTable table;
  txl_param_table_build(&table, &dims, 1);

  char *ini = fuzz_ckpt_config();
  if (!ini) txl_fatal("out of memory writing the config");

  const size_t n = (size_t)table.total, np = (size_t)table.packed,
               nm = (size_t)dims.n_layer * FUZZ_CKPT_MEM_LEN * FUZZ_CKPT_BATCH * (size_t)dims.d_model;
  float *p = txl_malloc(3 * n * sizeof(float), "parameters"), *mems = txl_malloc(nm * sizeof(float), "memory");
  float *q = txl_malloc(3 * np * sizeof(float), "parameters (packed)");
  /* the values by index in the packed view (the file's order), laid out with the padding */
  for (size_t i = 0; i < 3 * np; i++) q[i] = 0.25f * (float)(i % 7) - 0.5f;
  for (int k = 0; k < 3; k++) txl_params_unpack(&table, q + k * np, p + k * n);
  free(q);
  for (size_t i = 0; i < nm; i++) mems[i] = 0.125f * (float)(i % 5);
  TxlCkptBuffers b = {.table = &table, .params = p, .adam_m = p + n, .adam_v = p + 2 * n, .mems = mems,
                      .n_layer = dims.n_layer, .mem_len = FUZZ_CKPT_MEM_LEN, .d_model = dims.d_model,
                      .B_global = FUZZ_CKPT_BATCH, .B_local = FUZZ_CKPT_BATCH, .col0 = 0};
  TxlCkptState st;
  fuzz_ckpt_state(&st);
  char err[1024];
  if (txl_ckpt_write(argv[1], ini, &st, &b, err, sizeof err) != 0) txl_fatal("%s", err);
  free(ini);
  free(p);
  free(mems);
  txl_param_table_free(&table);
  MPI_Finalize();
  return 0;
}
