/* The corpus reader (see corpus.h and FORMAT.md). HDF5's own error printing is switched off
 * around the calls made here; a failure becomes one txl_fatal line that names the file, the
 * problem and HDF5's innermost message. */
#include "data/corpus.h"

#include "data/sha256.h"
#include "src/base/error.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_SPLITS = 3 };
static const char *const SPLIT_NAMES[N_SPLITS] = {"train", "valid", "test"};

/* Largest chunk cache a split is given (per split, per rank). */
#define MAX_CACHE_BYTES ((size_t)1 << 30)
/* Elements per read when streaming through a split. */
#define STREAM_ELEMS ((int64_t)1 << 20)

typedef struct {
  hid_t dset;          /* the open dataset */
  int64_t len;         /* number of tokens */
  int64_t chunk;       /* chunk length in elements, 0 when not chunked */
  size_t type_size;    /* bytes per stored id: 1, 2 or 4 */
  size_t cache_bytes;  /* chunk cache the dataset is open with */
} Split;

struct TxlCorpus {
  char *path;
  hid_t file;
  char mode[8];
  int64_t vocab_size, eos_id, unk_id;
  int64_t vocab_bytes;  /* length of the /vocab dataset */
  Split split[N_SPLITS];
  /* vocabulary, loaded on first use */
  char *vocab_text;     /* every token followed by a NUL */
  int64_t *vocab_pos;   /* [vocab_size + 1]: token i is vocab_text[vocab_pos[i] .. vocab_pos[i+1]-1) */
  int64_t *hash;        /* open addressing table of ids, -1 = empty */
  uint64_t hash_mask;
  char vocab_digest[65]; /* "" until txl_corpus_vocab_digest computes it */
};

/* ---------------------------------------------------------------------------------------------
 * HDF5 error handling
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  H5E_auto2_t fn;
  void *data;
} H5Quiet;

static void h5_quiet(H5Quiet *q) {
  H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void h5_restore(const H5Quiet *q) { H5Eset_auto2(H5E_DEFAULT, q->fn, q->data); }

static herr_t first_error_cb(unsigned n, const H5E_error2_t *err, void *data) {
  char *buf = data;
  if (n == 0 && err->desc) snprintf(buf, 256, "%s", err->desc);
  return 0;
}

/* The innermost message of the current HDF5 error stack ("" when there is none). */
static void h5_error_text(char buf[256]) {
  buf[0] = '\0';
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_error_cb, buf);
}

/* txl_fatal("<path>: <message> (HDF5: <innermost message>)"). */
static void fatal_h5(const char *path, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 2, 3)));
static void fatal_h5(const char *path, const char *fmt, ...) {
  char h5msg[256], msg[1024];
  h5_error_text(h5msg);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (h5msg[0])
    txl_fatal("%s: %s (HDF5: %s)", path, msg, h5msg);
  txl_fatal("%s: %s", path, msg);
}

/* ---------------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------------- */

/* Reads a string attribute (fixed or variable length). Returns 0, or -1 when it is missing or
 * not a string. */
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
        char *tmp = txl_malloc(n + 1, "string attribute");
        hid_t m = H5Tcopy(H5T_C_S1);
        H5Tset_size(m, n + 1);
        H5Tset_strpad(m, H5T_STR_NULLTERM);
        if (H5Aread(a, m, tmp) >= 0) {
          tmp[n] = '\0';
          snprintf(buf, cap, "%s", tmp);
          rc = 0;
        }
        H5Tclose(m);
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

/* ---------------------------------------------------------------------------------------------
 * Open / close
 * ------------------------------------------------------------------------------------------- */

/* Opens a 1-D dataset and returns its length; the element type must be an unsigned integer of
 * one of the sizes allowed in `sizes` (a 0-terminated list). */
