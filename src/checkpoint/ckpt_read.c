/* Reading a checkpoint: its root attributes alone (txl_ckpt_peek), everything into a run's
 * buffers (txl_ckpt_read), the parameters alone (txl_ckpt_read_params), the run id; the values a
 * checkpoint must not hold, and the vocabulary check. */
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

/* txl_ckpt_peek; whole: and for a file without a digest every dataset read back too. */
static int peek(const char *path, char **config_ini, TxlCkptState *st_out, int whole, char *err,
                size_t errlen) {
  CkptCtx c;
  ckpt_ctx_begin(&c, path);
  char *config = NULL;
  TxlCkptState st;
  CkptGeometry g;
  memset(&g, 0, sizeof g);
  hid_t file = ckpt_open_file(&c);
  if (file >= 0) {
    ckpt_read_root_attrs(&c, file, &st, &g, config_ini ? &config : NULL);
    ckpt_agree(&c);
    if (whole && !c.sealed) ckpt_verify_datasets(&c, file);
    ckpt_close_file(&c, &file);
    ckpt_agree(&c);
  }
  if (c.ok) {
    if (config_ini) *config_ini = config;
    else free(config);
    if (st_out) *st_out = st;
  } else {
    free(config);
  }
  return ckpt_ctx_end(&c, err, errlen);
}

int txl_ckpt_peek(const char *path, char **config_ini, TxlCkptState *st_out, char *err,
                  size_t errlen) {
  return peek(path, config_ini, st_out, 0, err, errlen);
}

int txl_ckpt_verify(const char *path, char *err, size_t errlen) {
  return peek(path, NULL, NULL, 1, err, errlen);
}

/* Opens `name` in loc and checks it is float32 with exactly `nd` dims `want`. */
static hid_t open_checked(CkptCtx *c, hid_t loc, const char *group, const char *name, int nd,
                          const hsize_t *want, const char *why) {
  char full[160];
  snprintf(full, sizeof full, "%s%s%s", group, group[0] ? "/" : "", name);
  htri_t ex = H5Lexists(loc, name, H5P_DEFAULT);
  if (ex <= 0) {
    if (ex < 0) ckpt_fail_h5(c, "cannot look up dataset '/%s'", full);
    else ckpt_fail(c, "not a valid txl checkpoint: dataset '/%s' is missing", full);
    return -1;
  }
  hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
  if (d < 0) {
    ckpt_fail_h5(c, "cannot open dataset '/%s'", full);
    return -1;
  }
  hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  hsize_t dims[8] = {0};
  int got = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);
  if (got > 0 && got <= 8) H5Sget_simple_extent_dims(s, dims, NULL);
  int same = got == nd;
  for (int i = 0; same && i < nd; i++) same = dims[i] == want[i];
  if (t < 0 || s < 0) {
    ckpt_fail_h5(c, "cannot read the type of dataset '/%s'", full);
  } else if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
    ckpt_fail(c, "dataset '/%s' is not float32", full);
  } else if (!same) {
    char a[128], w[128];
    if (got >= 0 && got <= 8) ckpt_shape_text(a, sizeof a, got, dims);
    else snprintf(a, sizeof a, "?");
    ckpt_shape_text(w, sizeof w, nd, want);
    ckpt_fail(c, "dataset '/%s' has shape %s, %s %s: the checkpoint is of another model", full, a,
         why, w);
  }
  if (t >= 0) H5Tclose(t);
  if (s >= 0) H5Sclose(s);
  if (!c->ok) {
    H5Dclose(d);
    return -1;
  }
  return d;
}

typedef struct {
  const TxlParamTable *t;
  char extra[64];
} ExtraFind;

static herr_t find_extra_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
  ExtraFind *x = data;
  for (int i = 0; i < x->t->n_tensors; i++)
    if (strcmp(x->t->tensors[i].name, name) == 0) return 0;
  snprintf(x->extra, sizeof x->extra, "%s", name);
  return 1;
}

