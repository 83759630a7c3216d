/* The checkpoint code's shared machinery (src/checkpoint/ckpt_internal.h): failure bookkeeping
 * and the ranks' agreement on it, the buffers' checks, HDF5 attribute helpers, opening a
 * checkpoint file on every rank. */
#include <ctype.h>
#include <errno.h>
#include <hdf5.h>
#include <mpi.h> /* MPI_COMM_WORLD for parallel HDF5's file access (no collective here) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Failure bookkeeping and agreement
 * ------------------------------------------------------------------------------------------- */

void ckpt_ctx_begin(CkptCtx *c, const char *path) {
  memset(c, 0, sizeof *c);
  c->path = path ? path : "(null)";
  c->ok = 1;
  c->rank = txl_dist_rank();
  c->world = txl_dist_world();
  H5Eget_auto2(H5E_DEFAULT, &c->h5_fn, &c->h5_data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  errno = 0;
}

int ckpt_ctx_end(CkptCtx *c, char *err, size_t errlen) {
  H5Eset_auto2(H5E_DEFAULT, c->h5_fn, c->h5_data);
  if (c->ok) return 0;
  if (err && errlen) snprintf(err, errlen, "%s", c->msg);
  return -1;
}

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  CkptH5Trace *t = data;
  const char *d = e->desc ? e->desc : "";
  if (n < 2 && d[0]) {
    snprintf(t->desc[t->n], sizeof t->desc[0], "%s", d);
    t->n++;
  }
  char low[256];
  size_t i = 0;
  for (; d[i] && i + 1 < sizeof low; i++) low[i] = (char)tolower((unsigned char)d[i]);
  low[i] = '\0';
  if (strstr(low, "checksum") || strstr(low, "fletcher")) t->checksum = 1;
  return 0;
}

void ckpt_h5_trace(CkptH5Trace *t) {
  memset(t, 0, sizeof *t);
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, t);
}

/* Records the first failure of this rank: "<path>: <what>". */
static void vfail(CkptCtx *c, int with_h5, const char *fmt, va_list ap) {
  if (!c->ok) return;
  c->ok = 0;
  char what[CKPT_MSG_LEN];
  vsnprintf(what, sizeof what, fmt, ap);
  int e = errno; /* the system's reason, when the failure was a write */
  if (with_h5 && (e == ENOSPC || e == EFBIG || e == EDQUOT || e == EIO || e == EROFS)) {
    size_t k = strlen(what);
    snprintf(what + k, sizeof what - k, ": %s", strerror(e));
  }
  CkptH5Trace t;
  if (with_h5) ckpt_h5_trace(&t);
  int w; /* a message longer than CKPT_MSG_LEN is cut */
  if (with_h5 && t.n == 2)
    w = snprintf(c->msg, sizeof c->msg, "%s: %.640s (HDF5: %.150s: %.150s)", c->path, what, t.desc[1], t.desc[0]);
  else if (with_h5 && t.n == 1)
    w = snprintf(c->msg, sizeof c->msg, "%s: %.640s (HDF5: %.300s)", c->path, what, t.desc[0]);
  else
    w = snprintf(c->msg, sizeof c->msg, "%s: %.1000s", c->path, what);
  (void)w;
  H5Eclear2(H5E_DEFAULT);
  errno = 0;
}

void ckpt_fail(CkptCtx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, 0, fmt, ap);
  va_end(ap);
}

/* The same, with HDF5's innermost messages appended. */
void ckpt_fail_h5(CkptCtx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, 1, fmt, ap);
  va_end(ap);
}

/* collective: returns 1 when no rank has failed; otherwise every rank gets the message of the
 * lowest failing rank, is marked failed, and 0 is returned. */
int ckpt_agree(CkptCtx *c) {
  const int first = txl_dist_min_i32_blocking(c->ok ? c->world : c->rank);
  if (first == c->world) return 1;
  txl_dist_bcast_blocking(c->msg, CKPT_MSG_LEN, first);
  c->msg[CKPT_MSG_LEN - 1] = '\0';
  c->ok = 0;
  return 0;
}

/* collective: 1 when `flag` is set on every rank. */
int ckpt_all_true(int flag) { return txl_dist_min_i32_blocking(flag ? 1 : 0); }

/* ---------------------------------------------------------------------------------------------
 * Buffers: local sanity and agreement between ranks
 * ------------------------------------------------------------------------------------------- */