static hid_t open_1d(TxlCorpus *c, const char *name, hid_t dapl, int64_t *len, size_t *type_size,
                     const size_t *sizes, int want_signed) {
  if (H5Lexists(c->file, name, H5P_DEFAULT) <= 0)
    txl_fatal("%s: not a valid txl corpus: dataset '/%s' is missing", c->path, name);
  hid_t d = H5Dopen2(c->file, name, dapl);
  if (d < 0) fatal_h5(c->path, "cannot open dataset '/%s'", name);
  hid_t sp = H5Dget_space(d);
  if (sp < 0 || H5Sget_simple_extent_ndims(sp) != 1)
    txl_fatal("%s: not a valid txl corpus: dataset '/%s' is not one-dimensional", c->path, name);
  hsize_t dim = 0;
  H5Sget_simple_extent_dims(sp, &dim, NULL);
  H5Sclose(sp);
  hid_t t = H5Dget_type(d);
  size_t size = t >= 0 ? H5Tget_size(t) : 0;
  int ok = t >= 0 && H5Tget_class(t) == H5T_INTEGER &&
           H5Tget_sign(t) == (want_signed ? H5T_SGN_2 : H5T_SGN_NONE);
  int size_ok = 0;
  for (const size_t *s = sizes; *s; s++) size_ok |= (*s == size);
  if (t >= 0) H5Tclose(t);
  if (!ok || !size_ok)
    txl_fatal("%s: not a valid txl corpus: dataset '/%s' has the wrong element type "
              "(expected %s integers of %s bytes)", c->path, name, want_signed ? "signed" : "unsigned",
              want_signed ? "8" : "1, 2 or 4");
  *len = (int64_t)dim;
  if (type_size) *type_size = size;
  return d;
}

static hid_t open_split_dataset(TxlCorpus *c, int k, size_t cache_bytes) {
  static const size_t id_sizes[] = {1, 2, 4, 0};
  Split *s = &c->split[k];
  hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
  if (dapl < 0) fatal_h5(c->path, "H5Pcreate failed");
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
    if (H5Pset_chunk_cache(dapl, p, cache_bytes, 0.75) < 0)
      fatal_h5(c->path, "cannot set the chunk cache of '/%s'", SPLIT_NAMES[k]);
  }
  int64_t len;
  size_t ts;
  hid_t d = open_1d(c, SPLIT_NAMES[k], dapl, &len, &ts, id_sizes, 0);
  H5Pclose(dapl);
  s->len = len;
  s->type_size = ts;
  s->cache_bytes = cache_bytes > 0 ? cache_bytes : (size_t)1 << 20; /* HDF5's default: 1 MiB */
  return d;
}

