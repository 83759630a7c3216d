/* Checkpoints in one HDF5 file, written and read by all ranks with parallel HDF5 (FORMAT.md).
 *
 * Failure agreement: each rank records its first failure in a Ctx; after every HDF5 call that
 * is collective or may fail (create, open, each dataset's create / write / read, flush, close)
 * the ranks agree (MPI_Allreduce of the lowest failing rank, then that rank's message is
 * broadcast), so every rank leaves at the same point with the same message and no rank is left
 * waiting in a collective that the others skipped. After a failure the ranks still close what
 * they opened, in the same order. */
#define _GNU_SOURCE /* fallocate */
#include "src/checkpoint/checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dist/dist.h"
#include "src/base/error.h"

/* Chunks of a parameter / moment dataset hold whole rows and at most this many bytes (one chunk
 * for every tensor up to this size). */
#define CHUNK_BYTES ((int64_t)4 << 20)
/* The config text is a root attribute: HDF5 keeps attributes in the object header (< 64 KiB). */
#define MAX_CONFIG_BYTES (60 * 1024)
#define MSG_LEN 1024

static const char *const GROUPS[3] = {"params", "adam_m", "adam_v"};

/* ---------------------------------------------------------------------------------------------
 * Failure bookkeeping and agreement
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  const char *path;    /* the file named in messages */
  int rank, world;
  int ok;              /* no failure seen on this rank (after agree: on any rank) */
  char msg[MSG_LEN];   /* "<path>: <problem>" */
  H5E_auto2_t h5_fn;   /* HDF5's error printing, restored at the end */
  void *h5_data;
} Ctx;

static void ctx_begin(Ctx *c, const char *path) {
  memset(c, 0, sizeof *c);
  c->path = path ? path : "(null)";
  c->ok = 1;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &c->world));
  H5Eget_auto2(H5E_DEFAULT, &c->h5_fn, &c->h5_data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  errno = 0;
}

static int ctx_end(Ctx *c, char *err, size_t errlen) {
  H5Eset_auto2(H5E_DEFAULT, c->h5_fn, c->h5_data);
  if (c->ok) return 0;
  if (err && errlen) snprintf(err, errlen, "%s", c->msg);
  return -1;
}

typedef struct {
  char desc[2][256]; /* the two innermost messages of the HDF5 error stack */
  int n;
  int checksum;      /* some message mentions a checksum (Fletcher32) */
} H5Trace;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
  H5Trace *t = data;
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

static void h5_trace(H5Trace *t) {
  memset(t, 0, sizeof *t);
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, t);
}

/* Records the first failure of this rank: "<path>: <what>". */
static void vfail(Ctx *c, int with_h5, const char *fmt, va_list ap) {
  if (!c->ok) return;
  c->ok = 0;
  char what[MSG_LEN];
  vsnprintf(what, sizeof what, fmt, ap);
  int e = errno; /* the system's reason, when the failure was a write */
  if (with_h5 && (e == ENOSPC || e == EFBIG || e == EDQUOT || e == EIO || e == EROFS)) {
    size_t k = strlen(what);
    snprintf(what + k, sizeof what - k, ": %s", strerror(e));
  }
  H5Trace t;
  if (with_h5) h5_trace(&t);
  int w; /* a message longer than MSG_LEN is cut */
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

static void fail(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, 0, fmt, ap);
  va_end(ap);
}

/* The same, with HDF5's innermost messages appended. */
static void fail_h5(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_h5(Ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(c, 1, fmt, ap);
  va_end(ap);
}

/* collective: returns 1 when no rank has failed; otherwise every rank gets the message of the
 * lowest failing rank, is marked failed, and 0 is returned. */
static int agree(Ctx *c) {
  int mine = c->ok ? c->world : c->rank, first = 0;
  MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  if (first == c->world) return 1;
  MPI_CHECK(MPI_Bcast(c->msg, MSG_LEN, MPI_CHAR, first, MPI_COMM_WORLD));
  c->msg[MSG_LEN - 1] = '\0';
  c->ok = 0;
  return 0;
}

/* collective: 1 when `flag` is set on every rank. */
static int all_true(int flag) {
  int v = flag ? 1 : 0, all = 0;
  MPI_CHECK(MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all;
}

/* ---------------------------------------------------------------------------------------------
 * Buffers: local sanity and agreement between ranks
 * ------------------------------------------------------------------------------------------- */

static void shape_text(char *buf, size_t n, int nd, const hsize_t *d) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < nd && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Checks b on this rank, then that every rank describes the same model and memory and that the
 * ranks' columns tile [0, B_global) in rank order. collective */
static void check_buffers(Ctx *c, const TxlCkptBuffers *b, int need_mem_rows, int mem_rows) {
  int64_t mine[7] = {0};
  if (!b || !b->table || !b->params || !b->adam_m || !b->adam_v)
    fail(c, "internal error: checkpoint buffers missing (table, params, adam_m or adam_v)");
  else if (b->n_layer < 1 || b->d_model < 1 || b->mem_len < 0 || b->B_global < 1 ||
           b->B_local < 0 || b->col0 < 0 || b->col0 + b->B_local > b->B_global)
    fail(c, "internal error: bad checkpoint geometry (n_layer %d, d_model %d, mem_len %d, "
         "batch %d, columns [%d, %d))", b->n_layer, b->d_model, b->mem_len, b->B_global, b->col0,
         b->col0 + b->B_local);
  else if (b->mem_len > 0 && b->B_local > 0 && !b->mems)
    fail(c, "internal error: no memory buffer although mem_len = %d", b->mem_len);
  else if (need_mem_rows && (mem_rows < 0 || mem_rows > b->mem_len))
    fail(c, "internal error: mem_rows = %d outside [0, mem_len = %d]", mem_rows, b->mem_len);
  if (c->ok) {
    mine[0] = b->table->total;
    mine[1] = b->n_layer;
    mine[2] = b->mem_len;
    mine[3] = b->d_model;
    mine[4] = b->B_global;
    mine[5] = b->col0;
    mine[6] = b->B_local;
  }
  if (!agree(c)) return;
  int64_t *all = txl_malloc(sizeof(int64_t) * 7 * (size_t)c->world, "checkpoint geometry");
  MPI_CHECK(MPI_Allgather(mine, 7, MPI_INT64_T, all, 7, MPI_INT64_T, MPI_COMM_WORLD));
  int64_t next = 0;
  for (int r = 0; r < c->world && c->ok; r++) {
    const int64_t *g = all + 7 * r;
    if (memcmp(g, all, 5 * sizeof(int64_t)) != 0)
      fail(c, "internal error: rank %d describes another model or memory than rank 0 "
           "(parameters %lld / %lld, n_layer %lld / %lld, mem_len %lld / %lld, d_model %lld / "
           "%lld, batch %lld / %lld)", r, (long long)g[0], (long long)all[0], (long long)g[1],
           (long long)all[1], (long long)g[2], (long long)all[2], (long long)g[3],
           (long long)all[3], (long long)g[4], (long long)all[4]);
    else if (g[5] != next)
      fail(c, "internal error: the ranks' memory columns do not tile the batch: rank %d has "
           "columns [%lld, %lld), expected them to start at %lld", r, (long long)g[5],
           (long long)(g[5] + g[6]), (long long)next);
    next = g[5] + g[6];
  }
  if (c->ok && next != all[4])
    fail(c, "internal error: the ranks' memory columns cover [0, %lld) of a batch of %lld",
         (long long)next, (long long)all[4]);
  free(all);
  agree(c); /* every rank computed the same verdict; this only keeps the pattern uniform */
}

/* ---------------------------------------------------------------------------------------------
 * HDF5 helpers
 * ------------------------------------------------------------------------------------------- */

static hid_t make_fapl(void) {
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
static void attr_write(Ctx *c, hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v) {
  if (c->ok) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, mtype, v) < 0) fail_h5(c, "writing attribute '%s' failed", name);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
  }
  agree(c);
}

