/* The corpus reader (see corpus.h and FORMAT.md). HDF5's own error printing is switched off
 * around the calls made here; a failure becomes one line in the caller's buffer that names the
 * file, the problem and HDF5's reason (data/h5msg.h). */
#include "data/corpus.h"
#include "data/corpus_internal.h"

#include "data/h5msg.h"
#include "src/base/error.h"
#include "src/base/show.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SPLIT_NAMES[N_SPLITS] = {"train", "valid", "test"};

/* ---- errors and HDF5's error printing ------------------------------------------------------ */

int corpus_fail(Err *e, const char *fmt, ...) {
  if (e->cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->buf, e->cap, fmt, ap);
    va_end(ap);
  }
  return -1;
}

/* "<path>: <message> (HDF5: <reason>)", the reason left out when HDF5 gave none. Returns -1.
 * Call it right after the failed HDF5 call: the next call (a close) clears HDF5's error stack. */
int corpus_fail_h5(Err *e, const char *path, const char *fmt, ...) {
  char reason[256], msg[1024];
  txl_h5_reason(reason, sizeof reason);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (reason[0]) return corpus_fail(e, "%s: %s (HDF5: %s)", path, msg, reason);
  return corpus_fail(e, "%s: %s", path, msg);
}

/* malloc whose failure is an error naming the file (sizes come from the file: no job-ending
 * txl_malloc here). */
void *corpus_alloc(Err *e, const char *path, size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) corpus_fail(e, "%s: out of memory allocating %zu bytes for %s", path, bytes, what);
  return p;
}