TxlCorpus *txl_corpus_open(const char *path) {
  if (!path || !*path) txl_fatal("corpus: no corpus file given");
  FILE *f = fopen(path, "rb");
  if (!f) txl_fatal("%s: cannot open corpus file: %s", path, strerror(errno));
  fclose(f);

  TxlCorpus *c = txl_calloc(1, sizeof *c, "corpus");
  c->path = strdup(path);
  ALLOC_CHECK(c->path);
  for (int k = 0; k < N_SPLITS; k++) c->split[k].dset = -1;

  H5Quiet q;
  h5_quiet(&q);
  /* Read-only and never written in place (txl-prep renames a finished file over it): no need
   * for HDF5's file locks, which fail on file systems without flock (some NFS/Lustre mounts). */
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0) fatal_h5(path, "H5Pcreate failed");
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl, 0, 1);
#endif
  c->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (c->file < 0) fatal_h5(path, "not a txl corpus file: not a readable HDF5 file");

  char buf[256];
  if (attr_string(c->file, "format", buf, sizeof buf) != 0 || strcmp(buf, TXL_CORPUS_FORMAT) != 0)
    txl_fatal("%s: not a txl corpus file (no root attribute format = \"%s\"; make one with txl-prep)",
              path, TXL_CORPUS_FORMAT);
  int64_t version = 0;
  if (attr_int64(c->file, "format_version", &version) != 0)
    txl_fatal("%s: not a valid txl corpus: attribute 'format_version' is missing", path);
  if (version != TXL_CORPUS_FORMAT_VERSION)
    txl_fatal("%s: corpus format version %lld is not supported (this txl reads version %d)", path,
              (long long)version, TXL_CORPUS_FORMAT_VERSION);
  if (attr_string(c->file, "mode", buf, sizeof buf) != 0 ||
      (strcmp(buf, "word") && strcmp(buf, "char") && strcmp(buf, "byte")))
    txl_fatal("%s: not a valid txl corpus: attribute 'mode' is missing or not word|char|byte", path);
  memcpy(c->mode, buf, strlen(buf) + 1); /* one of the three names above */
  if (attr_int64(c->file, "vocab_size", &c->vocab_size) != 0)
    txl_fatal("%s: not a valid txl corpus: attribute 'vocab_size' is missing", path);
  if (c->vocab_size < 1 || c->vocab_size > ((int64_t)1 << 31))
    txl_fatal("%s: not a valid txl corpus: vocab_size = %lld is out of range [1, 2^31]", path,
              (long long)c->vocab_size);
  if (attr_int64(c->file, "eos_id", &c->eos_id) != 0 ||
      attr_int64(c->file, "unk_id", &c->unk_id) != 0)
    txl_fatal("%s: not a valid txl corpus: attribute 'eos_id' or 'unk_id' is missing", path);
  if (c->eos_id < -1 || c->eos_id >= c->vocab_size || c->unk_id < -1 ||
      c->unk_id >= c->vocab_size)
    txl_fatal("%s: not a valid txl corpus: eos_id = %lld or unk_id = %lld is outside [-1, %lld)",
              path, (long long)c->eos_id, (long long)c->unk_id, (long long)c->vocab_size);

  for (int k = 0; k < N_SPLITS; k++) {
    Split *s = &c->split[k];
    s->dset = open_split_dataset(c, k, 0);
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
  hid_t d = open_1d(c, "vocab", H5P_DEFAULT, &c->vocab_bytes, NULL, byte_size, 0);
  H5Dclose(d);
  d = open_1d(c, "vocab_offsets", H5P_DEFAULT, &n_off, NULL, off_size, 1);
  H5Dclose(d);
  if (n_off != c->vocab_size + 1)
    txl_fatal("%s: not a valid txl corpus: vocab_size = %lld but '/vocab_offsets' has %lld entries "
              "(expected vocab_size + 1)", path, (long long)c->vocab_size, (long long)n_off);
  h5_restore(&q);
  return c;
}

void txl_corpus_close(TxlCorpus *c) {
  if (!c) return;
  for (int k = 0; k < N_SPLITS; k++)
    if (c->split[k].dset >= 0) H5Dclose(c->split[k].dset);
  if (c->file >= 0) H5Fclose(c->file);
  free(c->vocab_text);
  free(c->vocab_pos);
  free(c->hash);
  free(c->path);
  free(c);
}

/* ---------------------------------------------------------------------------------------------
 * Accessors
 * ------------------------------------------------------------------------------------------- */

static int split_index(const TxlCorpus *c, const char *split) {
  for (int k = 0; k < N_SPLITS; k++)
    if (split && strcmp(split, SPLIT_NAMES[k]) == 0) return k;
  txl_fatal("%s: unknown split '%s' (expected train, valid or test)", c->path,
            split ? split : "(null)");
}

int64_t txl_corpus_split_length(const TxlCorpus *c, const char *split) {
  return c->split[split_index(c, split)].len;
}
int64_t txl_corpus_vocab_size(const TxlCorpus *c) { return c->vocab_size; }
const char *txl_corpus_mode(const TxlCorpus *c) { return c->mode; }
const char *txl_corpus_path(const TxlCorpus *c) { return c->path; }
int64_t txl_corpus_eos_id(const TxlCorpus *c) { return c->eos_id; }
int64_t txl_corpus_unk_id(const TxlCorpus *c) { return c->unk_id; }

/* ---------------------------------------------------------------------------------------------
 * Reading ids
 * ------------------------------------------------------------------------------------------- */

/* Makes the chunk cache of split k hold n_cols columns of n_rows rows each (at most
 * MAX_CACHE_BYTES), reopening the dataset when the present cache is smaller. */