/* Every tensor of the table in the group, with its shape, and nothing else. Metadata only. */
static void check_group(CkptCtx *c, hid_t file, const char *group, const TxlParamTable *t) {
  hid_t g = -1;
  htri_t ex = H5Lexists(file, group, H5P_DEFAULT);
  if (ex < 0) ckpt_fail_h5(c, "cannot look up group '/%s'", group);
  else if (ex == 0) ckpt_fail(c, "not a valid txl checkpoint: group '/%s' is missing", group);
  else if ((g = H5Gopen2(file, group, H5P_DEFAULT)) < 0) ckpt_fail_h5(c, "cannot open group '/%s'", group);
  ckpt_agree(c);
  for (int i = 0; i < t->n_tensors && c->ok; i++) {
    const TxlTensorInfo *ti = &t->tensors[i];
    hsize_t want[2] = {(hsize_t)ti->shape[0], (hsize_t)ti->shape[1]};
    hid_t d = open_checked(c, g, group, ti->name, ti->rank, want, "this model has");
    if (d >= 0) H5Dclose(d);
    ckpt_agree(c);
  }
  H5G_info_t info;
  if (c->ok && H5Gget_info(g, &info) < 0) ckpt_fail_h5(c, "cannot list group '/%s'", group);
  if (c->ok && info.nlinks != (hsize_t)t->n_tensors) {
    ExtraFind x = {t, ""};
    hsize_t idx = 0;
    H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, find_extra_cb, &x);
    ckpt_fail(c, "the checkpoint is of another model: '/%s' holds %llu tensors, this model has %d%s%s%s",
         group, (unsigned long long)info.nlinks, t->n_tensors, x.extra[0] ? " (no '" : "",
         x.extra, x.extra[0] ? "' here)" : "");
  }
  if (g >= 0) H5Gclose(g);
  ckpt_agree(c);
}

/* Reads one whole tensor (independent transfer: every rank reads all of it). */
static void read_tensor(CkptCtx *c, hid_t g, const char *group, const TxlTensorInfo *ti, float *dst,
                        hid_t dxpl) {
  hid_t d = H5Dopen2(g, ti->name, H5P_DEFAULT);
  if (d < 0) {
    ckpt_fail_h5(c, "cannot open dataset '/%s/%s'", group, ti->name);
    return;
  }
  hid_t msp = ckpt_tensor_memspace(ti); /* the file's values packed, dst's rows maybe padded */
  if (msp < 0) {
    ckpt_fail_h5(c, "selecting the rows of '/%s/%s' in memory", group, ti->name);
    H5Dclose(d);
    return;
  }
  hid_t fsp = msp == H5S_ALL ? H5S_ALL : H5Dget_space(d);
  if (fsp < 0 || H5Dread(d, H5T_NATIVE_FLOAT, msp, fsp, dxpl, dst) < 0) {
    CkptH5Trace t;
    ckpt_h5_trace(&t);
    if (t.checksum)
      ckpt_fail(c, "dataset '/%s/%s' is damaged: its checksum (Fletcher32) does not match", group,
           ti->name);
    else
      ckpt_fail_h5(c, "reading dataset '/%s/%s' failed", group, ti->name);
  }
  ckpt_close_memspace(fsp);
  ckpt_close_memspace(msp);
  H5Dclose(d);
}

/* ---- values a checkpoint must not hold ------------------------------------------------------
 * NaN or an infinity anywhere, and a negative Adam second moment (a mean of squares): a run
 * continued from such a file fails later with a NaN loss (or silently, for v), an evaluation
 * prints nan. The checksums cannot tell: the values were written so. */

/* The first of v[0..n) that is not finite, or negative with nonneg; -1 when none is. */
static int64_t first_bad_value(const float *v, int64_t n, int nonneg) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(v[i]) || (nonneg && v[i] < 0.0f)) return i;
  return -1;
}

/* "dataset '/adam_v/w' holds NaN at element 7: the checkpoint is unusable" */
static void bad_value_text(char *msg, size_t n, const char *dataset, float x, int64_t element) {
  char v[32];
  if (isnan(x)) snprintf(v, sizeof v, "NaN");
  else if (isinf(x)) snprintf(v, sizeof v, "%sInf", x < 0 ? "-" : "+");
  else snprintf(v, sizeof v, "%g", (double)x);
  snprintf(msg, n, "dataset '%s' holds %s at element %lld%s: the checkpoint is unusable", dataset, v,
           (long long)element, isfinite(x) ? ", a negative second moment" : "");
}