void corpus_h5_quiet(H5Quiet *q) {
  H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void corpus_h5_restore(const H5Quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }


/* ---------------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------------- */

/* Reads a string attribute (fixed or variable length). Returns 0, or -1 when it is missing, not
 * a string, or longer than any of the corpus's (MAX_ATTR_STRING). */
static int attr_string(hid_t obj, const char *name, char *buf, size_t cap) {
  if (H5Aexists(obj, name) <= 0) return -1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  int rc = -1;
  hid_t t = H5Aget_type(a);
  if (t >= 0 && H5Tget_class(t) == H5T_STRING) {
    hid_t s = H5Aget_space(a);
    if (s >= 0 && H5Sget_simple_extent_npoints(s) == 1) {
      if (H5Tis_variable_str(t) > 0) {
        hid_t m = H5Tcopy(H5T_C_S1);
        H5Tset_size(m, H5T_VARIABLE);
        char *v = NULL;
        if (H5Aread(a, m, &v) >= 0 && v) {
          snprintf(buf, cap, "%s", v);
          H5free_memory(v);
          rc = 0;
        }
        H5Tclose(m);
      } else {
        size_t n = H5Tget_size(t);
        char *tmp = n > 0 && n <= MAX_ATTR_STRING ? malloc(n + 1) : NULL;
        hid_t m = tmp ? H5Tcopy(H5T_C_S1) : -1;
        if (m >= 0) {
          H5Tset_size(m, n + 1);
          H5Tset_strpad(m, H5T_STR_NULLTERM);
          if (H5Aread(a, m, tmp) >= 0) {
            tmp[n] = '\0';
            snprintf(buf, cap, "%s", tmp);
            rc = 0;
          }
          H5Tclose(m);
        }
        free(tmp);
      }
    }
    if (s >= 0) H5Sclose(s);
  }
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  return rc;
}

/* Reads a scalar integer attribute. Returns 0, or -1 when missing or not an integer. */
static int attr_int64(hid_t obj, const char *name, int64_t *v) {
  if (H5Aexists(obj, name) <= 0) return -1;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  if (a < 0) return -1;
  int rc = -1;
  hid_t t = H5Aget_type(a);
  hid_t s = H5Aget_space(a);
  if (t >= 0 && s >= 0 && H5Tget_class(t) == H5T_INTEGER &&
      H5Sget_simple_extent_npoints(s) == 1 && H5Aread(a, H5T_NATIVE_INT64, v) >= 0)
    rc = 0;
  if (s >= 0) H5Sclose(s);
  if (t >= 0) H5Tclose(t);
  H5Aclose(a);
  return rc;
}

/* Why attr_int64 failed: the attribute is not there, or is there with another type or shape. */
static const char *attr_int64_problem(hid_t obj, const char *name) {
  return H5Aexists(obj, name) > 0 ? "is not one integer (it is stored with another type or shape)" : "is missing";
}

/* ---------------------------------------------------------------------------------------------
 * Open / close
 * ------------------------------------------------------------------------------------------- */

/* Checks an open 1-D dataset: rank 1, a length that fits int64, an integer element type of the
 * wanted sign and one of the sizes in `sizes` (a 0-terminated list), and stored bytes for every
 * element (a chunk never written reads back as zeros, with no checksum to tell, and a length
 * backed by no data must not size an allocation). Returns 0, or -1 with the message. */
static int check_1d(const TxlCorpus *c, hid_t d, const char *name, int64_t cols, int64_t *len, size_t *type_size,
                    const size_t *sizes, int want_signed, Err *e) {
  hid_t sp = H5Dget_space(d);
  int ndims = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
  hsize_t dims[2] = {0, 0};
  if (ndims == (cols ? 2 : 1)) H5Sget_simple_extent_dims(sp, dims, NULL);
  if (sp >= 0) H5Sclose(sp);
  if (ndims != (cols ? 2 : 1) || (cols && dims[1] != (hsize_t)cols)) {
    if (cols)
      return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' is not two-dimensional [n, %lld]", c->path,
                         name, (long long)cols);
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' is not one-dimensional", c->path, name);
  }
  hsize_t dim = dims[0];
  if (cols && dim > (hsize_t)INT64_MAX / (hsize_t)cols)
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' has %llu rows (too many)", c->path, name,
                       (unsigned long long)dim);
  if (dim > (hsize_t)INT64_MAX)
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' has %llu elements (more than 2^63 - 1)",
                c->path, name, (unsigned long long)dim);
  hid_t t = H5Dget_type(d);
  size_t size = t >= 0 ? H5Tget_size(t) : 0;
  int ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER &&
           H5Tget_sign(t) == (want_signed ? H5T_SGN_2 : H5T_SGN_NONE);
  int size_ok = 0;
  for (const size_t *s = sizes; *s; s++) size_ok |= (*s == size);
  if (t >= 0) H5Tclose(t);
  if (!ok || !size_ok) {
    char list[32] = "";
    for (const size_t *s = sizes; *s; s++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%zu", s == sizes ? "" : s[1] ? ", " : " or ", *s);
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' has the wrong element type "
                "(expected %s integers of %s bytes)", c->path, name, want_signed ? "signed" : "unsigned", list);
  }
  /* Fletcher32 on every dataset (FORMAT.md): without it a damaged chunk would be read as data */
  hid_t dcpl = H5Dget_create_plist(d);
  unsigned flags = 0, conf = 0;
  size_t n_cd = 0;
  const int checked = dcpl >= 0 && H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &n_cd, NULL, 0, NULL,
                                                        &conf) >= 0;
  if (dcpl >= 0) H5Pclose(dcpl);
  H5Eclear2(H5E_DEFAULT);
  if (!checked)
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' has no Fletcher32 checksum (every dataset "
                "of a corpus is written with one)", c->path, name);
  /* stored bytes >= elements * size (Fletcher32 adds 4 bytes per chunk), without overflow */
  const hsize_t stored = H5Dget_storage_size(d);
  if (cols) dim *= (hsize_t)cols; /* elements, rows checked above not to overflow */
  if (stored / size < dim)
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' stores %llu bytes, fewer than its "
                "%llu elements of %zu bytes need (missing chunks)", c->path, name,
                (unsigned long long)stored, (unsigned long long)dim, size);
  *len = (int64_t)(cols ? dims[0] : dim);
  if (type_size) *type_size = size;
  return 0;
}

/* Opens a 1-D dataset, or a 2-D one of `cols` columns (cols > 0; *len: its rows) (see check_1d).
 * Returns it, or -1 with the message. */