static void ensure_cache(TxlCorpus *c, int k, int64_t n_cols, int64_t n_rows) {
  Split *s = &c->split[k];
  if (s->chunk <= 0) return;
  int64_t per_col = (n_rows + s->chunk - 1) / s->chunk + 1; /* chunks one column's rows touch */
  double want = ((double)n_cols * (double)per_col + 1.0) * (double)s->chunk * (double)s->type_size;
  if (want > (double)MAX_CACHE_BYTES) want = (double)MAX_CACHE_BYTES;
  if ((size_t)want <= s->cache_bytes) return;
  H5Dclose(s->dset);
  s->dset = open_split_dataset(c, k, (size_t)want);
}

/* Reads the selection `fsel` of split k into buf (n ids as uint32) and checks them against the
 * vocabulary; pos(i) gives the stream position of buf[i] for the error message. */
typedef int64_t (*PosFn)(int64_t i, const int64_t *ctx);

static void read_checked(TxlCorpus *c, int k, hid_t fsel, int64_t n, uint32_t *buf, PosFn pos,
                         const int64_t *ctx) {
  H5Quiet q;
  h5_quiet(&q);
  hsize_t mdim = (hsize_t)n;
  hid_t msp = H5Screate_simple(1, &mdim, NULL);
  if (msp < 0) fatal_h5(c->path, "H5Screate_simple failed");
  if (H5Dread(c->split[k].dset, H5T_NATIVE_UINT32, msp, fsel, H5P_DEFAULT, buf) < 0)
    fatal_h5(c->path, "reading split '%s' failed (damaged file or checksum mismatch)",
             SPLIT_NAMES[k]);
  H5Sclose(msp);
  h5_restore(&q);
  for (int64_t i = 0; i < n; i++)
    if ((int64_t)buf[i] >= c->vocab_size)
      txl_fatal("%s: split '%s': token id %lu at position %lld is >= vocab_size %lld (corrupt corpus)",
                c->path, SPLIT_NAMES[k], (unsigned long)buf[i], (long long)pos(i, ctx),
                (long long)c->vocab_size);
}

/* ctx = {col_len, col_first, offset, n_rows}: buf holds [n_cols, n_rows] */
static int64_t block_pos(int64_t i, const int64_t *ctx) {
  int64_t j = i / ctx[3], r = i % ctx[3];
  return (ctx[1] + j) * ctx[0] + ctx[2] + r;
}

void txl_corpus_read_block(TxlCorpus *c, const char *split, int64_t col_len, int64_t col_first,
                           int n_cols, int64_t offset, int n_rows, int32_t *out, int32_t *scratch) {
  int k = split_index(c, split);
  const Split *s = &c->split[k];
  if (col_len < 1 || col_first < 0 || n_cols < 1 || offset < 0 || n_rows < 1 ||
      offset + n_rows > col_len || col_first + n_cols > s->len / col_len)
    txl_fatal("%s: split '%s' (%lld tokens): read of rows [%lld, %lld) of columns [%lld, %lld) with "
              "column length %lld is out of range", c->path, SPLIT_NAMES[k], (long long)s->len,
              (long long)offset, (long long)offset + n_rows, (long long)col_first,
              (long long)col_first + n_cols, (long long)col_len);
  ensure_cache(c, k, n_cols, n_rows);

  H5Quiet q;
  h5_quiet(&q);
  hid_t fsp = H5Dget_space(c->split[k].dset);
  hsize_t start = (hsize_t)(col_first * col_len + offset), stride = (hsize_t)col_len,
          count = (hsize_t)n_cols, block = (hsize_t)n_rows;
  if (fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, &stride, &count, &block) < 0)
    fatal_h5(c->path, "selecting a block of split '%s' failed", SPLIT_NAMES[k]);
  h5_restore(&q);

  int64_t n = (int64_t)n_cols * n_rows;
  uint32_t *buf = scratch ? (uint32_t *)scratch : txl_malloc((size_t)n * sizeof *buf, "block");
  int64_t ctx[4] = {col_len, col_first, offset, n_rows};
  read_checked(c, k, fsp, n, buf, block_pos, ctx);
  H5Sclose(fsp);
  for (int j = 0; j < n_cols; j++) {
    const uint32_t *col = buf + (int64_t)j * n_rows;
    for (int i = 0; i < n_rows; i++) out[(int64_t)i * n_cols + j] = (int32_t)col[i];
  }
  if (!scratch) free(buf);
}