void ckpt_shape_text(char *buf, size_t n, int nd, const hsize_t *d) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < nd && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Checks b on this rank, then that every rank describes the same model and memory and that the
 * ranks' columns tile [0, B_global) in rank order. collective */
void ckpt_check_buffers(CkptCtx *c, const TxlCkptBuffers *b, int need_mem_rows, int mem_rows) {
  int64_t mine[7] = {0};
  if (!b || !b->table || !b->params || !b->adam_m || !b->adam_v)
    ckpt_fail(c, "internal error: checkpoint buffers missing (table, params, adam_m or adam_v)");
  else if (b->n_layer < 1 || b->d_model < 1 || b->mem_len < 0 || b->B_global < 1 ||
           b->B_local < 0 || b->col0 < 0 || b->col0 + b->B_local > b->B_global)
    ckpt_fail(c, "internal error: bad checkpoint geometry (n_layer %d, d_model %d, mem_len %d, "
         "batch %d, columns [%d, %d))", b->n_layer, b->d_model, b->mem_len, b->B_global, b->col0,
         b->col0 + b->B_local);
  else if (b->mem_len > 0 && b->B_local > 0 && !b->mems)
    ckpt_fail(c, "internal error: no memory buffer although mem_len = %d", b->mem_len);
  else if (need_mem_rows && (mem_rows < 0 || mem_rows > b->mem_len))
    ckpt_fail(c, "internal error: mem_rows = %d outside [0, mem_len = %d]", mem_rows, b->mem_len);
  if (c->ok) {
    mine[0] = b->table->total;
    mine[1] = b->n_layer;
    mine[2] = b->mem_len;
    mine[3] = b->d_model;
    mine[4] = b->B_global;
    mine[5] = b->col0;
    mine[6] = b->B_local;
  }
  if (!ckpt_agree(c)) return;
  int64_t *all = txl_malloc(sizeof(int64_t) * 7 * (size_t)c->world, "checkpoint geometry");
  txl_dist_allgather_i64_blocking(mine, 7, all);
  int64_t next = 0;
  for (int r = 0; r < c->world && c->ok; r++) {
    const int64_t *g = all + 7 * r;
    if (memcmp(g, all, 5 * sizeof(int64_t)) != 0)
      ckpt_fail(c, "internal error: rank %d describes another model or memory than rank 0 "
           "(parameters %lld / %lld, n_layer %lld / %lld, mem_len %lld / %lld, d_model %lld / "
           "%lld, batch %lld / %lld)", r, (long long)g[0], (long long)all[0], (long long)g[1],
           (long long)all[1], (long long)g[2], (long long)all[2], (long long)g[3],
           (long long)all[3], (long long)g[4], (long long)all[4]);
    else if (g[5] != next)
      ckpt_fail(c, "internal error: the ranks' memory columns do not tile the batch: rank %d has "
           "columns [%lld, %lld), expected them to start at %lld", r, (long long)g[5],
           (long long)(g[5] + g[6]), (long long)next);
    next = g[5] + g[6];
  }
  if (c->ok && next != all[4])
    ckpt_fail(c, "internal error: the ranks' memory columns cover [0, %lld) of a batch of %lld",
         (long long)next, (long long)all[4]);
  free(all);
  ckpt_agree(c); /* every rank computed the same verdict; this only keeps the pattern uniform */
}

/* ---------------------------------------------------------------------------------------------
 * HDF5 helpers
 * ------------------------------------------------------------------------------------------- */

hid_t ckpt_make_fapl(void) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) return -1;
  /* Metadata is written collectively at flush/close; it is read independently by each rank
   * (ranks read different chunks of /mems, so their chunk-index lookups differ). */
  if (H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) < 0 ||
      H5Pset_coll_metadata_write(fapl, 1) < 0) {
    H5Pclose(fapl);
    return -1;
  }
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl, 0, 1); /* ranks of one job open the file together */
#endif
  return fapl;
}

/* Every rank writes the same value (attribute writes are collective). collective */
void ckpt_attr_write(CkptCtx *c, hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v) {
  if (c->ok) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, mtype, v) < 0) ckpt_fail_h5(c, "writing attribute '%s' failed", name);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
  }
  ckpt_agree(c);
}

void ckpt_attr_write_string(CkptCtx *c, hid_t obj, const char *name, const char *value) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0 || H5Tset_size(t, strlen(value) + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
    ckpt_fail_h5(c, "string type for attribute '%s'", name);
  ckpt_attr_write(c, obj, name, t, t, value);
  if (t >= 0) H5Tclose(t);
}