hid_t corpus_open_dataset(TxlCorpus *c, const char *name, hid_t dapl, int64_t cols, int64_t *len, size_t *type_size,
                          const size_t *sizes, int want_signed, Err *e) {
  if (H5Lexists(c->file, name, H5P_DEFAULT) <= 0)
    return corpus_fail(e, "%s: not a valid txl corpus: dataset '/%s' is missing", c->path, name);
  hid_t d = H5Dopen2(c->file, name, dapl);
  if (d < 0) return corpus_fail_h5(e, c->path, "cannot open dataset '/%s'", name);
  if (check_1d(c, d, name, cols, len, type_size, sizes, want_signed, e) != 0) {
    H5Dclose(d);
    return -1;
  }
  return d;
}

static hid_t open_1d(TxlCorpus *c, const char *name, hid_t dapl, int64_t *len, size_t *type_size,
                     const size_t *sizes, int want_signed, Err *e) {
  return corpus_open_dataset(c, name, dapl, 0, len, type_size, sizes, want_signed, e);
}

/* (Re)opens split k's dataset with a chunk cache of cache_bytes (0: HDF5's default). Returns
 * 0, or -1 with the message. */
static int open_split_dataset(TxlCorpus *c, int k, size_t cache_bytes, Err *e) {
  static const size_t id_sizes[] = {1, 2, 4, 0};
  Split *s = &c->split[k];
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (dapl < 0) return corpus_fail_h5(e, c->path, "H5Pcreate failed");
  if (cache_bytes > 0) {
    /* hash slots: a prime about 100 times the number of chunks that fit (HDF5's advice) */
    size_t chunk_bytes = (size_t)(s->chunk > 0 ? s->chunk : 1) * (s->type_size ? s->type_size : 1);
    size_t want = 100 * (cache_bytes / chunk_bytes + 1);
    if (want > 1000003) want = 1000003;
    size_t p = want | 1;
    for (;; p += 2) {
      int prime = 1;
      for (size_t q = 3; q * q <= p; q += 2)
        if (p % q == 0) { prime = 0; break; }
      if (prime) break;
    }
    if (H5Pset_chunk_cache(dapl, p, cache_bytes, 0.75) < 0) {
      corpus_fail_h5(e, c->path, "cannot set the chunk cache of '/%s'", SPLIT_NAMES[k]);
      H5Pclose(dapl);
      return -1;
    }
  }
  int64_t len;
  size_t ts;
  hid_t d = open_1d(c, SPLIT_NAMES[k], dapl, &len, &ts, id_sizes, 0, e);
  H5Pclose(dapl);
  if (d < 0) return -1;
  s->dset = d;
  s->len = len;
  s->type_size = ts;
  s->cache_bytes = cache_bytes > 0 ? cache_bytes : (size_t)1 << 20; /* HDF5's default: 1 MiB */
  return 0;
}

