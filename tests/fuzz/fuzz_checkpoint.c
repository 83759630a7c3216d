/* Fuzz harness: the checkpoint reader (src/checkpoint/ckpt_*.c) on a checkpoint file, with
 * MPI on one rank: txl_ckpt_peek (and the stored config through the INI parser, as txl-eval
 * does), txl_ckpt_read_run_id, txl_ckpt_read_params and txl_ckpt_read into buffers of the model
 * of ckpt_model.h.
 *
 * Input: an HDF5 file (starting with HDF5's signature: mutations of make_ckpt_seed.c's
 * checkpoint), read as it is; or anything else, a description of a checkpoint of that model
 * (h5gen.h: each root attribute, group and tensor as in a valid checkpoint or not), written with
 * plain HDF5 calls first. A damaged byte of a real file mostly stops at HDF5's checksums;
 * described files reach the reader's own checks.
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
#include "tests/fuzz/h5gen.h"

static const char *g_path;
static TxlDims g_dims;
static TxlParamTable g_table;
static TxlCkptBuffers g_buf;
static char *g_config;  /* the valid config text */
static float *g_zeros;  /* values of the described tensors */

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
  txl_param_table_build(&g_table, &g_dims, 8); /* read into padded rows, as the CUDA backend */
  const size_t n = (size_t)g_table.total;
  const size_t nm = (size_t)g_dims.n_layer * FUZZ_CKPT_MEM_LEN * FUZZ_CKPT_BATCH * (size_t)g_dims.d_model;
  g_buf = (TxlCkptBuffers){.table = &g_table, .params = malloc(n * sizeof(float)),
                           .adam_m = malloc(n * sizeof(float)), .adam_v = malloc(n * sizeof(float)),
                           .mems = malloc(nm * sizeof(float)), .n_layer = g_dims.n_layer,
                           .mem_len = FUZZ_CKPT_MEM_LEN, .d_model = g_dims.d_model,
                           .B_global = FUZZ_CKPT_BATCH, .B_local = FUZZ_CKPT_BATCH, .col0 = 0};
  g_config = fuzz_ckpt_config();
  g_zeros = calloc(n > nm ? n : nm, sizeof(float));
  if (!g_buf.params || !g_buf.adam_m || !g_buf.adam_v || !g_buf.mems || !g_config || !g_zeros)
    fuzz_fail("out of memory");
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

/* The root attributes of a valid checkpoint of the model (src/checkpoint/FORMAT.md). */
static void described_attrs(hid_t f, FuzzIn *in) {
  TxlCkptState st;
  fuzz_ckpt_state(&st);
  const struct {
    const char *name;
    Canon value;
  } attrs[] = {
      {"format", {.kind = CANON_STRING, .s = TXL_CKPT_FORMAT}},
      {"format_version", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = TXL_CKPT_FORMAT_VERSION}},
      {"step", {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = st.step}},
      {"tokens_seen", {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = st.tokens_seen}},
      {"data_pos", {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = st.data_pos}},
      {"epoch", {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = st.epoch}},
      {"best_step", {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = st.best_step}},
      {"mem_rows", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = st.mem_rows}},
      {"adam_t", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = st.adam_t}},
      {"world_size", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = st.world_size}},
      {"batch_size", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = FUZZ_CKPT_BATCH}},
      {"mem_len", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = FUZZ_CKPT_MEM_LEN}},
      {"n_layer", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = g_dims.n_layer}},
      {"d_model", {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = g_dims.d_model}},
      {"seed", {.kind = CANON_INT, .type = H5T_STD_U32LE, .i = st.seed}},
      {"best_valid_loss", {.kind = CANON_FLOAT, .type = H5T_IEEE_F64LE, .f = st.best_valid_loss}},
      {"lr", {.kind = CANON_FLOAT, .type = H5T_IEEE_F64LE, .f = st.lr}},
      {"run_id", {.kind = CANON_STRING, .s = st.run_id}},
      {"vocab_digest", {.kind = CANON_STRING, .s = st.vocab_digest}},
      {"config", {.kind = CANON_STRING, .s = g_config}},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof *attrs; i++) gen_attr(f, attrs[i].name, &attrs[i].value, in);
}

/* One of /params, /adam_m, /adam_v: every tensor of the model, or not. */
static int described_group(hid_t f, const char *name, FuzzIn *in) {
  const unsigned op = fuzz_in_byte(in) % 8;
  if (op == 5) return 0; /* missing */
  if (op == 6) {         /* a dataset in its place */
    hsize_t one = 1;
    return gen_dataset(f, name, H5T_IEEE_F32LE, 1, &one, H5T_NATIVE_FLOAT, g_zeros, in);
  }
  hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return -1;
  int rc = 0;
  for (int i = 0; i < g_table.n_tensors && rc == 0; i++) {
    const TxlTensorInfo *ti = &g_table.tensors[i];
    const hsize_t dims[2] = {(hsize_t)ti->shape[0], (hsize_t)ti->shape[1]};
    rc = gen_dataset(g, ti->name, H5T_IEEE_F32LE, ti->rank, dims, H5T_NATIVE_FLOAT, g_zeros, in);
  }
  if (rc == 0 && op == 7) { /* a tensor this model does not have */
    hsize_t one = 1;
    rc = gen_dataset(g, "extra", H5T_IEEE_F32LE, 1, &one, H5T_NATIVE_FLOAT, g_zeros, in);
  }
  H5Gclose(g);
  return rc;
}

/* Writes the checkpoint the input describes (h5gen.h) to g_path. Returns 0, or -1 when HDF5
 * could not write it. */
static int write_described(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  hid_t f = gen_create(g_path);
  if (f < 0) return -1;
  described_attrs(f, &in);
  int rc = 0;
  static const char *const groups[] = {"params", "adam_m", "adam_v"};
  for (int k = 0; k < 3 && rc == 0; k++) rc = described_group(f, groups[k], &in);
  const hsize_t mems[4] = {(hsize_t)g_dims.n_layer, FUZZ_CKPT_MEM_LEN, FUZZ_CKPT_BATCH, (hsize_t)g_dims.d_model};
  if (rc == 0) rc = gen_dataset(f, "mems", H5T_IEEE_F32LE, 4, mems, H5T_NATIVE_FLOAT, g_zeros, &in);
  if (H5Fclose(f) < 0) rc = -1;
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gen_file_then_run(g_path, data, size, write_described, run);
  return 0;
}