int txl_ckpt_check_values(const char *path, const char *dataset, const float *v, int64_t n,
                          int64_t first, char *err, size_t errlen) {
  const int64_t i = first_bad_value(v, n, strncmp(dataset, "/adam_v/", 8) == 0);
  if (i < 0) return 0;
  char text[512];
  bad_value_text(text, sizeof text, dataset, v[i], first + i);
  if (err && errlen) snprintf(err, errlen, "%s: %s", path, text);
  return -1;
}

/* The values of /group just read into buf (table offsets). */
static void check_group_values(CkptCtx *c, const char *group, const TxlParamTable *t, const float *buf) {
  if (!c->ok) return;
  int64_t index = 0;
  const TxlTensorInfo *bad = txl_param_first_nonfinite(t, buf, &index);
  if (!bad && strcmp(group, "adam_v") == 0)
    for (int i = 0; i < t->n_tensors && !bad; i++) { /* the tensor's runs: its values, not the padding */
      const TxlTensorInfo *ti = &t->tensors[i];
      const int64_t n = txl_tensor_runs(ti, NULL);
      int64_t *seg = txl_malloc((size_t)n * 2 * sizeof(int64_t), "tensor runs");
      txl_tensor_runs(ti, seg);
      for (int64_t k = 0, e = 0; k < n && !bad; e += seg[2 * k + 1], k++) {
        const int64_t at = first_bad_value(buf + seg[2 * k], seg[2 * k + 1], 1);
        if (at >= 0) {
          bad = ti;
          index = e + at;
        }
      }
      free(seg);
    }
  if (!bad) return;
  char dataset[160], text[512];
  snprintf(dataset, sizeof dataset, "/%s/%s", group, bad->name);
  bad_value_text(text, sizeof text, dataset, buf[bad->offset + txl_tensor_at(bad, index)], index);
  ckpt_fail(c, "%s", text);
}

/* The valid rows [0, mem_rows) of this rank's columns of /mems (the other rows hold whatever the
 * writer's buffer held). Elements are numbered in the dataset's order, all columns. */
static void check_mems_values(CkptCtx *c, const TxlCkptBuffers *b, int mem_rows) {
  for (int l = 0; l < b->n_layer && c->ok; l++)
    for (int r = 0; r < mem_rows && c->ok; r++)
      for (int col = 0; col < b->B_local && c->ok; col++) {
        const int64_t row = (int64_t)l * b->mem_len + r;
        const float *v = b->mems + (row * b->B_local + col) * b->d_model;
        const int64_t i = first_bad_value(v, b->d_model, 0);
        if (i >= 0) {
          char text[512];
          bad_value_text(text, sizeof text, "/mems", v[i], (row * b->B_global + b->col0 + col) * b->d_model + i);
          ckpt_fail(c, "%s", text);
        }
      }
}

/* Every tensor of table from /group into dst (table offsets), its values checked. collective */
static void read_group(CkptCtx *c, hid_t file, const char *group, const TxlParamTable *table, float *dst, hid_t dxpl) {
  hid_t grp = H5Gopen2(file, group, H5P_DEFAULT);
  if (grp < 0) ckpt_fail_h5(c, "cannot open group '/%s'", group);
  ckpt_agree(c);
  for (int i = 0; i < table->n_tensors && c->ok; i++) {
    const TxlTensorInfo *ti = &table->tensors[i];
    if (ti->numel > 0) read_tensor(c, grp, group, ti, dst + ti->offset, dxpl);
    ckpt_agree(c);
  }
  if (grp >= 0) H5Gclose(grp);
  check_group_values(c, group, table, dst);
  ckpt_agree(c);
}

/* Opens path and reads its root attributes, checking that the file holds a model of n_layer x
 * d_model with attn_type. Returns the file (-1 on failure, every rank agreeing). collective */