static int64_t range_pos(int64_t i, const int64_t *ctx) { return ctx[0] + i; }

/* Reads split k [start, start + n) into buf (no bounds check here). */
static void read_range_raw(TxlCorpus *c, int k, int64_t start, int64_t n, uint32_t *buf) {
  H5Quiet q;
  h5_quiet(&q);
  hid_t fsp = H5Dget_space(c->split[k].dset);
  hsize_t st = (hsize_t)start, cnt = (hsize_t)n;
  if (fsp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &st, NULL, &cnt, NULL) < 0)
    fatal_h5(c->path, "selecting a range of split '%s' failed", SPLIT_NAMES[k]);
  h5_restore(&q);
  int64_t ctx[1] = {start};
  read_checked(c, k, fsp, n, buf, range_pos, ctx);
  H5Sclose(fsp);
}

void txl_corpus_read_range(TxlCorpus *c, const char *split, int64_t start, int64_t n,
                           int32_t *out) {
  int k = split_index(c, split);
  const Split *s = &c->split[k];
  if (start < 0 || n < 1 || start > s->len || n > s->len - start)
    txl_fatal("%s: split '%s' (%lld tokens): read of [%lld, %lld) is out of range", c->path,
              SPLIT_NAMES[k], (long long)s->len, (long long)start, (long long)(start + n));
  /* ids are < vocab_size <= 2^31 after the check, so the uint32 bit patterns are the int32 values */
  read_range_raw(c, k, start, n, (uint32_t *)out);
}

double txl_corpus_unigram_entropy_bits(TxlCorpus *c, const char *split) {
  int k = split_index(c, split);
  int64_t len = c->split[k].len;
  if (len == 0) return 0.0;
  int64_t *count = txl_calloc((size_t)c->vocab_size, sizeof *count, "unigram counts");
  int64_t step = len < STREAM_ELEMS ? len : STREAM_ELEMS;
  uint32_t *buf = txl_malloc((size_t)step * sizeof *buf, "unigram buffer");
  for (int64_t start = 0; start < len; start += step) {
    int64_t n = len - start < step ? len - start : step;
    read_range_raw(c, k, start, n, buf);
    for (int64_t i = 0; i < n; i++) count[buf[i]]++;
  }
  double h = 0.0;
  for (int64_t v = 0; v < c->vocab_size; v++)
    if (count[v] > 0) {
      double p = (double)count[v] / (double)len;
      h -= p * log2(p);
    }
  free(buf);
  free(count);
  return h;
}