/* The root attributes and the datasets of an open file (c->file). Returns 0, or -1. */
static int validate(TxlCorpus *c, Err *e) {
  const char *path = c->path;
  char buf[256];
  if (attr_string(c->file, "format", buf, sizeof buf) != 0 || strcmp(buf, TXL_CORPUS_FORMAT) != 0)
    return corpus_fail(e, "%s: not a txl corpus file (no root attribute format = \"%s\"; make one with txl-prep)",
                path, TXL_CORPUS_FORMAT);
  int64_t version = 0;
  if (attr_int64(c->file, "format_version", &version) != 0)
    return corpus_fail(e, "%s: not a valid txl corpus: attribute 'format_version' %s", path,
                       attr_int64_problem(c->file, "format_version"));
  if (version != TXL_CORPUS_FORMAT_VERSION)
    return corpus_fail(e, "%s: corpus format version %lld is not supported (this txl reads version %d)", path,
                (long long)version, TXL_CORPUS_FORMAT_VERSION);
  if (attr_string(c->file, "mode", buf, sizeof buf) != 0 ||
      (strcmp(buf, "word") && strcmp(buf, "char") && strcmp(buf, "byte") && strcmp(buf, "spm") && strcmp(buf, "bpe")))
    return corpus_fail(e, "%s: not a valid txl corpus: attribute 'mode' is missing or not word|char|byte|spm|bpe",
                       path);
  memcpy(c->mode, buf, strlen(buf) + 1); /* one of the five names above */
  if (attr_int64(c->file, "vocab_size", &c->vocab_size) != 0)
    return corpus_fail(e, "%s: not a valid txl corpus: attribute 'vocab_size' %s", path,
                       attr_int64_problem(c->file, "vocab_size"));
  if (c->vocab_size < 1 || c->vocab_size > MAX_VOCAB_SIZE)
    return corpus_fail(e, "%s: not a valid txl corpus: vocab_size = %lld is out of range [1, %lld]", path,
                (long long)c->vocab_size, (long long)MAX_VOCAB_SIZE);
  if (attr_int64(c->file, "eos_id", &c->eos_id) != 0)
    return corpus_fail(e, "%s: not a valid txl corpus: attribute 'eos_id' %s", path,
                       attr_int64_problem(c->file, "eos_id"));
  if (attr_int64(c->file, "unk_id", &c->unk_id) != 0)
    return corpus_fail(e, "%s: not a valid txl corpus: attribute 'unk_id' %s", path,
                       attr_int64_problem(c->file, "unk_id"));
  if (c->eos_id < -1 || c->eos_id >= c->vocab_size || c->unk_id < -1 ||
      c->unk_id >= c->vocab_size)
    return corpus_fail(e, "%s: not a valid txl corpus: eos_id = %lld or unk_id = %lld is outside [-1, %lld)",
                path, (long long)c->eos_id, (long long)c->unk_id, (long long)c->vocab_size);

  for (int k = 0; k < N_SPLITS; k++) {
    Split *s = &c->split[k];
    if (open_split_dataset(c, k, 0, e) != 0) return -1;
    s->chunk = 0;
    hid_t dcpl = H5Dget_create_plist(s->dset);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
      hsize_t ch = 0;
      if (H5Pget_chunk(dcpl, 1, &ch) == 1) s->chunk = (int64_t)ch;
    }
    if (dcpl >= 0) H5Pclose(dcpl);
  }

  static const size_t byte_size[] = {1, 0}, off_size[] = {8, 0};
  int64_t n_off = 0;
  hid_t d = open_1d(c, "vocab", H5P_DEFAULT, &c->vocab_bytes, NULL, byte_size, 0, e);
  if (d < 0) return -1;
  H5Dclose(d);
  d = open_1d(c, "vocab_offsets", H5P_DEFAULT, &n_off, NULL, off_size, 1, e);
  if (d < 0) return -1;
  H5Dclose(d);
  if (n_off != c->vocab_size + 1)
    return corpus_fail(e, "%s: not a valid txl corpus: vocab_size = %lld but '/vocab_offsets' has %lld "
                "entries (expected vocab_size + 1)", path, (long long)c->vocab_size, (long long)n_off);
  if (strcmp(c->mode, "spm") == 0) {
    if (c->eos_id < 0)
      return corpus_fail(e, "%s: not a valid txl corpus: an spm corpus without eos_id (its lines end with it)",
                         path);
    int64_t n_model = 0;
    d = open_1d(c, "spm_model", H5P_DEFAULT, &n_model, NULL, byte_size, 0, e);
    if (d < 0) return -1;
    const int rc = corpus_spm_load(c, d, n_model, e);
    H5Dclose(d);
    return rc;
  }
  if (strcmp(c->mode, "bpe") == 0) {
    static const char *const flag[2] = {"bpe_prefix_space", "bpe_use_regex"};
    int64_t v[2];
    for (int i = 0; i < 2; i++) {
      if (attr_int64(c->file, flag[i], &v[i]) != 0)
        return corpus_fail(e, "%s: not a valid txl corpus: attribute '%s' %s", path, flag[i],
                           attr_int64_problem(c->file, flag[i]));
      if (v[i] != 0 && v[i] != 1)
        return corpus_fail(e, "%s: not a valid txl corpus: %s = %lld is not 0 or 1", path, flag[i], (long long)v[i]);
    }
    if (c->unk_id != -1)
      return corpus_fail(e, "%s: not a valid txl corpus: a bpe corpus has no <unk> (unk_id = %lld, not -1)", path,
                         (long long)c->unk_id);
    c->bpe_prefix_space = (int)v[0];
    c->bpe_use_regex = (int)v[1];
    return corpus_bpe_load(c, e);
  }
  return 0;
}