static hid_t open_model_file(CkptCtx *c, int n_layer, int d_model, int attn_type, TxlCkptState *st,
                             CkptGeometry *g) {
  hid_t file = ckpt_open_file(c);
  if (file < 0) return -1;
  ckpt_read_root_attrs(c, file, st, g, NULL);
  if (ckpt_agree(c) && (g->n_layer != n_layer || g->d_model != d_model))
    ckpt_fail(c, "the checkpoint is of another model: n_layer %lld, d_model %lld (this model: %d, %d)",
         (long long)g->n_layer, (long long)g->d_model, n_layer, d_model);
  else if (c->ok && g->attn_type != attn_type)
    ckpt_fail(c, "the checkpoint was written with model.attn_type = %s (%d in the original), this run has %s (%d) "
              "(another positional encoding: other parameters)", txl_attn_name(g->attn_type), g->attn_type,
              txl_attn_name(attn_type), attn_type);
  if (!ckpt_agree(c)) {
    ckpt_close_file(c, &file);
    return -1;
  }
  return file;
}

/* Transfer properties for reads each rank makes on its own (-1 after ckpt_fail). */
static hid_t independent_reads(CkptCtx *c) {
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0) ckpt_fail_h5(c, "transfer properties");
  return dxpl;
}

/* The end of a reader: closes what it opened, agrees, hands out the state when every rank read
 * it. collective */
static int end_read(CkptCtx *c, hid_t dxpl, hid_t file, const TxlCkptState *st, TxlCkptState *st_out, char *err,
                    size_t errlen) {
  if (dxpl >= 0) H5Pclose(dxpl);
  if (file >= 0) ckpt_close_file(c, &file);
  ckpt_agree(c);
  if (c->ok && st_out) *st_out = *st;
  return ckpt_ctx_end(c, err, errlen);
}

int txl_ckpt_read(const char *path, TxlCkptState *st_out, const TxlCkptBuffers *b, char *err,
                  size_t errlen) {
  CkptCtx c;
  ckpt_ctx_begin(&c, path);
  TxlCkptState st = {0};
  CkptGeometry g = {0};
  hid_t file = -1, dxpl = -1;
  ckpt_check_buffers(&c, b, 0, 0);
  if (!c.ok) goto out;
  file = open_model_file(&c, b->n_layer, b->d_model, b->table->attn_type, &st, &g);
  if (file < 0) goto out;
  if (g.batch_size != b->B_global)
    ckpt_fail(&c, "the checkpoint was written with batch_size %lld, this run has %d: the memory of "
         "each column cannot be carried over", (long long)g.batch_size, b->B_global);
  else if (g.mem_len != b->mem_len)
    ckpt_fail(&c, "the checkpoint was written with mem_len %lld, this run has %d", (long long)g.mem_len,
         b->mem_len);
  if (!ckpt_agree(&c)) goto out;

  /* shapes first: a wrong model fails before gigabytes are read */
  for (int k = 0; k < 3 && c.ok; k++) check_group(&c, file, CKPT_GROUPS[k], b->table);
  hsize_t mdims[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_global,
                      (hsize_t)b->d_model};
  if (c.ok) {
    hid_t d = open_checked(&c, file, "", "mems", 4, mdims, "this run has");
    if (d >= 0) H5Dclose(d);
  }
  if (!ckpt_agree(&c)) goto out;

  dxpl = independent_reads(&c);
  if (!ckpt_agree(&c)) goto out;
  float *dst[3] = {b->params, b->adam_m, b->adam_v};
  for (int k = 0; k < 3 && c.ok; k++) read_group(&c, file, CKPT_GROUPS[k], b->table, dst[k], dxpl);
  if (c.ok && b->mem_len > 0 && b->B_local > 0) {
    hid_t d = H5Dopen2(file, "mems", H5P_DEFAULT);
    hid_t fsp = d < 0 ? -1 : H5Dget_space(d);
    hsize_t start[4] = {0, 0, (hsize_t)b->col0, 0};
    hsize_t count[4] = {mdims[0], mdims[1], (hsize_t)b->B_local, mdims[3]};
    hid_t msp = H5Screate_simple(4, count, NULL);
    if (d < 0 || fsp < 0 || msp < 0 ||
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0) {
      ckpt_fail_h5(&c, "cannot open dataset '/mems'");
    } else if (H5Dread(d, H5T_NATIVE_FLOAT, msp, fsp, dxpl, b->mems) < 0) {
      CkptH5Trace t;
      ckpt_h5_trace(&t);
      if (t.checksum)
        ckpt_fail(&c, "dataset '/mems' is damaged: its checksum (Fletcher32) does not match");
      else
        ckpt_fail_h5(&c, "reading columns [%d, %d) of dataset '/mems' failed", b->col0,
                b->col0 + b->B_local);
    }
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    if (d >= 0) H5Dclose(d);
    check_mems_values(&c, b, st.mem_rows);
  }
  ckpt_agree(&c);

out:
  return end_read(&c, dxpl, file, &st, st_out, err, errlen);
}