static void attr_write_string(Ctx *c, hid_t obj, const char *name, const char *value) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0 || H5Tset_size(t, strlen(value) + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
    fail_h5(c, "string type for attribute '%s'", name);
  attr_write(c, obj, name, t, t, value);
  if (t >= 0) H5Tclose(t);
}

static void attr_i32(Ctx *c, hid_t o, const char *name, int64_t v) {
  int32_t x = (int32_t)v;
  attr_write(c, o, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &x);
}
static void attr_i64(Ctx *c, hid_t o, const char *name, int64_t v) {
  attr_write(c, o, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}
static void attr_f64(Ctx *c, hid_t o, const char *name, double v) {
  attr_write(c, o, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
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
static int check_attr_kind(Ctx *c, const char *name, hid_t t, hid_t s, H5T_class_t want) {
  H5T_class_t got = H5Tget_class(t);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  if (got != want)
    fail(c, "not a valid txl checkpoint: root attribute '%s' is %s, expected %s", name,
         class_text(got), class_text(want));
  else if (n != 1)
    fail(c, "not a valid txl checkpoint: root attribute '%s' holds %lld values, expected one", name,
         (long long)n);
  return c->ok ? 0 : -1;
}

/* A scalar attribute of class `cls` read as `mtype`. Returns 0, or -1 after fail(). */
static int attr_read_num_local(Ctx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype,
                               void *v) {
  if (!c->ok) return -1;
  htri_t ex = H5Aexists(obj, name);
  if (ex < 0) {
    fail_h5(c, "cannot read the root attributes");
    return -1;
  }
  if (ex == 0) {
    fail(c, "not a valid txl checkpoint: root attribute '%s' is missing", name);
    return -1;
  }
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = a < 0 ? -1 : H5Aget_type(a);
  hid_t s = a < 0 ? -1 : H5Aget_space(a);
  if (a < 0 || t < 0 || s < 0)
    fail_h5(c, "cannot read root attribute '%s'", name);
  else if (check_attr_kind(c, name, t, s, cls) == 0 && H5Aread(a, mtype, v) < 0)
    fail_h5(c, "cannot read root attribute '%s'", name);
  int rc = c->ok ? 0 : -1;
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  if (a >= 0) H5Aclose(a);
  return rc;
}

/* A string attribute (fixed or variable length), malloc'd into *out. Returns 0 or -1. */
static int attr_read_string_local(Ctx *c, hid_t obj, const char *name, char **out) {
  *out = NULL;
  if (!c->ok) return -1;
  htri_t ex = H5Aexists(obj, name);
  if (ex <= 0) {
    if (ex < 0) fail_h5(c, "cannot read the root attributes");
    else fail(c, "not a valid txl checkpoint: root attribute '%s' is missing", name);
    return -1;
  }
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  hid_t t = a < 0 ? -1 : H5Aget_type(a);
  hid_t s = a < 0 ? -1 : H5Aget_space(a);
  if (a < 0 || t < 0 || s < 0) {
    fail_h5(c, "cannot read root attribute '%s'", name);
  } else if (check_attr_kind(c, name, t, s, H5T_STRING) != 0) {
    /* the message is recorded */
  } else if (H5Tis_variable_str(t) > 0) {
    hid_t m = H5Tcopy(H5T_C_S1);
    char *v = NULL;
    if (m < 0 || H5Tset_size(m, H5T_VARIABLE) < 0 || H5Aread(a, m, &v) < 0 || !v) {
      fail_h5(c, "cannot read root attribute '%s'", name);
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
      fail_h5(c, "cannot read root attribute '%s'", name);
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
static int attr_read_num(Ctx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype, void *v) {
  attr_read_num_local(c, obj, name, cls, mtype, v);
  return agree(c) ? 0 : -1;
}

static int attr_read_string(Ctx *c, hid_t obj, const char *name, char **out) {
  attr_read_string_local(c, obj, name, out);
  if (agree(c)) return 0;
  free(*out);
  *out = NULL;
  return -1;
}

/* ---------------------------------------------------------------------------------------------
 * The root attributes
 * ------------------------------------------------------------------------------------------- */

/* Geometry recorded beside the state. */
typedef struct {
  int64_t batch_size, mem_len, n_layer, d_model;
} Geometry;

static void write_root_attrs(Ctx *c, hid_t file, const TxlCkptState *st, const Geometry *g,
                             const char *config) {
  attr_write_string(c, file, "format", TXL_CKPT_FORMAT);
  attr_i32(c, file, "format_version", TXL_CKPT_FORMAT_VERSION);
  attr_i64(c, file, "step", st->step);
  attr_i64(c, file, "tokens_seen", st->tokens_seen);
  attr_i64(c, file, "data_pos", st->data_pos);
  attr_i64(c, file, "epoch", st->epoch);
  attr_i64(c, file, "best_step", st->best_step);
  attr_i32(c, file, "mem_rows", st->mem_rows);
  attr_i32(c, file, "adam_t", st->adam_t);
  attr_i32(c, file, "world_size", c->world);
  attr_i32(c, file, "batch_size", g->batch_size);
  attr_i32(c, file, "mem_len", g->mem_len);
  attr_i32(c, file, "n_layer", g->n_layer);
  attr_i32(c, file, "d_model", g->d_model);
  uint32_t seed = st->seed;
  attr_write(c, file, "seed", H5T_STD_U32LE, H5T_NATIVE_UINT32, &seed);
  attr_f64(c, file, "best_valid_loss", st->best_valid_loss);
  attr_f64(c, file, "lr", st->lr);
  attr_write_string(c, file, "run_id", st->run_id);
  attr_write_string(c, file, "vocab_digest", st->vocab_digest);
  attr_write_string(c, file, "config", config);
}

/* A string attribute of at most TXL_CKPT_ID_LEN - 1 characters into out; version 1 files have
 * none ("" then). collective */
static void read_id_attr(Ctx *c, hid_t file, int64_t version, const char *name, char out[TXL_CKPT_ID_LEN]) {
  out[0] = 0;
  if (version < 2 || !c->ok) return;
  char *v = NULL;
  if (attr_read_string(c, file, name, &v) != 0) return;
  if (strlen(v) >= TXL_CKPT_ID_LEN)
    fail(c, "not a valid txl checkpoint: root attribute '%s' is longer than %d characters", name,
         TXL_CKPT_ID_LEN - 1);
  else
    snprintf(out, TXL_CKPT_ID_LEN, "%s", v);
  free(v);
  agree(c);
}

/* Reads and validates the root attributes (state, geometry, optionally the config). */
static void read_root_attrs(Ctx *c, hid_t file, TxlCkptState *st, Geometry *g, char **config) {
  char *format = NULL;
  if (config) *config = NULL;
  if (H5Aexists(file, "format") <= 0) fail(c, "not a txl checkpoint (no 'format' attribute)");
  if (!agree(c) || attr_read_string(c, file, "format", &format) < 0) return;
  if (strcmp(format, TXL_CKPT_FORMAT) != 0)
    fail(c, "not a txl checkpoint (format is '%.100s', expected '%s')", format, TXL_CKPT_FORMAT);
  free(format);
  int64_t version = 0;
  if (attr_read_num(c, file, "format_version", H5T_INTEGER, H5T_NATIVE_INT64, &version) == 0 &&
      (version < TXL_CKPT_OLDEST_VERSION || version > TXL_CKPT_FORMAT_VERSION))
    fail(c, "checkpoint format version %lld is not supported (this build reads versions %d to %d)",
         (long long)version, TXL_CKPT_OLDEST_VERSION, TXL_CKPT_FORMAT_VERSION);
  memset(st, 0, sizeof *st);
  st->format_version = (int)version;
  int64_t i32[4] = {0}, seed = 0;
  attr_read_num(c, file, "step", H5T_INTEGER, H5T_NATIVE_INT64, &st->step);
  attr_read_num(c, file, "tokens_seen", H5T_INTEGER, H5T_NATIVE_INT64, &st->tokens_seen);
  attr_read_num(c, file, "data_pos", H5T_INTEGER, H5T_NATIVE_INT64, &st->data_pos);
  attr_read_num(c, file, "epoch", H5T_INTEGER, H5T_NATIVE_INT64, &st->epoch);
  attr_read_num(c, file, "best_step", H5T_INTEGER, H5T_NATIVE_INT64, &st->best_step);
  attr_read_num(c, file, "mem_rows", H5T_INTEGER, H5T_NATIVE_INT64, &i32[0]);
  attr_read_num(c, file, "adam_t", H5T_INTEGER, H5T_NATIVE_INT64, &i32[1]);
  attr_read_num(c, file, "world_size", H5T_INTEGER, H5T_NATIVE_INT64, &i32[2]);
  attr_read_num(c, file, "batch_size", H5T_INTEGER, H5T_NATIVE_INT64, &g->batch_size);
  attr_read_num(c, file, "mem_len", H5T_INTEGER, H5T_NATIVE_INT64, &g->mem_len);
  attr_read_num(c, file, "n_layer", H5T_INTEGER, H5T_NATIVE_INT64, &g->n_layer);
  attr_read_num(c, file, "d_model", H5T_INTEGER, H5T_NATIVE_INT64, &g->d_model);
  attr_read_num(c, file, "seed", H5T_INTEGER, H5T_NATIVE_INT64, &seed);
  attr_read_num(c, file, "best_valid_loss", H5T_FLOAT, H5T_NATIVE_DOUBLE, &st->best_valid_loss);
  attr_read_num(c, file, "lr", H5T_FLOAT, H5T_NATIVE_DOUBLE, &st->lr);
  if (!c->ok) return;
  const int64_t big = INT32_MAX;
  if (st->step < 0 || st->tokens_seen < 0 || st->data_pos < 0 || st->epoch < 0)
    fail(c, "not a valid txl checkpoint: step, tokens_seen, data_pos and epoch must be >= 0");
  else if (g->n_layer < 1 || g->n_layer > big || g->d_model < 1 || g->d_model > big ||
           g->batch_size < 1 || g->batch_size > big || g->mem_len < 0 || g->mem_len > big)
    fail(c, "not a valid txl checkpoint: n_layer %lld, d_model %lld, batch_size %lld, mem_len %lld",
         (long long)g->n_layer, (long long)g->d_model, (long long)g->batch_size,
         (long long)g->mem_len);
  else if (i32[0] < 0 || i32[0] > g->mem_len)
    fail(c, "not a valid txl checkpoint: mem_rows %lld outside [0, mem_len = %lld]",
         (long long)i32[0], (long long)g->mem_len);
  else if (i32[1] < 0 || i32[1] > big || i32[2] < 1 || i32[2] > big)
    fail(c, "not a valid txl checkpoint: adam_t %lld, world_size %lld", (long long)i32[1],
         (long long)i32[2]);
  else if (seed < 0 || seed > (int64_t)UINT32_MAX)
    fail(c, "not a valid txl checkpoint: seed %lld is not a 32-bit unsigned value", (long long)seed);
  if (!c->ok) return;
  st->mem_rows = (int)i32[0];
  st->adam_t = (int)i32[1];
  st->world_size = (int)i32[2];
  st->seed = (uint32_t)seed;
  read_id_attr(c, file, version, "run_id", st->run_id);
  read_id_attr(c, file, version, "vocab_digest", st->vocab_digest);
  if (!c->ok) return;
  /* read on every rank whatever the caller asked for: the calls stay the same everywhere */
  char *text = NULL;
  if (agree(c) && attr_read_string(c, file, "config", &text) == 0 && config) *config = text;
  else free(text);
}

/* Opens `path` read-only on every rank. Checks the file first (a clearer message than HDF5's).
 * Returns the file or -1 (after agreement: all ranks alike). collective */
static hid_t open_file(Ctx *c) {
  struct stat sb;
  if (stat(c->path, &sb) != 0)
    fail(c, "cannot open checkpoint: %s", strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    fail(c, "cannot open checkpoint: not a regular file");
  if (!agree(c)) return -1;
  hid_t fapl = make_fapl();
  hid_t file = -1;
  if (fapl < 0) {
    fail_h5(c, "file access properties for parallel HDF5");
  } else {
    file = H5Fopen(c->path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
      H5Trace t;
      h5_trace(&t);
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
        fail(c, "the checkpoint is truncated: the file has %llu bytes, it should have %llu", eof,
             stored);
      else if (is == 0)
        fail(c, "not a txl checkpoint (not an HDF5 file)");
      else
        fail(c, "cannot open checkpoint: the HDF5 file is damaged (HDF5: %s)",
             t.n ? t.desc[0] : "unknown error");
    }
  }
  if (fapl >= 0) H5Pclose(fapl);
  int everyone = all_true(file >= 0);
  agree(c);
  if (!everyone && file >= 0) {
    /* opened here but not on some other rank: closing is collective, so leave it open */
    file = -1;
  }
  return c->ok ? file : -1;
}

static void close_file(Ctx *c, hid_t *file) {
  if (*file < 0) return;
  if (H5Fclose(*file) < 0) fail_h5(c, "closing the file failed");
  *file = -1;
}

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------- */

/* Creates a float32 dataset `name` in loc and writes this rank's part collectively: the file
 * selection is the box [start, start + count) (count NULL: this rank writes nothing), the
 * memory holds that box densely at buf. chunk NULL: contiguous without filter (empty
 * datasets). collective */
static void write_dataset(Ctx *c, hid_t loc, const char *group, const char *name, int nd,
                          const hsize_t *dims, const hsize_t *chunk, const hsize_t *start,
                          const hsize_t *count, const float *buf, hid_t dxpl) {
  const char *sep = group[0] ? "/" : "";
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hid_t fsp = H5Screate_simple(nd, dims, NULL);
  if (dcpl < 0 || fsp < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
      (chunk && (H5Pset_chunk(dcpl, nd, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0)))
    fail_h5(c, "dataset properties of '/%s%s%s'", group, sep, name);
  hid_t d = -1;
  if (agree(c)) {
    d = H5Dcreate2(loc, name, H5T_IEEE_F32LE, fsp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) fail_h5(c, "creating dataset '/%s%s%s' failed", group, sep, name);
  }
  int created = all_true(d >= 0);
  if (agree(c) && chunk) {
    hid_t msp = -1;
    if (count) {
      msp = H5Screate_simple(nd, count, NULL);
      if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        fail_h5(c, "selecting the part of '/%s%s%s' to write", group, sep, name);
    } else {
      hsize_t one = 1;
      msp = H5Screate_simple(1, &one, NULL);
      if (msp < 0 || H5Sselect_none(msp) < 0 || H5Sselect_none(fsp) < 0)
        fail_h5(c, "selecting nothing of '/%s%s%s'", group, sep, name);
    }
    /* a failed selection must not leave the others in the collective write */
    if (agree(c) && H5Dwrite(d, H5T_NATIVE_FLOAT, msp, fsp, dxpl, buf) < 0)
      fail_h5(c, "writing dataset '/%s%s%s' to %s.tmp failed", group, sep, name, c->path);
    if (msp >= 0) H5Sclose(msp);
  }
  if (d >= 0 && created && H5Dclose(d) < 0)
    fail_h5(c, "closing dataset '/%s%s%s' failed", group, sep, name);
  if (fsp >= 0) H5Sclose(fsp);
  if (dcpl >= 0) H5Pclose(dcpl);
  agree(c);
}

/* Whole rows, at most CHUNK_BYTES, the rows spread evenly over the chunks: a filtered edge chunk
 * is stored at full size, so a nearly empty last chunk would waste most of a chunk. */
static void tensor_chunk(const TxlTensorInfo *ti, hsize_t chunk[2]) {
  int64_t row = ti->rank == 2 ? ti->shape[1] : 1;
  int64_t rows = ti->shape[0];
  int64_t fit = CHUNK_BYTES / (row * (int64_t)sizeof(float));
  if (fit < 1) fit = 1;
  int64_t n_chunks = (rows + fit - 1) / fit;
  chunk[0] = (hsize_t)((rows + n_chunks - 1) / n_chunks);
  chunk[1] = (hsize_t)row;
}

/* One group of tensors (parameters or a moment); rank 0 writes the data. collective */
static void write_group(Ctx *c, hid_t file, const char *group, const TxlParamTable *t,
                        const float *base, hid_t dxpl) {
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  hid_t g = -1;
  if (gcpl < 0 || H5Pset_obj_track_times(gcpl, 0) < 0 ||
      (g = H5Gcreate2(file, group, H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0)
    fail_h5(c, "creating group '/%s' failed", group);
  if (gcpl >= 0) H5Pclose(gcpl);
  int created = all_true(g >= 0);
  for (int i = 0; i < t->n_tensors && agree(c); i++) {
    const TxlTensorInfo *ti = &t->tensors[i];
    hsize_t dims[2] = {(hsize_t)ti->shape[0], (hsize_t)ti->shape[1]}, chunk[2], start[2] = {0, 0};
    tensor_chunk(ti, chunk);
    int empty = ti->numel == 0;
    write_dataset(c, g, group, ti->name, ti->rank, dims, empty ? NULL : chunk, start,
                  c->rank == 0 ? dims : NULL, base + ti->offset, dxpl);
  }
  if (g >= 0 && created && H5Gclose(g) < 0) fail_h5(c, "closing group '/%s' failed", group);
  agree(c);
}

static void sync_folder_of(const char *path) {
  char *dir = txl_malloc(strlen(path) + 2, "folder name");
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  if (!slash) strcpy(dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd); /* not every file system syncs folders: best effort */
    close(fd);
  }
  free(dir);
}

/* An upper bound of the file's size: every chunk with its checksum, plus generous room for the
 * metadata (object headers, chunk indexes, attributes). */
static int64_t estimate_bytes(const TxlCkptBuffers *b, size_t config_len) {
  int64_t est = ((int64_t)1 << 20) + 2 * (int64_t)config_len;
  for (int i = 0; i < b->table->n_tensors; i++) {
    const TxlTensorInfo *ti = &b->table->tensors[i];
    hsize_t chunk[2];
    tensor_chunk(ti, chunk);
    int64_t chunk_bytes = (int64_t)(chunk[0] * chunk[1]) * 4;
    int64_t n_chunks = (ti->shape[0] + (int64_t)chunk[0] - 1) / (int64_t)chunk[0];
    est += 3 * (n_chunks * (chunk_bytes + 4) + 8192);
  }
  est += (int64_t)b->n_layer * b->B_global * ((int64_t)b->mem_len * b->d_model * 4 + 4) + 8192;
  est += (int64_t)b->n_layer * b->B_global * 64; /* chunk index entries of /mems */
  return est;
}

/* Reserves the file's space before HDF5 creates the file, so that a full disk or a file-size
 * limit shows here, before HDF5 has written a byte, and never as a failed write inside HDF5:
 * HDF5 1.10 cannot close a file whose metadata flush fails (H5Fclose fails, the file ID stays
 * behind and MPI_Finalize crashes on it; with several ranks one waits in MPI_File_close's barrier
 * and another in the metadata cache's, for ever). Even a file that only H5Fcreate has touched
 * needs its superblock written at close, so the space must be held before H5Fcreate, not after.
 * Every rank checks its file-size limit; rank 0 creates (or empties) the temporary and allocates
 * `est` bytes to it past its end (FALLOC_FL_KEEP_SIZE): its size stays 0, H5Fcreate truncates
 * only a non-empty file, so the blocks stay reserved and every write of HDF5 lands in them.
 * Where the file system cannot allocate (fallocate unsupported) the free space is compared
 * instead. Returns 1 on rank 0 when it created the temporary (to remove on failure). */
static int reserve_space(Ctx *c, const char *tmp, int64_t est) {
  int err = 0, created = 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (int64_t)rl.rlim_cur < est)
    err = EFBIG;
  if (!err && c->rank == 0) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      err = errno;
    } else {
      created = 1;
      if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)est) != 0) err = errno;
      if (err == EOPNOTSUPP || err == ENOSYS) {
        struct statvfs vs;
        err = 0;
        if (fstatvfs(fd, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < est) err = ENOSPC;
      }
      if (close(fd) != 0 && !err) err = errno;
    }
  }
  if (err)
    fail(c, "no room for the checkpoint: reserving %.1f MB for %s failed: %s", (double)est / 1e6,
         tmp, strerror(err));
  return created;
}

/* Gives the reserved blocks past the file's end back (HDF5 has set the file's size when it
 * closed it). Rank 0; best effort: a file system that cannot punch keeps them until the file
 * is removed. */
static void release_reserve(const char *tmp, int64_t est) {
  int fd = open(tmp, O_WRONLY);
  if (fd < 0) return;
  struct stat sb;
  if (fstat(fd, &sb) == 0 && sb.st_size < est) {
    /* to the end of the block holding the reservation's last byte: a hole frees whole blocks */
    const int64_t blk = sb.st_blksize > 0 ? (int64_t)sb.st_blksize : 4096;
    const int64_t end = (est + blk - 1) / blk * blk;
    (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, sb.st_size, end - sb.st_size);
  }
  close(fd);
}

int txl_ckpt_write(const char *path, const char *config_ini, const TxlCkptState *st_in,
                   const TxlCkptBuffers *b, char *err, size_t errlen) {
  Ctx c;
  ctx_begin(&c, path);
  char *tmp = NULL;
  hid_t file = -1, dxpl = -1;
  int created_tmp = 0, file_everywhere = 0;
  int64_t est = 0; /* bytes reserved for the file */

  /* rank 0's state and config are what the file records (they should be equal everywhere) */
  TxlCkptState st;
  memset(&st, 0, sizeof st);
  if (st_in) st = *st_in;
  else fail(&c, "internal error: no checkpoint state");
  int64_t i64[8] = {st.step, st.tokens_seen, st.data_pos, st.epoch, st.best_step, st.mem_rows,
                     st.adam_t, st.seed};
  double dbl[2] = {st.best_valid_loss, st.lr};
  MPI_CHECK(MPI_Bcast(i64, 8, MPI_INT64_T, 0, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Bcast(dbl, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  st.step = i64[0];
  st.tokens_seen = i64[1];
  st.data_pos = i64[2];
  st.epoch = i64[3];
  st.best_step = i64[4];
  st.mem_rows = (int)i64[5];
  st.adam_t = (int)i64[6];
  st.seed = (uint32_t)i64[7];
  st.best_valid_loss = dbl[0];
  st.lr = dbl[1];
  st.run_id[TXL_CKPT_ID_LEN - 1] = st.vocab_digest[TXL_CKPT_ID_LEN - 1] = 0;
  MPI_CHECK(MPI_Bcast(st.run_id, TXL_CKPT_ID_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Bcast(st.vocab_digest, TXL_CKPT_ID_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (!config_ini) config_ini = "";
  int clen = (int)(strlen(config_ini) < (size_t)INT32_MAX ? strlen(config_ini) : INT32_MAX);
  MPI_CHECK(MPI_Bcast(&clen, 1, MPI_INT, 0, MPI_COMM_WORLD));
  if (clen >= MAX_CONFIG_BYTES) {
    fail(&c, "the configuration text is %d bytes, more than a checkpoint holds (%d)", clen,
         MAX_CONFIG_BYTES);
    agree(&c);
    return ctx_end(&c, err, errlen);
  }
  char *config = txl_malloc((size_t)clen + 1, "checkpoint config");
  if (c.rank == 0) memcpy(config, config_ini, (size_t)clen);
  config[clen] = '\0';
  MPI_CHECK(MPI_Bcast(config, clen, MPI_CHAR, 0, MPI_COMM_WORLD));

  if (st.step < 0 || st.tokens_seen < 0 || st.data_pos < 0 || st.epoch < 0 || st.adam_t < 0)
    fail(&c, "internal error: negative counters in the checkpoint state (step %lld, tokens_seen "
         "%lld, data_pos %lld, epoch %lld, adam_t %d)", (long long)st.step,
         (long long)st.tokens_seen, (long long)st.data_pos, (long long)st.epoch, st.adam_t);
  check_buffers(&c, b, 1, st.mem_rows);
  if (!agree(&c)) goto out;

  tmp = txl_malloc(strlen(path) + 5, "temporary name");
  sprintf(tmp, "%s.tmp", path);

  /* the space first, then <path>.tmp as an HDF5 file (see reserve_space) */
  est = estimate_bytes(b, (size_t)clen);
  created_tmp = reserve_space(&c, tmp, est);
  if (!agree(&c)) goto out;
  hid_t fapl = make_fapl();
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  /* The 1.10 file format: every piece of metadata (superblock, object headers with the root
   * attributes, chunk indexes) carries a checksum that HDF5 verifies before it decodes it, as
   * Fletcher32 does for the tensors; a damaged byte is then an error, not a crash in HDF5. */
  if (fapl < 0 || fcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
      H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0) {
    fail_h5(&c, "file properties for parallel HDF5");
  } else {
    file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (file < 0) fail_h5(&c, "cannot create %s", tmp);
  }
  if (fcpl >= 0) H5Pclose(fcpl);
  if (fapl >= 0) H5Pclose(fapl);
  file_everywhere = all_true(file >= 0);
  if (!agree(&c)) goto out;

  dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
    fail_h5(&c, "transfer properties for collective writes");
  if (!agree(&c)) goto out;

  Geometry g = {b->B_global, b->mem_len, b->n_layer, b->d_model};
  write_root_attrs(&c, file, &st, &g, config);
  if (!agree(&c)) goto out;

  write_group(&c, file, GROUPS[0], b->table, b->params, dxpl);
  if (!c.ok) goto out;
  const char *fault = getenv("TXL_CKPT_FAULT");
  if (fault && strcmp(fault, "after_params") == 0) {
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    if (c.rank == 0) {
      fprintf(stderr, "txl: TXL_CKPT_FAULT=after_params: aborting while writing %s\n", tmp);
      fflush(stderr);
    }
    abort();
  }
  write_group(&c, file, GROUPS[1], b->table, b->adam_m, dxpl);
  if (!c.ok) goto out;
  write_group(&c, file, GROUPS[2], b->table, b->adam_v, dxpl);
  if (!c.ok) goto out;

  /* /mems [n_layer, mem_len, B_global, d_model]: this rank's columns */
  {
    hsize_t dims[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_global,
                       (hsize_t)b->d_model};
    hsize_t chunk[4] = {1, (hsize_t)b->mem_len, 1, (hsize_t)b->d_model};
    hsize_t start[4] = {0, 0, (hsize_t)b->col0, 0};
    hsize_t count[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_local,
                        (hsize_t)b->d_model};
    int empty = b->mem_len == 0;
    write_dataset(&c, file, "", "mems", 4, dims, empty ? NULL : chunk, start,
                  b->B_local > 0 ? count : NULL, b->mems, dxpl);
    if (!c.ok) goto out;
  }

  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) fail_h5(&c, "flushing %s failed", tmp);
  agree(&c);

out:
  if (dxpl >= 0) H5Pclose(dxpl);
  if (file >= 0 && file_everywhere) close_file(&c, &file);
  agree(&c);
  if (c.ok && c.rank == 0) {
    release_reserve(tmp, est);
    if (rename(tmp, path) != 0)
      fail(&c, "renaming %s to %s failed: %s", tmp, path, strerror(errno));
    else
      sync_folder_of(path);
  }
  agree(&c);
  if (!c.ok && created_tmp && tmp) unlink(tmp);
  free(tmp);
  free(config);
  return ctx_end(&c, err, errlen);
}

/* ---------------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------------- */

int txl_ckpt_peek(const char *path, char **config_ini, TxlCkptState *st_out, char *err,
                  size_t errlen) {
  Ctx c;
  ctx_begin(&c, path);
  char *config = NULL;
  TxlCkptState st;
  Geometry g;
  memset(&g, 0, sizeof g);
  hid_t file = open_file(&c);
  if (file >= 0) {
    read_root_attrs(&c, file, &st, &g, config_ini ? &config : NULL);
    agree(&c);
    close_file(&c, &file);
    agree(&c);
  }
  if (c.ok) {
    if (config_ini) *config_ini = config;
    else free(config);
    if (st_out) *st_out = st;
  } else {
    free(config);
  }
  return ctx_end(&c, err, errlen);
}

/* Opens `name` in loc and checks it is float32 with exactly `nd` dims `want`. */
static hid_t open_checked(Ctx *c, hid_t loc, const char *group, const char *name, int nd,
                          const hsize_t *want, const char *why) {
  char full[160];
  snprintf(full, sizeof full, "%s%s%s", group, group[0] ? "/" : "", name);
  htri_t ex = H5Lexists(loc, name, H5P_DEFAULT);
  if (ex <= 0) {
    if (ex < 0) fail_h5(c, "cannot look up dataset '/%s'", full);
    else fail(c, "not a valid txl checkpoint: dataset '/%s' is missing", full);
    return -1;
  }
  hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
  if (d < 0) {
    fail_h5(c, "cannot open dataset '/%s'", full);
    return -1;
  }
  hid_t t = H5Dget_type(d), s = H5Dget_space(d);
  hsize_t dims[8] = {0};
  int got = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);
  if (got > 0 && got <= 8) H5Sget_simple_extent_dims(s, dims, NULL);
  int same = got == nd;
  for (int i = 0; same && i < nd; i++) same = dims[i] == want[i];
  if (t < 0 || s < 0) {
    fail_h5(c, "cannot read the type of dataset '/%s'", full);
  } else if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
    fail(c, "dataset '/%s' is not float32", full);
  } else if (!same) {
    char a[128], w[128];
    if (got >= 0 && got <= 8) shape_text(a, sizeof a, got, dims);
    else snprintf(a, sizeof a, "?");
    shape_text(w, sizeof w, nd, want);
    fail(c, "dataset '/%s' has shape %s, %s %s: the checkpoint is of another model", full, a,
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
static void check_group(Ctx *c, hid_t file, const char *group, const TxlParamTable *t) {
  hid_t g = -1;
  htri_t ex = H5Lexists(file, group, H5P_DEFAULT);
  if (ex < 0) fail_h5(c, "cannot look up group '/%s'", group);
  else if (ex == 0) fail(c, "not a valid txl checkpoint: group '/%s' is missing", group);
  else if ((g = H5Gopen2(file, group, H5P_DEFAULT)) < 0) fail_h5(c, "cannot open group '/%s'", group);
  agree(c);
  for (int i = 0; i < t->n_tensors && c->ok; i++) {
    const TxlTensorInfo *ti = &t->tensors[i];
    hsize_t want[2] = {(hsize_t)ti->shape[0], (hsize_t)ti->shape[1]};
    hid_t d = open_checked(c, g, group, ti->name, ti->rank, want, "this model has");
    if (d >= 0) H5Dclose(d);
    agree(c);
  }
  H5G_info_t info;
  if (c->ok && H5Gget_info(g, &info) < 0) fail_h5(c, "cannot list group '/%s'", group);
  if (c->ok && info.nlinks != (hsize_t)t->n_tensors) {
    ExtraFind x = {t, ""};
    hsize_t idx = 0;
    H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, find_extra_cb, &x);
    fail(c, "the checkpoint is of another model: '/%s' holds %llu tensors, this model has %d%s%s%s",
         group, (unsigned long long)info.nlinks, t->n_tensors, x.extra[0] ? " (no '" : "",
         x.extra, x.extra[0] ? "' here)" : "");
  }
  if (g >= 0) H5Gclose(g);
  agree(c);
}

/* Reads one whole tensor (independent transfer: every rank reads all of it). */
static void read_tensor(Ctx *c, hid_t g, const char *group, const TxlTensorInfo *ti, float *dst,
                        hid_t dxpl) {
  hid_t d = H5Dopen2(g, ti->name, H5P_DEFAULT);
  if (d < 0) {
    fail_h5(c, "cannot open dataset '/%s/%s'", group, ti->name);
    return;
  }
  if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, dst) < 0) {
    H5Trace t;
    h5_trace(&t);
    if (t.checksum)
      fail(c, "dataset '/%s/%s' is damaged: its checksum (Fletcher32) does not match", group,
           ti->name);
    else
      fail_h5(c, "reading dataset '/%s/%s' failed", group, ti->name);
  }
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
static void check_group_values(Ctx *c, const char *group, const TxlParamTable *t, const float *buf) {
  if (!c->ok) return;
  int64_t index = 0;
  const TxlTensorInfo *bad = txl_param_first_nonfinite(t, buf, &index);
  if (!bad && strcmp(group, "adam_v") == 0)
    for (int i = 0; i < t->n_tensors && !bad; i++) {
      index = first_bad_value(buf + t->tensors[i].offset, t->tensors[i].numel, 1);
      if (index >= 0) bad = &t->tensors[i];
    }
  if (!bad) return;
  char dataset[160], text[512];
  snprintf(dataset, sizeof dataset, "/%s/%s", group, bad->name);
  bad_value_text(text, sizeof text, dataset, buf[bad->offset + index], index);
  fail(c, "%s", text);
}

/* The valid rows [0, mem_rows) of this rank's columns of /mems (the other rows hold whatever the
 * writer's buffer held). Elements are numbered in the dataset's order, all columns. */
static void check_mems_values(Ctx *c, const TxlCkptBuffers *b, int mem_rows) {
  for (int l = 0; l < b->n_layer && c->ok; l++)
    for (int r = 0; r < mem_rows && c->ok; r++)
      for (int col = 0; col < b->B_local && c->ok; col++) {
        const int64_t row = (int64_t)l * b->mem_len + r;
        const float *v = b->mems + (row * b->B_local + col) * b->d_model;
        const int64_t i = first_bad_value(v, b->d_model, 0);
        if (i >= 0) {
          char text[512];
          bad_value_text(text, sizeof text, "/mems", v[i], (row * b->B_global + b->col0 + col) * b->d_model + i);
          fail(c, "%s", text);
        }
      }
}

/* Every tensor of table from /group into dst (table offsets), its values checked. collective */
static void read_group(Ctx *c, hid_t file, const char *group, const TxlParamTable *table, float *dst, hid_t dxpl) {
  hid_t grp = H5Gopen2(file, group, H5P_DEFAULT);
  if (grp < 0) fail_h5(c, "cannot open group '/%s'", group);
  agree(c);
  for (int i = 0; i < table->n_tensors && c->ok; i++) {
    const TxlTensorInfo *ti = &table->tensors[i];
    if (ti->numel > 0) read_tensor(c, grp, group, ti, dst + ti->offset, dxpl);
    agree(c);
  }
  if (grp >= 0) H5Gclose(grp);
  check_group_values(c, group, table, dst);
  agree(c);
}

/* Opens path and reads its root attributes, checking that the file holds a model of n_layer x
 * d_model. Returns the file (-1 on failure, every rank agreeing). collective */
static hid_t open_model_file(Ctx *c, int n_layer, int d_model, TxlCkptState *st, Geometry *g) {
  hid_t file = open_file(c);
  if (file < 0) return -1;
  read_root_attrs(c, file, st, g, NULL);
  if (agree(c) && (g->n_layer != n_layer || g->d_model != d_model))
    fail(c, "the checkpoint is of another model: n_layer %lld, d_model %lld (this model: %d, %d)",
         (long long)g->n_layer, (long long)g->d_model, n_layer, d_model);
  if (!agree(c)) {
    close_file(c, &file);
    return -1;
  }
  return file;
}

int txl_ckpt_read(const char *path, TxlCkptState *st_out, const TxlCkptBuffers *b, char *err,
                  size_t errlen) {
  Ctx c;
  ctx_begin(&c, path);
  TxlCkptState st;
  Geometry g;
  memset(&st, 0, sizeof st);
  memset(&g, 0, sizeof g);
  hid_t file = -1, dxpl = -1;
  check_buffers(&c, b, 0, 0);
  if (!c.ok) goto out;
  file = open_model_file(&c, b->n_layer, b->d_model, &st, &g);
  if (file < 0) goto out;
  if (g.batch_size != b->B_global)
    fail(&c, "the checkpoint was written with batch_size %lld, this run has %d: the memory of "
         "each column cannot be carried over", (long long)g.batch_size, b->B_global);
  else if (g.mem_len != b->mem_len)
    fail(&c, "the checkpoint was written with mem_len %lld, this run has %d", (long long)g.mem_len,
         b->mem_len);
  if (!agree(&c)) goto out;

  /* shapes first: a wrong model fails before gigabytes are read */
  for (int k = 0; k < 3 && c.ok; k++) check_group(&c, file, GROUPS[k], b->table);
  hsize_t mdims[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_global,
                      (hsize_t)b->d_model};
  if (c.ok) {
    hid_t d = open_checked(&c, file, "", "mems", 4, mdims, "this run has");
    if (d >= 0) H5Dclose(d);
  }
  if (!agree(&c)) goto out;

  dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0)
    fail_h5(&c, "transfer properties");
  if (!agree(&c)) goto out;
  float *dst[3] = {b->params, b->adam_m, b->adam_v};
  for (int k = 0; k < 3 && c.ok; k++) read_group(&c, file, GROUPS[k], b->table, dst[k], dxpl);
  if (c.ok && b->mem_len > 0 && b->B_local > 0) {
    hid_t d = H5Dopen2(file, "mems", H5P_DEFAULT);
    hid_t fsp = d < 0 ? -1 : H5Dget_space(d);
    hsize_t start[4] = {0, 0, (hsize_t)b->col0, 0};
    hsize_t count[4] = {mdims[0], mdims[1], (hsize_t)b->B_local, mdims[3]};
    hid_t msp = H5Screate_simple(4, count, NULL);
    if (d < 0 || fsp < 0 || msp < 0 ||
        H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0) {
      fail_h5(&c, "cannot open dataset '/mems'");
    } else if (H5Dread(d, H5T_NATIVE_FLOAT, msp, fsp, dxpl, b->mems) < 0) {
      H5Trace t;
      h5_trace(&t);
      if (t.checksum)
        fail(&c, "dataset '/mems' is damaged: its checksum (Fletcher32) does not match");
      else
        fail_h5(&c, "reading columns [%d, %d) of dataset '/mems' failed", b->col0,
                b->col0 + b->B_local);
    }
    if (msp >= 0) H5Sclose(msp);
    if (fsp >= 0) H5Sclose(fsp);
    if (d >= 0) H5Dclose(d);
    check_mems_values(&c, b, st.mem_rows);
  }
  agree(&c);

out:
  if (dxpl >= 0) H5Pclose(dxpl);
  if (file >= 0) close_file(&c, &file);
  agree(&c);
  if (c.ok && st_out) *st_out = st;
  return ctx_end(&c, err, errlen);
}

int txl_ckpt_read_params(const char *path, const TxlParamTable *table, int n_layer, int d_model, float *params,
                         TxlCkptState *st_out, char *err, size_t errlen) {
  Ctx c;
  ctx_begin(&c, path);
  TxlCkptState st;
  Geometry g;
  memset(&st, 0, sizeof st);
  memset(&g, 0, sizeof g);
  hid_t file = -1, dxpl = -1;
  if (!table || !params) fail(&c, "internal error: no parameter table or buffer");
  if (!agree(&c)) goto out;
  file = open_model_file(&c, n_layer, d_model, &st, &g);
  if (file < 0) goto out;
  check_group(&c, file, GROUPS[0], table);
  if (!agree(&c)) goto out;
  dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT) < 0) fail_h5(&c, "transfer properties");
  if (agree(&c)) read_group(&c, file, GROUPS[0], table, params, dxpl);
out:
  if (dxpl >= 0) H5Pclose(dxpl);
  if (file >= 0) close_file(&c, &file);
  agree(&c);
  if (c.ok && st_out) *st_out = st;
  return ctx_end(&c, err, errlen);
}

int txl_ckpt_read_run_id(const char *path, char run_id[TXL_CKPT_ID_LEN], char *err, size_t errlen) {
  Ctx c;
  ctx_begin(&c, path);
  run_id[0] = 0;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
  if (fapl >= 0) H5Pset_file_locking(fapl, 0, 1); /* the run's ranks may hold it open */
#endif
  hid_t file = fapl < 0 ? -1 : H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (file < 0) fail_h5(&c, "cannot open checkpoint");
  int64_t version = 0;
  char *v = NULL;
  if (attr_read_num_local(&c, file, "format_version", H5T_INTEGER, H5T_NATIVE_INT64, &version) == 0 &&
      version >= 2 && attr_read_string_local(&c, file, "run_id", &v) == 0)
    snprintf(run_id, TXL_CKPT_ID_LEN, "%s", v);
  free(v);
  if (file >= 0) H5Fclose(file);
  if (fapl >= 0) H5Pclose(fapl);
  return ctx_end(&c, err, errlen);
}

/* ---------------------------------------------------------------------------------------------
 * The run folder's "latest" pointer
 * ------------------------------------------------------------------------------------------- */

/* What dir/latest says: LATEST_NAMES with the full path of the file it names in `path` (which
 * may not exist), or why it names none. Serial. */
typedef enum { LATEST_NAMES, LATEST_MISSING, LATEST_EMPTY } LatestKind;

static LatestKind read_latest(const char *dir, char *path, size_t n) {
  path[0] = '\0';
  char lp[4096];
  if ((size_t)snprintf(lp, sizeof lp, "%s/latest", dir) >= sizeof lp) return LATEST_MISSING;
  FILE *f = fopen(lp, "r");
  if (!f) return LATEST_MISSING;
  char line[4096];
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  if (!got) return LATEST_EMPTY;
  size_t len = strlen(line);
  while (len > 0 && isspace((unsigned char)line[len - 1])) line[--len] = '\0';
  char *name = line;
  while (*name && isspace((unsigned char)*name)) name++;
  if (!*name) return LATEST_EMPTY;
  int w = name[0] == '/' ? snprintf(path, n, "%s", name) : snprintf(path, n, "%s/%s", dir, name);
  if (w < 0 || (size_t)w >= n) { /* a path this long names nothing that could be opened */
    snprintf(path, n, "%.100s...", name);
    return LATEST_NAMES;
  }
  return LATEST_NAMES;
}

static int is_regular_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int txl_ckpt_latest(const char *dir, char *path_out, size_t n) {
  if (!dir || !path_out || n == 0) return -1;
  if (read_latest(dir, path_out, n) != LATEST_NAMES || !is_regular_file(path_out)) return -1;
  return 0;
}

/* The step of a file named as the trainer names checkpoints, "ckpt-<step>.h5", or -1. */
static long ckpt_name_step(const char *name) {
  long step = -1;
  int len = 0;
  if (strncmp(name, "ckpt-", 5) != 0 || !isdigit((unsigned char)name[5])) return -1;
  if (sscanf(name + 5, "%ld.h5%n", &step, &len) == 1 && len > 0 && name[5 + len] == '\0') return step;
  return -1;
}

static int newest_first(const void *a, const void *b) {
  long x = ((const TxlCkptFile *)a)->step, y = ((const TxlCkptFile *)b)->step;
  return x < y ? 1 : x > y ? -1 : 0;
}

TxlCkptFile *txl_ckpt_list_dir(const char *dir, int *count) {
  TxlCkptFile *files = NULL;
  int n = 0, cap = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const long step = ckpt_name_step(e->d_name);
    if (step < 0 || strlen(e->d_name) >= sizeof files->name) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      files = realloc(files, sizeof *files * (size_t)cap);
      ALLOC_CHECK(files);
    }
    files[n].step = step;
    snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
    n++;
  }
  if (d) closedir(d);
  if (n) qsort(files, (size_t)n, sizeof *files, newest_first);
  *count = n;
  return files;
}

/* Rank 0's view of the folder, for txl_ckpt_find: the candidates in the order they are tried
 * (the file latest names when it exists, then every ckpt-<step>.h5 newest first), packed as
 * NUL-terminated paths; `latest_says` what is wrong with latest ("" when it names a file that
 * exists: candidate 0). Returns the number of candidates. Serial. */
static int list_candidates(const char *dir, char **packed, size_t *packed_len, char *latest_says,
                           size_t n) {
  char latest[4096];
  LatestKind kind = read_latest(dir, latest, sizeof latest);
  int latest_exists = kind == LATEST_NAMES && is_regular_file(latest);
  latest_says[0] = '\0';
  if (kind == LATEST_MISSING) snprintf(latest_says, n, "there is no 'latest' pointer");
  else if (kind == LATEST_EMPTY) snprintf(latest_says, n, "'latest' is empty");
  else if (!latest_exists) snprintf(latest_says, n, "'latest' names %.900s, which does not exist", latest);

  int count = 0;
  TxlCkptFile *files = txl_ckpt_list_dir(dir, &count);
  size_t len = latest_exists ? strlen(latest) + 1 : 0;
  for (int i = 0; i < count; i++) len += strlen(dir) + 1 + strlen(files[i].name) + 1;
  char *buf = txl_malloc(len + 1, "checkpoint names"), *at = buf;
  int total = 0;
  if (latest_exists) {
    at += sprintf(at, "%s", latest) + 1;
    total++;
  }
  for (int i = 0; i < count; i++) {
    const int w = sprintf(at, "%s/%s", dir, files[i].name);
    if (latest_exists && strcmp(at, latest) == 0) continue; /* latest's file is tried first */
    at += w + 1;
    total++;
  }
  free(files);
  *packed = buf;
  *packed_len = (size_t)(at - buf);
  return total;
}

int txl_ckpt_find(const char *dir, char *path_out, size_t n, char *notice, size_t notice_len,
                  char *err, size_t errlen) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  path_out[0] = '\0';
  if (notice && notice_len) notice[0] = '\0';
  if (err && errlen) err[0] = '\0';

  /* rank 0 reads the folder; every rank then tries the same files in the same order */
  char latest_says[MSG_LEN] = "";
  char *packed = NULL;
  size_t packed_len = 0;
  int total = 0;
  if (rank == 0) total = list_candidates(dir, &packed, &packed_len, latest_says, sizeof latest_says);
  long long len = (long long)packed_len;
  MPI_CHECK(MPI_Bcast(&total, 1, MPI_INT, 0, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
  MPI_CHECK(MPI_Bcast(latest_says, MSG_LEN, MPI_CHAR, 0, MPI_COMM_WORLD));
  if (rank != 0) packed = txl_malloc((size_t)len + 1, "checkpoint names");
  if (len > 0) MPI_CHECK(MPI_Bcast(packed, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD));
  latest_says[MSG_LEN - 1] = '\0';

  if (total == 0) {
    if (err && errlen)
      snprintf(err, errlen, "%s, and no ckpt-<step>.h5 file", latest_says[0] ? latest_says : "no checkpoint");
    free(packed);
    return 1;
  }
  /* the first that passes txl_ckpt_peek (collective: every rank gets the same verdict) */
  char first_problem[MSG_LEN] = "", problem[MSG_LEN];
  const char *p = packed, *chosen = NULL, *first_skipped = NULL;
  int skipped = 0;
  for (int i = 0; i < total && !chosen; i++, p += strlen(p) + 1) {
    if (txl_ckpt_peek(p, NULL, NULL, problem, sizeof problem) == 0) {
      chosen = p;
    } else {
      if (!skipped) { /* the problem without the path in front (it is named beside it) */
        const size_t k = strlen(p);
        const int named = strncmp(problem, p, k) == 0 && problem[k] == ':';
        first_skipped = p;
        snprintf(first_problem, sizeof first_problem, "%s", named ? problem + k + 2 : problem);
      }
      skipped++;
    }
  }
  char why[2 * MSG_LEN], more[64] = "";
  if (skipped > 1) snprintf(more, sizeof more, "; %d more cannot be used either", skipped - 1);
  if (!latest_says[0] && skipped > 0) /* candidate 0 was latest's file */
    snprintf(why, sizeof why, "'latest' names %.600s, which cannot be used (%.600s)%s", first_skipped,
             first_problem, more);
  else if (skipped > 0) /* (the precisions keep the line within `why`, whatever the paths) */
    snprintf(why, sizeof why, "%.600s; %.600s cannot be used (%.600s)%s", latest_says, first_skipped,
             first_problem, more);
  else
    snprintf(why, sizeof why, "%s", latest_says);
  int rc = 0;
  if (!chosen) {
    if (err && errlen) snprintf(err, errlen, "%s: no usable checkpoint: %s", dir, why);
    rc = -1;
  } else {
    if ((size_t)snprintf(path_out, n, "%s", chosen) >= n) {
      if (err && errlen) snprintf(err, errlen, "%s: the checkpoint's path is too long", dir);
      path_out[0] = '\0';
      rc = -1;
    } else if (why[0] && notice && notice_len) {
      snprintf(notice, notice_len, "%s: %s; using %s, the newest checkpoint there that opens", dir,
               why, chosen);
    }
  }
  free(packed);
  return rc;
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