TxlCorpus *txl_corpus_open(const char *path, char *err, size_t cap) {
  Err e = {err, cap};
  if (!path || !*path) {
    corpus_fail(&e, "corpus: no corpus file given");
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    const int errnum = errno;
    char origin[4200];
    corpus_fail(&e, "%s: cannot open corpus file: %s%s", path, strerror(errnum),
                txl_show_path_origin(origin, sizeof origin, path));
    return NULL;
  }
  fclose(f);

  TxlCorpus *c = calloc(1, sizeof *c);
  char *dup = strdup(path);
  if (!c || !dup) {
    free(c);
    free(dup);
    corpus_fail(&e, "%s: out of memory opening the corpus", path);
    return NULL;
  }
  c->path = dup;
  c->file = -1;
  for (int k = 0; k < N_SPLITS; k++) c->split[k].dset = -1;

  H5Quiet q;
  corpus_h5_quiet(&q);
  /* Read-only and never written in place (txl-prep renames a finished file over it): no need
   * for HDF5's file locks, which fail on file systems without flock (some NFS/Lustre mounts). */
  int rc = -1;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) {
    corpus_fail_h5(&e, path, "H5Pcreate failed");
  } else {
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);
#endif
    c->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (c->file < 0) corpus_fail_h5(&e, path, "not a txl corpus file: not a readable HDF5 file");
    H5Pclose(fapl);
    if (c->file >= 0) rc = validate(c, &e);
  }
  if (rc != 0) {
    txl_corpus_close(c);
    c = NULL;
  }
  corpus_h5_restore(&q);
  return c;
}

void txl_corpus_close(TxlCorpus *c) {
  if (!c) return;
  for (int k = 0; k < N_SPLITS; k++)
    if (c->split[k].dset >= 0) H5Dclose(c->split[k].dset);
  if (c->file >= 0) H5Fclose(c->file);
  corpus_spm_free(c);
  corpus_bpe_free(c);
  free(c->vocab_text);
  free(c->vocab_pos);
  free(c->hash);
  free(c->path);
  free(c);
}

/* ---------------------------------------------------------------------------------------------
 * Accessors
 * ------------------------------------------------------------------------------------------- */

/* The index of a split name, or -1 with the message. */
static int split_index(const TxlCorpus *c, const char *split, Err *e) {
  for (int k = 0; k < N_SPLITS; k++)
    if (split && strcmp(split, SPLIT_NAMES[k]) == 0) return k;
  return corpus_fail(e, "%s: unknown split '%s' (expected train, valid or test)", c->path,
              split ? split : "(null)");
}

int64_t txl_corpus_split_length(const TxlCorpus *c, const char *split) {
  char msg[512];
  Err e = {msg, sizeof msg};
  int k = split_index(c, split, &e);
  if (k < 0) txl_fatal("%s", msg);
  return c->split[k].len;
}
int64_t txl_corpus_vocab_size(const TxlCorpus *c) { return c->vocab_size; }
const char *txl_corpus_mode(const TxlCorpus *c) { return c->mode; }
int txl_corpus_char_level(const TxlCorpus *c) { return !strcmp(c->mode, "char") || !strcmp(c->mode, "byte"); }
const char *txl_corpus_path(const TxlCorpus *c) { return c->path; }
int64_t txl_corpus_eos_id(const TxlCorpus *c) { return c->eos_id; }
int64_t txl_corpus_unk_id(const TxlCorpus *c) { return c->unk_id; }