int txl_ckpt_read_params(const char *path, const TxlParamTable *table, int n_layer, int d_model, float *params,
                         TxlCkptState *st_out, char *err, size_t errlen) {
  CkptCtx c;
  ckpt_ctx_begin(&c, path);
  TxlCkptState st = {0};
  CkptGeometry g = {0};
  hid_t file = -1, dxpl = -1;
  if (!table || !params) ckpt_fail(&c, "internal error: no parameter table or buffer");
  if (!ckpt_agree(&c)) goto out;
  file = open_model_file(&c, n_layer, d_model, table->attn_type, &st, &g);
  if (file < 0) goto out;
  check_group(&c, file, CKPT_GROUPS[0], table);
  if (!ckpt_agree(&c)) goto out;
  dxpl = independent_reads(&c);
  if (ckpt_agree(&c)) read_group(&c, file, CKPT_GROUPS[0], table, params, dxpl);
out:
  return end_read(&c, dxpl, file, &st, st_out, err, errlen);
}

int txl_ckpt_read_run_id(const char *path, char run_id[TXL_CKPT_ID_LEN], char *err, size_t errlen) {
  CkptCtx c;
  ckpt_ctx_begin(&c, path);
  run_id[0] = 0;
  /* A file with a digest carries its run id in the digest header: rotation, which asks this of
   * every checkpoint of the folder at every save, neither hashes them all nor lets HDF5 parse a
   * file nobody has verified. */
  int sealed = 0;
  char msg[CKPT_MSG_LEN];
  if (ckpt_digest_run_id(path, &sealed, run_id, msg, sizeof msg) != 0) ckpt_fail(&c, "%s", msg);
  if (!c.ok || sealed) return ckpt_ctx_end(&c, err, errlen);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
  if (fapl >= 0) H5Pset_file_locking(fapl, 0, 1); /* the run's ranks may hold it open */
#endif
  hid_t file = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (file < 0) ckpt_fail_h5(&c, "cannot open checkpoint");
  int64_t version = 0;
  char *v = NULL;
  if (ckpt_attr_read_num_local(&c, file, "format_version", H5T_INTEGER, H5T_NATIVE_INT64, &version) == 0 &&
      version >= 2 && ckpt_attr_read_string_local(&c, file, "run_id", &v) == 0)
    snprintf(run_id, TXL_CKPT_ID_LEN, "%s", v);
  free(v);
  if (file >= 0) H5Fclose(file);
  if (fapl >= 0) H5Pclose(fapl);
  return ckpt_ctx_end(&c, err, errlen);
}
/* ---------------------------------------------------------------------------------------------
 * The vocabulary a checkpoint was trained on
 * ------------------------------------------------------------------------------------------- */

int txl_ckpt_check_vocab(const char *path, const TxlCkptState *st, const char *corpus_path,
                         const char *corpus_digest, char *msg, size_t n) {
  if (!st->vocab_digest[0]) {
    snprintf(msg, n, "%s is a version %d checkpoint without a vocabulary digest: only the "
             "vocabulary size could be checked against %s", path, st->format_version, corpus_path);
    return 1;
  }
  if (strcmp(st->vocab_digest, corpus_digest) == 0) return 0;
  snprintf(msg, n, "%s was trained on another vocabulary than that of the corpus %s (vocabulary "
           "digest %.12s... in the checkpoint, %.12s... in the corpus): its token ids would mean "
           "other tokens", path, corpus_path, st->vocab_digest, corpus_digest);
  return -1;
}