/* ---------------------------------------------------------------------------------------------
 * Vocabulary
 * ------------------------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h ^ (h >> 29);
}

static void read_whole(TxlCorpus *c, const char *name, hid_t memtype, void *buf) {
  H5Quiet q;
  h5_quiet(&q);
  hid_t d = H5Dopen2(c->file, name, H5P_DEFAULT);
  if (d < 0 || H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
    fatal_h5(c->path, "reading '/%s' failed (damaged file or checksum mismatch)", name);
  H5Dclose(d);
  h5_restore(&q);
}

static void load_vocab(TxlCorpus *c) {
  if (c->vocab_text) return;
  int64_t V = c->vocab_size;
  int64_t *off = txl_malloc((size_t)(V + 1) * sizeof *off, "vocabulary offsets");
  read_whole(c, "vocab_offsets", H5T_NATIVE_INT64, off);
  if (off[0] != 0 || off[V] != c->vocab_bytes)
    txl_fatal("%s: not a valid txl corpus: '/vocab_offsets' does not span '/vocab' "
              "(first %lld, last %lld, vocab bytes %lld)", c->path, (long long)off[0],
              (long long)off[V], (long long)c->vocab_bytes);
  for (int64_t i = 0; i < V; i++)
    if (off[i + 1] <= off[i])
      txl_fatal("%s: not a valid txl corpus: '/vocab_offsets' is not increasing at token %lld",
                c->path, (long long)i);
  unsigned char *bytes = txl_malloc((size_t)(c->vocab_bytes > 0 ? c->vocab_bytes : 1), "vocabulary");
  if (c->vocab_bytes > 0) read_whole(c, "vocab", H5T_NATIVE_UCHAR, bytes);

  char *text = txl_malloc((size_t)(c->vocab_bytes + V), "vocabulary strings");
  int64_t *pos = txl_malloc((size_t)(V + 1) * sizeof *pos, "vocabulary positions");
  int64_t p = 0;
  for (int64_t i = 0; i < V; i++) {
    pos[i] = p;
    memcpy(text + p, bytes + off[i], (size_t)(off[i + 1] - off[i]));
    p += off[i + 1] - off[i];
    text[p++] = '\0';
  }
  pos[V] = p;
  free(bytes);
  free(off);

  uint64_t size = 16;
  while (size < 2 * (uint64_t)V) size <<= 1;
  int64_t *hash = txl_malloc(size * sizeof *hash, "vocabulary hash");
  for (uint64_t i = 0; i < size; i++) hash[i] = -1;
  for (int64_t i = 0; i < V; i++) {
    size_t len = (size_t)(pos[i + 1] - pos[i] - 1);
    uint64_t h = hash_bytes(text + pos[i], len) & (size - 1);
    while (hash[h] >= 0) {
      int64_t o = hash[h];
      if ((size_t)(pos[o + 1] - pos[o] - 1) == len && memcmp(text + pos[o], text + pos[i], len) == 0)
        txl_fatal("%s: not a valid txl corpus: token %lld repeats token %lld in the vocabulary",
                  c->path, (long long)i, (long long)o);
      h = (h + 1) & (size - 1);
    }
    hash[h] = i;
  }
  c->vocab_text = text;
  c->vocab_pos = pos;
  c->hash = hash;
  c->hash_mask = size - 1;
}

const char *txl_corpus_token_bytes(TxlCorpus *c, int64_t id, size_t *len) {
  load_vocab(c);
  if (id < 0 || id >= c->vocab_size)
    txl_fatal("%s: token id %lld is outside the vocabulary [0, %lld)", c->path, (long long)id,
              (long long)c->vocab_size);
  if (len) *len = (size_t)(c->vocab_pos[id + 1] - c->vocab_pos[id] - 1);
  return c->vocab_text + c->vocab_pos[id];
}

const char *txl_corpus_token_string(TxlCorpus *c, int64_t id) {
  return txl_corpus_token_bytes(c, id, NULL);
}

int64_t txl_corpus_token_id_n(TxlCorpus *c, const char *s, size_t len) {
  load_vocab(c);
  uint64_t h = hash_bytes(s, len) & c->hash_mask;
  while (c->hash[h] >= 0) {
    int64_t o = c->hash[h];
    if ((size_t)(c->vocab_pos[o + 1] - c->vocab_pos[o] - 1) == len &&
        memcmp(c->vocab_text + c->vocab_pos[o], s, len) == 0)
      return o;
    h = (h + 1) & c->hash_mask;
  }
  return -1;
}

int64_t txl_corpus_token_id(TxlCorpus *c, const char *s) {
  return txl_corpus_token_id_n(c, s, strlen(s));
}

const char *txl_corpus_vocab_digest(TxlCorpus *c) {
  if (c->vocab_digest[0]) return c->vocab_digest;
  load_vocab(c);
  TxlSha256 h;
  txl_sha256_init(&h);
  txl_sha256_update(&h, c->mode, strlen(c->mode) + 1);
  for (int64_t i = 0; i < c->vocab_size; i++) {
    const uint64_t len = (uint64_t)(c->vocab_pos[i + 1] - c->vocab_pos[i] - 1);
    unsigned char le[8];
    for (int b = 0; b < 8; b++) le[b] = (unsigned char)(len >> (8 * b));
    txl_sha256_update(&h, le, sizeof le);
    txl_sha256_update(&h, c->vocab_text + c->vocab_pos[i], (size_t)len);
  }
  unsigned char digest[32];
  txl_sha256_final(&h, digest, c->vocab_digest);
  return c->vocab_digest;
}