/* ---------------------------------------------------------------------------------------------
 * Reading ids
 * ------------------------------------------------------------------------------------------- */

/* Makes the chunk cache of split k hold n_cols columns of n_rows rows each (at most
 * MAX_CACHE_BYTES), reopening the dataset when the present cache is smaller. Returns 0, or -1. */
static int ensure_cache(TxlCorpus *c, int k, int64_t n_cols, int64_t n_rows, Err *e) {
  Split *s = &c->split[k];
  if (s->chunk <= 0) return 0;
  int64_t per_col = (n_rows + s->chunk - 1) / s->chunk + 1; /* chunks one column's rows touch */
  double want = ((double)n_cols * (double)per_col + 1.0) * (double)s->chunk * (double)s->type_size;
  if (want > (double)MAX_CACHE_BYTES) want = (double)MAX_CACHE_BYTES;
  if ((size_t)want <= s->cache_bytes) return 0;
  H5Dclose(s->dset);
  s->dset = -1;
  return open_split_dataset(c, k, (size_t)want, e);
}

/* Reads the selection `fsel` of split k into buf (n ids as uint32) and checks them against the
 * vocabulary; pos(i) gives the stream position of buf[i] for the error message. Returns 0, or
 * -1 with the message. */
typedef int64_t (*PosFn)(int64_t i, const int64_t *ctx);

static int read_checked(TxlCorpus *c, int k, hid_t fsel, int64_t n, uint32_t *buf, PosFn pos,
                        const int64_t *ctx, Err *e) {
  hsize_t mdim = (hsize_t)n;
  hid_t msp = H5Screate_simple(1, &mdim, NULL);
  if (msp < 0) return corpus_fail_h5(e, c->path, "H5Screate_simple failed");
  if (H5Dread(c->split[k].dset, H5T_NATIVE_UINT32, msp, fsel, H5P_DEFAULT, buf) < 0) {
    corpus_fail_h5(e, c->path, "reading split '%s' failed (damaged file or checksum mismatch)", SPLIT_NAMES[k]);
    H5Sclose(msp);
    return -1;
  }
  H5Sclose(msp);
  for (int64_t i = 0; i < n; i++)
    if ((int64_t)buf[i] >= c->vocab_size)
      return corpus_fail(e, "%s: split '%s': token id %lu at position %lld is >= vocab_size %lld (corrupt corpus)",
                  c->path, SPLIT_NAMES[k], (unsigned long)buf[i], (long long)pos(i, ctx),
                  (long long)c->vocab_size);
  return 0;
}

/* ctx = {col_len, col_first, offset, n_rows}: buf holds [n_cols, n_rows] */
static int64_t block_pos(int64_t i, const int64_t *ctx) {
  int64_t j = i / ctx[3], r = i % ctx[3];
  return (ctx[1] + j) * ctx[0] + ctx[2] + r;
}

static int read_block(TxlCorpus *c, const char *split, int64_t col_len, int64_t col_first, int n_cols,
                      int64_t offset, int n_rows, int32_t *out, int32_t *scratch, Err *e) {
  int k = split_index(c, split, e);
  if (k < 0) return -1;
  const Split *s = &c->split[k];
  if (col_len < 1 || col_first < 0 || n_cols < 1 || offset < 0 || n_rows < 1 ||
      offset + n_rows > col_len || col_first + n_cols > s->len / col_len)
    return corpus_fail(e, "%s: split '%s' (%lld tokens): read of rows [%lld, %lld) of columns [%lld, %lld) "
                "with column length %lld is out of range", c->path, SPLIT_NAMES[k], (long long)s->len,
                (long long)offset, (long long)offset + n_rows, (long long)col_first,
                (long long)col_first + n_cols, (long long)col_len);
  if (ensure_cache(c, k, n_cols, n_rows, e) != 0) return -1;

  hid_t fsp = H5Dget_space(c->split[k].dset);
  hsize_t start = (hsize_t)(col_first * col_len + offset), stride = (hsize_t)col_len,
          count = (hsize_t)n_cols, block = (hsize_t)n_rows;
  if (fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, &stride, &count, &block) < 0) {
    corpus_fail_h5(e, c->path, "selecting a block of split '%s' failed", SPLIT_NAMES[k]);
    if (fsp >= 0) H5Sclose(fsp);
    return -1;
  }
  int64_t n = (int64_t)n_cols * n_rows;
  uint32_t *buf = scratch ? (uint32_t *)scratch : corpus_alloc(e, c->path, (size_t)n * sizeof *buf, "a block of ids");
  int rc = -1;
  if (buf) {
    int64_t ctx[4] = {col_len, col_first, offset, n_rows};
    rc = read_checked(c, k, fsp, n, buf, block_pos, ctx, e);
  }
  H5Sclose(fsp);
  if (rc == 0)
    for (int j = 0; j < n_cols; j++) {
      const uint32_t *col = buf + (int64_t)j * n_rows;
      for (int i = 0; i < n_rows; i++) out[(int64_t)i * n_cols + j] = (int32_t)col[i];
    }
  if (!scratch) free(buf);
  return rc;
}

