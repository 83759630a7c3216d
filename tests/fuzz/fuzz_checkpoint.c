/* Fuzz harness: the checkpoint reader (src/checkpoint/checkpoint.c) on a checkpoint file (the
 * input: mutations of the seed of make_ckpt_seed.c, a model of ckpt_model.h), with MPI on one
 * rank: txl_ckpt_peek (and the stored config through the INI parser, as txl-eval does),
 * txl_ckpt_read_run_id, txl_ckpt_read_params and txl_ckpt_read into buffers of that model.
 *
 * These functions promise to return every error (-1 and a message): an exit through txl_fatal
 * is a crash here, as is memory or an HDF5 object they leave behind (fuzz.h). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/checkpoint.h"
#include "src/config/config.h"
#include "tests/fuzz/ckpt_model.h"
#include "tests/fuzz/fuzz.h"

static const char *g_path;
static TxlDims g_dims;
static TxlParamTable g_table;
static TxlCkptBuffers g_buf;

static void finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  MPI_Init(NULL, NULL);
  atexit(finalize);
  g_path = fuzz_path("checkpoint.h5");
  fuzz_ckpt_dims(&g_dims);
  txl_param_table_build(&g_table, &g_dims);
  const size_t n = (size_t)g_table.total;
  const size_t nm = (size_t)g_dims.n_layer * FUZZ_CKPT_MEM_LEN * FUZZ_CKPT_BATCH * (size_t)g_dims.d_model;
  g_buf = (TxlCkptBuffers){.table = &g_table, .params = malloc(n * sizeof(float)),
                           .adam_m = malloc(n * sizeof(float)), .adam_v = malloc(n * sizeof(float)),
                           .mems = malloc(nm * sizeof(float)), .n_layer = g_dims.n_layer,
                           .mem_len = FUZZ_CKPT_MEM_LEN, .d_model = g_dims.d_model,
                           .B_global = FUZZ_CKPT_BATCH, .B_local = FUZZ_CKPT_BATCH, .col0 = 0};
  if (!g_buf.params || !g_buf.adam_m || !g_buf.adam_v || !g_buf.mems) fuzz_fail("out of memory");
  return 0;
}

static void run(void *arg) {
  (void)arg;
  char err[1024], run_id[TXL_CKPT_ID_LEN];
  char *config = NULL;
  TxlCkptState st;
  if (txl_ckpt_peek(g_path, &config, &st, err, sizeof err) == 0) {
    TxlConfig cfg;
    txl_config_defaults(&cfg);
    if (txl_config_load_ini_text(&cfg, config, g_path, err, sizeof err) != 0) fuzz_note("config: %s", err);
    fuzz_free(config); /* the reader's allocation: given back through the tracking free */
  } else {
    fuzz_note("peek: %s", err);
  }
  if (txl_ckpt_read_run_id(g_path, run_id, err, sizeof err) != 0) fuzz_note("run_id: %s", err);
  if (txl_ckpt_read_params(g_path, &g_table, g_dims.n_layer, g_dims.d_model, g_buf.params, &st, err,
                           sizeof err) != 0)
    fuzz_note("read_params: %s", err);
  if (txl_ckpt_read(g_path, &st, &g_buf, err, sizeof err) != 0) fuzz_note("read: %s", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write_file(g_path, data, size);
  fuzz_run(run, NULL, FUZZ_EXIT_CRASH);
  return 0;
}