void ckpt_attr_i32(CkptCtx *c, hid_t o, const char *name, int64_t v) {
  int32_t x = (int32_t)v;
  ckpt_attr_write(c, o, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &x);
}
void ckpt_attr_i64(CkptCtx *c, hid_t o, const char *name, int64_t v) {
  ckpt_attr_write(c, o, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
void ckpt_attr_f64(CkptCtx *c, hid_t o, const char *name, double v) {
  ckpt_attr_write(c, o, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

/* An HDF5 type class as messages name it ("is a string, expected an integer"). */
static const char *class_text(H5T_class_t cls) {
  switch (cls) {
  case H5T_INTEGER: return "an integer";
  case H5T_FLOAT: return "a floating-point number";
  case H5T_STRING: return "a string";
  case H5T_COMPOUND: return "a compound";
  case H5T_ENUM: return "an enumeration";
  case H5T_ARRAY: return "an array";
  case H5T_VLEN: return "a variable-length sequence";
  case H5T_REFERENCE: return "a reference";
  case H5T_BITFIELD: return "a bit field";
  case H5T_OPAQUE: return "opaque data";
  default: return "of an unknown type";
  }
}

/* Fails unless the attribute's type t is of class `want` and its space s one value. */
static int check_attr_kind(CkptCtx *c, const char *name, hid_t t, hid_t s, H5T_class_t want) {
  H5T_class_t got = H5Tget_class(t);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  if (got != want)
    ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' is %s, expected %s", name,
         class_text(got), class_text(want));
  else if (n != 1)
    ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' holds %lld values, expected one", name,
         (long long)n);
  return c->ok ? 0 : -1;
}

/* A scalar attribute of class `cls` read as `mtype`. Returns 0, or -1 after ckpt_fail(). */
int ckpt_attr_read_num_local(CkptCtx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype,
                               void *v) {
  if (!c->ok) return -1;
  htri_t ex = H5Aexists(obj, name);
  if (ex < 0) {
    ckpt_fail_h5(c, "cannot read the root attributes");
    return -1;
  }
  if (ex == 0) {
    ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' is missing", name);
    return -1;
  }
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = a < 0 ? -1 : H5Aget_type(a);
  hid_t s = a < 0 ? -1 : H5Aget_space(a);
  if (a < 0 || t < 0 || s < 0)
    ckpt_fail_h5(c, "cannot read root attribute '%s'", name);
  else if (check_attr_kind(c, name, t, s, cls) == 0 && H5Aread(a, mtype, v) < 0)
    ckpt_fail_h5(c, "cannot read root attribute '%s'", name);
  int rc = c->ok ? 0 : -1;
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* A string attribute (fixed or variable length), malloc'd into *out. Returns 0 or -1. */
int ckpt_attr_read_string_local(CkptCtx *c, hid_t obj, const char *name, char **out) {
  *out = NULL;
  if (!c->ok) return -1;
  htri_t ex = H5Aexists(obj, name);
  if (ex <= 0) {
    if (ex < 0) ckpt_fail_h5(c, "cannot read the root attributes");
    else ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' is missing", name);
    return -1;
  }
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = a < 0 ? -1 : H5Aget_type(a);
  hid_t s = a < 0 ? -1 : H5Aget_space(a);
  if (a < 0 || t < 0 || s < 0) {
    ckpt_fail_h5(c, "cannot read root attribute '%s'", name);
  } else if (check_attr_kind(c, name, t, s, H5T_STRING) != 0) {
    /* the message is recorded */
  } else if (H5Tis_variable_str(t) > 0) {
    hid_t m = H5Tcopy(H5T_C_S1);
    char *v = NULL;
    if (m < 0 || H5Tset_size(m, H5T_VARIABLE) < 0 || H5Aread(a, m, &v) < 0 || !v) {
      ckpt_fail_h5(c, "cannot read root attribute '%s'", name);
    } else {
      *out = txl_malloc(strlen(v) + 1, "string attribute");
      strcpy(*out, v);
    }
    if (v) H5free_memory(v);
    if (m >= 0) H5Tclose(m);
  } else {
    size_t n = H5Tget_size(t);
    char *buf = txl_malloc(n + 1, "string attribute");
    hid_t m = H5Tcopy(H5T_C_S1);
    if (m < 0 || H5Tset_size(m, n + 1) < 0 || H5Tset_strpad(m, H5T_STR_NULLTERM) < 0 ||
        H5Aread(a, m, buf) < 0) {
      ckpt_fail_h5(c, "cannot read root attribute '%s'", name);
      free(buf);
    } else {
      buf[n] = '\0';
      *out = buf;
    }
    if (m >= 0) H5Tclose(m);
  }
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return *out ? 0 : -1;
}

/* The readers above followed by agreement, so that all ranks stop at the same attribute.
 * collective */
int ckpt_attr_read_num(CkptCtx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype, void *v) {
  ckpt_attr_read_num_local(c, obj, name, cls, mtype, v);
  return ckpt_agree(c) ? 0 : -1;
}

int ckpt_attr_read_string(CkptCtx *c, hid_t obj, const char *name, char **out) {
  ckpt_attr_read_string_local(c, obj, name, out);
  if (ckpt_agree(c)) return 0;
  free(*out);
  *out = NULL;
  return -1;
}


/* Opens `path` read-only on every rank. Checks the file first (a clearer message than HDF5's),
 * then its digest (ckpt_digest_verify).
 * Returns the file or -1 (after agreement: all ranks alike). collective */
hid_t ckpt_open_file(CkptCtx *c) {
  struct stat sb;
  if (stat(c->path, &sb) != 0)
    ckpt_fail(c, "cannot open checkpoint: %s", strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    ckpt_fail(c, "cannot open checkpoint: not a regular file");
  if (!ckpt_agree(c)) return -1;
  ckpt_digest_verify(c); /* before HDF5 parses a byte of it */
  if (!c->ok) return -1;
  hid_t fapl = ckpt_make_fapl();
  hid_t file = -1;
  if (fapl < 0) {
    ckpt_fail_h5(c, "file access properties for parallel HDF5");
  } else {
    file = H5Fopen(c->path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
      CkptH5Trace t;
      ckpt_h5_trace(&t);
      unsigned long long eof = 0, stored = 0;
      const char *tr = t.n ? strstr(t.desc[0], "truncated file: eof = ") : NULL;
      const char *se = t.n ? strstr(t.desc[0], "stored_eof = ") : NULL;
      int truncated = tr && se && sscanf(tr, "truncated file: eof = %llu", &eof) == 1 &&
                      sscanf(se, "stored_eof = %llu", &stored) == 1;
#if H5_VERSION_GE(1, 12, 0)
      htri_t is = H5Fis_accessible(c->path, H5P_DEFAULT);
#else
      htri_t is = H5Fis_hdf5(c->path);
#endif
      if (truncated)
        ckpt_fail(c, "the checkpoint is truncated: the file has %llu bytes, it should have %llu", eof,
             stored);
      else if (is == 0)
        ckpt_fail(c, "not a txl checkpoint (not an HDF5 file)");
      else
        ckpt_fail(c, "cannot open checkpoint: the HDF5 file is damaged (HDF5: %s)",
             t.n ? t.desc[0] : "unknown error");
    }
  }
  if (fapl >= 0) H5Pclose(fapl);
  int everyone = ckpt_all_true(file >= 0);
  ckpt_agree(c);
  if (!everyone && file >= 0) {
    /* opened here but not on some other rank: closing is collective, so leave it open */
    file = -1;
  }
  return c->ok ? file : -1;
}

void ckpt_close_file(CkptCtx *c, hid_t *file) {
  if (*file < 0) return;
  if (H5Fclose(*file) < 0) ckpt_fail_h5(c, "closing the file failed");
  *file = -1;
}

hid_t ckpt_tensor_memspace(const TxlTensorInfo *ti) {
  if (ti->rank != 2 || ti->ld == ti->shape[1]) return H5S_ALL;
  const hsize_t rows = (hsize_t)ti->shape[0], cols = (hsize_t)ti->shape[1], split = (hsize_t)ti->split;
  const hsize_t dims[2] = {rows, (hsize_t)ti->ld};
  const hsize_t start0[2] = {0, 0}, count0[2] = {rows, split};
  const hsize_t start1[2] = {0, (hsize_t)ti->split_at}, count1[2] = {rows, cols - split};
  hid_t msp = H5Screate_simple(2, dims, NULL);
  if (msp < 0) return -1;
  if (H5Sselect_hyperslab(msp, H5S_SELECT_SET, start0, NULL, count0, NULL) < 0 ||
      (split < cols && H5Sselect_hyperslab(msp, H5S_SELECT_OR, start1, NULL, count1, NULL) < 0)) {
    H5Sclose(msp);
    return -1;
  }
  return msp;
}

void ckpt_close_memspace(hid_t msp) {
  if (msp >= 0 && msp != H5S_ALL) H5Sclose(msp);
}