int txl_corpus_read_block(TxlCorpus *c, const char *split, int64_t col_len, int64_t col_first,
                          int n_cols, int64_t offset, int n_rows, int32_t *out, int32_t *scratch,
                          char *err, size_t cap) {
  Err e = {err, cap};
  H5Quiet q;
  corpus_h5_quiet(&q);
  int rc = read_block(c, split, col_len, col_first, n_cols, offset, n_rows, out, scratch, &e);
  corpus_h5_restore(&q);
  return rc;
}

static int64_t range_pos(int64_t i, const int64_t *ctx) { return ctx[0] + i; }

/* Reads split k [start, start + n) into buf (no bounds check here). Returns 0, or -1. */
static int read_range_raw(TxlCorpus *c, int k, int64_t start, int64_t n, uint32_t *buf, Err *e) {
  hid_t fsp = H5Dget_space(c->split[k].dset);
  hsize_t st = (hsize_t)start, cnt = (hsize_t)n;
  if (fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &st, NULL, &cnt, NULL) < 0) {
    corpus_fail_h5(e, c->path, "selecting a range of split '%s' failed", SPLIT_NAMES[k]);
    if (fsp >= 0) H5Sclose(fsp);
    return -1;
  }
  int64_t ctx[1] = {start};
  int rc = read_checked(c, k, fsp, n, buf, range_pos, ctx, e);
  H5Sclose(fsp);
  return rc;
}

int txl_corpus_read_range(TxlCorpus *c, const char *split, int64_t start, int64_t n, int32_t *out,
                          char *err, size_t cap) {
  Err e = {err, cap};
  int k = split_index(c, split, &e);
  if (k < 0) return -1;
  const Split *s = &c->split[k];
  if (start < 0 || n < 1 || start > s->len || n > s->len - start)
    return corpus_fail(&e, "%s: split '%s' (%lld tokens): read of [%lld, %lld) is out of range", c->path,
                SPLIT_NAMES[k], (long long)s->len, (long long)start, (long long)(start + n));
  H5Quiet q;
  corpus_h5_quiet(&q);
  /* ids are < vocab_size <= 2^31 - 1 after the check, so the uint32 bit patterns are the int32
   * values */
  int rc = read_range_raw(c, k, start, n, (uint32_t *)out, &e);
  corpus_h5_restore(&q);
  return rc;
}

/* Reads (checksums) and checks (ids) elements [first, end) of split k, STREAM_ELEMS at most at a
 * time, each read a whole number of `unit`s (the chunk length) when a unit is smaller, so that no
 * chunk is read twice. Returns 0, or -1 with the message. */
static int check_range(TxlCorpus *c, int k, int64_t first, int64_t end, int64_t unit, uint32_t *buf,
                       Err *e) {
  const int64_t step = unit < STREAM_ELEMS ? STREAM_ELEMS / unit * unit : STREAM_ELEMS;
  for (int64_t at = first; at < end; at += step) {
    const int64_t n = end - at < step ? end - at : step;
    if (read_range_raw(c, k, at, n, buf, e) != 0) return -1;
  }
  return 0;
}

/* floor(n * i / parts) without overflow (n >= 0, 0 <= i <= parts). */
static int64_t share_bound(int64_t n, int i, int parts) {
  return n / parts * i + n % parts * i / parts;
}

static int check_splits(TxlCorpus *c, int part, int parts, int64_t *tokens, Err *e) {
  /* the chunks of the three splits as one sequence of `total` units: split k holds units
   * [base[k], base[k] + units[k]); a split stored without chunks counts in STREAM_ELEMS pieces */
  int64_t unit[N_SPLITS], units[N_SPLITS], base[N_SPLITS], total = 0;
  for (int k = 0; k < N_SPLITS; k++) {
    const Split *s = &c->split[k];
    unit[k] = s->chunk > 0 ? s->chunk : STREAM_ELEMS;
    units[k] = s->len / unit[k] + (s->len % unit[k] != 0);
    base[k] = total;
    total += units[k];
  }
  const int64_t lo = share_bound(total, part, parts), hi = share_bound(total, part + 1, parts);
  uint32_t *buf = corpus_alloc(e, c->path, (size_t)STREAM_ELEMS * sizeof *buf, "the corpus check");
  if (!buf) return -1;
  int rc = 0;
  *tokens = 0;
  for (int k = 0; k < N_SPLITS && rc == 0; k++) {
    const int64_t a = lo > base[k] ? lo : base[k], b = hi < base[k] + units[k] ? hi : base[k] + units[k];
    if (a >= b) continue;
    const int64_t first = (a - base[k]) * unit[k];
    const int64_t end = (b - base[k]) * unit[k] < c->split[k].len ? (b - base[k]) * unit[k] : c->split[k].len;
    rc = check_range(c, k, first, end, unit[k], buf, e);
    *tokens += end - first;
  }
  free(buf);
  return rc;
}

int txl_corpus_check(TxlCorpus *c, int part, int parts, int64_t *tokens, char *err, size_t cap) {
  Err e = {err, cap};
  if (parts < 1 || part < 0 || part >= parts)
    return corpus_fail(&e, "%s: corpus check: part %d of %d does not exist", c->path, part, parts);
  if (txl_corpus_load_vocab(c, err, cap) != 0) return -1;
  H5Quiet q;
  corpus_h5_quiet(&q);
  int rc = check_splits(c, part, parts, tokens, &e);
  corpus_h5_restore(&q);
  return rc;
}

int txl_corpus_unigram_entropy_bits(TxlCorpus *c, const char *split, double *bits, char *err,
                                    size_t cap) {
  Err e = {err, cap};
  int k = split_index(c, split, &e);
  if (k < 0) return -1;
  int64_t len = c->split[k].len;
  *bits = 0.0;
  if (len == 0) return 0;
  int64_t *count = calloc((size_t)c->vocab_size, sizeof *count);
  int64_t step = len < STREAM_ELEMS ? len : STREAM_ELEMS;
  uint32_t *buf = malloc((size_t)step * sizeof *buf);
  if (!count || !buf) {
    free(count);
    free(buf);
    return corpus_fail(&e, "%s: out of memory counting the %s split's tokens", c->path, SPLIT_NAMES[k]);
  }
  H5Quiet q;
  corpus_h5_quiet(&q);
  int rc = 0;
  for (int64_t start = 0; start < len && rc == 0; start += step) {
    int64_t n = len - start < step ? len - start : step;
    rc = read_range_raw(c, k, start, n, buf, &e);
    for (int64_t i = 0; i < n && rc == 0; i++) count[buf[i]]++;
  }
  corpus_h5_restore(&q);
  double h = 0.0;
  for (int64_t v = 0; v < c->vocab_size && rc == 0; v++)
    if (count[v] > 0) {
      double p = (double)count[v] / (double)len;
      h -= p * log2(p);
    }
  free(buf);
  free(count);
  if (rc == 0) *bits = h;
  return rc;
}

