/* Test helper for the shell tests of tests/data: looks into corpus files through the reader
 * library (data/corpus.h), and makes hand-made good and bad files.
 *
 *   corpus_tool info FILE                 mode, vocab_size, eos_id, unk_id, split lengths
 *   corpus_tool attr FILE NAME            one root attribute (string or integer)
 *   corpus_tool ids FILE SPLIT            the split's ids, one per line
 *   corpus_tool vocab FILE                the tokens, one per line (\n \r \t \\ and bytes outside
 *                                         printable ASCII escaped as \xHH)
 *   corpus_tool decode FILE SPLIT         the split's tokens' bytes concatenated (char, byte), or
 *                                         words joined by spaces with <eos> as a line end (word),
 *                                         or each line's ids decoded by the stored SentencePiece
 *                                         model with <eos> as a line end (spm)
 *   corpus_tool spm-model FILE OUT        writes the stored SentencePiece model ('/spm_model') to OUT
 *   corpus_tool put-spm-model FILE MODEL  replaces '/spm_model' by the bytes of file MODEL (chunked,
 *                                         Fletcher32, as txl-prep writes it)
 *   corpus_tool block FILE SPLIT COL_LEN COL_FIRST N_COLS OFFSET N_ROWS
 *                                         txl_corpus_read_block, one row per line
 *   corpus_tool entropy FILE SPLIT        txl_corpus_unigram_entropy_bits
 *   corpus_tool tokid FILE STRING         txl_corpus_token_id
 *   corpus_tool check FILE PARTS          txl_corpus_check of each part in turn: "part P: N tokens"
 *   corpus_tool make FILE LEN VOCAB [BAD_POS]  hand-made corpus (tests/data/handmade.h), uint16
 *   corpus_tool make-zipf FILE TRAIN VALID TEST VOCAB SEED
 *                                         a corpus of Zipf-distributed ids (handmade_zipf_corpus)
 *   corpus_tool make-foreign FILE         an HDF5 file that is no corpus
 *   corpus_tool make-big-vocab FILE VOCAB a hand-made corpus (ids < 50) whose vocab_size is VOCAB
 *                                         and whose '/vocab_offsets' has VOCAB + 1 entries, only
 *                                         the first 51 stored (the rest never written: sparse)
 *   corpus_tool dtype FILE SPLIT          the stored id type of a split: uint8, uint16, ...
 *   corpus_tool set-attr FILE NAME VALUE  (over)writes an int64 root attribute (to break files)
 *   corpus_tool no-fletcher FILE DSET     rewrites DSET (integers) chunked without Fletcher32
 *   corpus_tool set-attr-f64 FILE NAME VALUE  the same as a float64 (an attribute of the wrong type)
 *   corpus_tool poke FILE DSET OFFSET VALUE  writes byte VALUE at OFFSET of the uint8 dataset DSET
 *                                         through HDF5 (checksums stay valid: content damage)
 *   corpus_tool chunk-addr FILE DSET      the file offset of DSET's first chunk (for damaging its
 *                                         stored bytes, which Fletcher32 then catches)
 *
 * Errors the reader returns end the program through txl_fatal (one line, exit status 1). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "src/base/error.h"
#include "tests/data/handmade.h"

static void usage(void) {
  fprintf(stderr, "usage: corpus_tool info|attr|dtype|ids|vocab|decode|bpe-encode|spm-model|block|entropy|tokid|check|make|"
                  "make-zipf|make-foreign|make-big-vocab|set-attr|set-attr-f64|poke|chunk-addr|put-spm-model|no-fletcher ...\n");
  exit(2);
}

static long long num(const char *s) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end) {
    fprintf(stderr, "corpus_tool: '%s' is not an integer\n", s);
    exit(2);
  }
  return v;
}

/* escape_high: bytes >= 0x80 as \xHH too (byte corpora: single bytes are not UTF-8) */
static void print_escaped(const char *s, size_t n, int escape_high) {
  for (size_t i = 0; i < n; i++) {
    unsigned char b = (unsigned char)s[i];
    if (b == '\n') fputs("\\n", stdout);
    else if (b == '\r') fputs("\\r", stdout);
    else if (b == '\t') fputs("\\t", stdout);
    else if (b == '\\') fputs("\\\\", stdout);
    else if (b < 0x20 || b == 0x7f || (escape_high && b >= 0x80)) printf("\\x%02X", b);
    else putchar(b);
  }
}

/* root attribute via HDF5 directly (the reader does not expose them all) */
static int print_attr(const char *path, const char *name) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 1;
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  if (a < 0) return 1;
  hid_t t = H5Aget_type(a);
  if (H5Tget_class(t) == H5T_STRING) {
    size_t n = H5Tget_size(t);
    char *buf = calloc(n + 1, 1);
    hid_t m = H5Tcopy(H5T_C_S1);
    H5Tset_size(m, n + 1);
    if (H5Aread(a, m, buf) < 0) return 1;
    printf("%s\n", buf);
    free(buf);
    H5Tclose(m);
  } else {
    long long v;
    if (H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) return 1;
    printf("%lld\n", v);
  }
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  return 0;
}

static int print_dtype(const char *path, const char *split) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = f < 0 ? -1 : H5Dopen2(f, split, H5P_DEFAULT);
  if (d < 0) return 1;
  hid_t t = H5Dget_type(d);
  printf("%s%d\n", H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int", (int)H5Tget_size(t) * 8);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(f);
  return 0;
}

/* Root attribute `name` of the file as one value of file type `type` (written from *v of memory type `mem`). */
static int set_attr_typed(const char *path, const char *name, hid_t type, hid_t mem, const void *v) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 1;
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (a >= 0 && H5Awrite(a, mem, v) >= 0) ? 0 : 1;
  H5Aclose(a);
  H5Sclose(s);
  return (H5Fclose(f) < 0) | rc;
}

static int set_attr(const char *path, const char *name, long long v) {
  return set_attr_typed(path, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &v);
}

static int poke(const char *path, const char *dset, long long offset, long long value) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = f < 0 ? -1 : H5Dopen2(f, dset, H5P_DEFAULT);
  if (d < 0) return 1;
  hsize_t start = (hsize_t)offset, one = 1;
  unsigned char b = (unsigned char)value;
  hid_t fsp = H5Dget_space(d), msp = H5Screate_simple(1, &one, NULL);
  int rc = H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &start, NULL, &one, NULL) < 0 ||
           H5Dwrite(d, H5T_NATIVE_UCHAR, msp, fsp, H5P_DEFAULT, &b) < 0;
  H5Sclose(msp);
  H5Sclose(fsp);
  H5Dclose(d);
  return (H5Fclose(f) < 0) | rc;
}

static int chunk_addr(const char *path, const char *dset) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = f < 0 ? -1 : H5Dopen2(f, dset, H5P_DEFAULT);
  if (d < 0) return 1;
  hsize_t off = 0, size = 0;
  haddr_t addr = 0;
  unsigned mask = 0;
  hid_t fsp = H5Dget_space(d);
  int rc = fsp < 0 || H5Dget_chunk_info(d, fsp, 0, &off, &mask, &addr, &size) < 0;
  if (!rc) printf("%llu\n", (unsigned long long)addr);
  if (fsp >= 0) H5Sclose(fsp);
  H5Dclose(d);
  H5Fclose(f);
  return rc;
}

static int spm_model(const char *path, const char *out) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = f < 0 ? -1 : H5Dopen2(f, "spm_model", H5P_DEFAULT);
  if (d < 0) return 1;
  hid_t sp = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(sp, &n, NULL);
  unsigned char *b = malloc(n ? n : 1);
  FILE *o = fopen(out, "wb");
  int rc = !b || !o || H5Dread(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0 ||
           fwrite(b, 1, n, o) != n;
  if (o && fclose(o) != 0) rc = 1;
  free(b);
  H5Sclose(sp);
  H5Dclose(d);
  H5Fclose(f);
  return rc;
}

static int put_spm_model(const char *path, const char *model) {
  FILE *m = fopen(model, "rb");
  if (!m) return 1;
  unsigned char *b = malloc(1 << 24);
  const size_t n = b ? fread(b, 1, 1 << 24, m) : 0;
  fclose(m);
  hid_t f = n > 0 ? H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT) : -1;
  if (f < 0) {
    free(b);
    return 1;
  }
  int rc = H5Ldelete(f, "spm_model", H5P_DEFAULT) < 0;
  hsize_t dim = n, chunk = n < 65536 ? n : 65536;
  hid_t sp = H5Screate_simple(1, &dim, NULL), p = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(p, 1, &chunk);
  H5Pset_fletcher32(p);
  hid_t d = H5Dcreate2(f, "spm_model", H5T_STD_U8LE, sp, H5P_DEFAULT, p, H5P_DEFAULT);
  rc |= d < 0 || H5Dwrite(d, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0;
  H5Dclose(d);
  H5Pclose(p);
  H5Sclose(sp);
  free(b);
  return (H5Fclose(f) < 0) | rc;
}

/* Rewrites the integer dataset `name` with its values, chunked but without Fletcher32 (a file
 * that breaks FORMAT.md's rule that every dataset has the checksum). */
static int no_fletcher(const char *path, const char *name) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t d = f < 0 ? -1 : H5Dopen2(f, name, H5P_DEFAULT);
  hid_t sp = d < 0 ? -1 : H5Dget_space(d), t = d < 0 ? -1 : H5Dget_type(d);
  hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
  size_t size = t < 0 ? 0 : H5Tget_size(t);
  unsigned char *b = n > 0 && size ? malloc((size_t)n * size) : NULL;
  int rc = !b || H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0;
  if (d >= 0) H5Dclose(d);
  if (!rc) {
    hsize_t chunk = (hsize_t)n < 65536 ? (hsize_t)n : 65536;
    hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(p, 1, &chunk);
    rc = H5Ldelete(f, name, H5P_DEFAULT) < 0;
    hid_t nd = H5Dcreate2(f, name, t, sp, H5P_DEFAULT, p, H5P_DEFAULT);
    rc |= nd < 0 || H5Dwrite(nd, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0;
    if (nd >= 0) H5Dclose(nd);
    H5Pclose(p);
  }
  free(b);
  if (t >= 0) H5Tclose(t);
  if (sp >= 0) H5Sclose(sp);
  return (f < 0 || H5Fclose(f) < 0) | rc;
}

/* decode of an spm corpus: each line's ids through the stored model, <eos> a line end */
static void decode_spm(TxlCorpus *c, const char *split) {
  char err[1024];
  const int64_t len = txl_corpus_split_length(c, split), eos = txl_corpus_eos_id(c);
  int32_t *ids = malloc((size_t)(len > 0 ? len : 1) * sizeof *ids);
  if (!ids) txl_fatal("out of memory");
  if (len > 0 && txl_corpus_read_range(c, split, 0, len, ids, err, sizeof err) != 0) txl_fatal("%s", err);
  for (int64_t start = 0, i = 0; i <= len; i++) {
    if (i < len && ids[i] != eos) continue;
    char *text;
    size_t n;
    if (txl_corpus_spm_decode_line(c, ids + start, i - start, &text, &n, err, sizeof err) != 0) txl_fatal("%s", err);
    fwrite(text, 1, n, stdout);
    if (i < len) putchar('\n');
    free(text);
    start = i + 1;
  }
  free(ids);
}

/* Replaces the vocabulary offsets of a 50-token corpus by a dataset of vocab + 1 entries whose
 * first 51 are the real ones and whose other chunks are never written, and sets vocab_size. */
static int big_vocab(const char *path, long long vocab) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 1;
  int64_t off[51];
  hid_t d = H5Dopen2(f, "vocab_offsets", H5P_DEFAULT);
  int rc = d < 0 || H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, off) < 0;
  H5Dclose(d);
  rc |= H5Ldelete(f, "vocab_offsets", H5P_DEFAULT) < 0;
  hsize_t dim = (hsize_t)vocab + 1, chunk = 1 << 16, n = 51, start = 0;
  hid_t sp = H5Screate_simple(1, &dim, NULL), msp = H5Screate_simple(1, &n, NULL);
  hid_t p = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(p, 1, &chunk);
  H5Pset_fletcher32(p);
  d = H5Dcreate2(f, "vocab_offsets", H5T_STD_I64LE, sp, H5P_DEFAULT, p, H5P_DEFAULT);
  rc |= d < 0 || H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &n, NULL) < 0 ||
        H5Dwrite(d, H5T_NATIVE_INT64, msp, sp, H5P_DEFAULT, off) < 0;
  H5Dclose(d);
  H5Pclose(p);
  H5Sclose(msp);
  H5Sclose(sp);
  rc |= H5Fclose(f) < 0;
  return rc || set_attr(path, "vocab_size", vocab);
}

int main(int argc, char **argv) {
  if (argc < 3) usage();
  const char *cmd = argv[1], *path = argv[2];

  if (!strcmp(cmd, "make")) {
    if (argc < 5) usage();
    int64_t n = num(argv[3]);
    int64_t len[3] = {n, n / 2 + 1, n / 3 + 2};
    int64_t bad = argc > 5 ? num(argv[5]) : -1;
    if (handmade_corpus(path, len, num(argv[4]), 2, 97, bad) != 0) {
      fprintf(stderr, "corpus_tool: cannot write %s\n", path);
      return 1;
    }
    return 0;
  }
  if (!strcmp(cmd, "make-zipf")) {
    if (argc < 8) usage();
    const int64_t len[3] = {num(argv[3]), num(argv[4]), num(argv[5])};
    if (handmade_zipf_corpus(path, len, num(argv[6]), (uint32_t)num(argv[7])) != 0) {
      fprintf(stderr, "corpus_tool: cannot write %s\n", path);
      return 1;
    }
    return 0;
  }
  if (!strcmp(cmd, "make-foreign")) return handmade_foreign(path) != 0;
  if (!strcmp(cmd, "make-big-vocab")) {
    if (argc < 4) usage();
    const int64_t len[3] = {1000, 501, 335};
    if (handmade_corpus(path, len, 50, 2, 97, -1) != 0 || big_vocab(path, num(argv[3])) != 0) {
      fprintf(stderr, "corpus_tool: cannot write %s\n", path);
      return 1;
    }
    return 0;
  }
  if (!strcmp(cmd, "dtype")) {
    if (argc < 4) usage();
    return print_dtype(path, argv[3]);
  }
  if (!strcmp(cmd, "set-attr")) {
    if (argc < 5) usage();
    return set_attr(path, argv[3], num(argv[4]));
  }
  if (!strcmp(cmd, "set-attr-f64")) {
    if (argc < 5) usage();
    const double v = strtod(argv[4], NULL);
    return set_attr_typed(path, argv[3], H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
  }
  if (!strcmp(cmd, "attr")) {
    if (argc < 4) usage();
    return print_attr(path, argv[3]);
  }
  if (!strcmp(cmd, "poke")) {
    if (argc < 6) usage();
    return poke(path, argv[3], num(argv[4]), num(argv[5]));
  }
  if (!strcmp(cmd, "chunk-addr")) {
    if (argc < 4) usage();
    return chunk_addr(path, argv[3]);
  }
  if (!strcmp(cmd, "put-spm-model")) {
    if (argc < 4) usage();
    return put_spm_model(path, argv[3]);
  }
  if (!strcmp(cmd, "no-fletcher")) {
    if (argc < 4) usage();
    return no_fletcher(path, argv[3]);
  }
  if (!strcmp(cmd, "spm-model")) {
    if (argc < 4) usage();
    return spm_model(path, argv[3]);
  }

  char err[1024];
  TxlCorpus *c = txl_corpus_open(path, err, sizeof err);
  if (!c) txl_fatal("%s", err);
  if (!strcmp(cmd, "info")) {
    printf("mode %s\nvocab_size %lld\neos_id %lld\nunk_id %lld\n", txl_corpus_mode(c),
           (long long)txl_corpus_vocab_size(c), (long long)txl_corpus_eos_id(c),
           (long long)txl_corpus_unk_id(c));
    const char *sp[3] = {"train", "valid", "test"};
    for (int k = 0; k < 3; k++) printf("%s %lld\n", sp[k], (long long)txl_corpus_split_length(c, sp[k]));
  } else if (!strcmp(cmd, "vocab")) {
    int byte_mode = !strcmp(txl_corpus_mode(c), "byte");
    if (txl_corpus_load_vocab(c, err, sizeof err) != 0) txl_fatal("%s", err);
    for (int64_t v = 0; v < txl_corpus_vocab_size(c); v++) {
      size_t n;
      const char *s = txl_corpus_token_bytes(c, v, &n);
      print_escaped(s, n, byte_mode);
      putchar('\n');
    }
  } else if (!strcmp(cmd, "decode") && !strcmp(txl_corpus_mode(c), "spm")) {
    if (argc < 4) usage();
    decode_spm(c, argv[3]);
  } else if (!strcmp(cmd, "ids") || !strcmp(cmd, "decode")) {
    if (argc < 4) usage();
    const char *split = argv[3];
    int64_t len = txl_corpus_split_length(c, split), step = 1 << 16;
    int32_t *buf = malloc((size_t)step * sizeof *buf);
    int word = !strcmp(txl_corpus_mode(c), "word");
    int64_t eos = txl_corpus_eos_id(c);
    int at_line_start = 1;
    for (int64_t s = 0; s < len; s += step) {
      int64_t n = len - s < step ? len - s : step;
      if (txl_corpus_read_range(c, split, s, n, buf, err, sizeof err) != 0) txl_fatal("%s", err);
      for (int64_t i = 0; i < n; i++) {
        if (!strcmp(cmd, "ids")) {
          printf("%d\n", buf[i]);
          continue;
        }
        size_t bl;
        const char *b = txl_corpus_token_bytes(c, buf[i], &bl);
        if (word && buf[i] == eos) {
          putchar('\n');
          at_line_start = 1;
          continue;
        }
        if (word && !at_line_start) putchar(' ');
        fwrite(b, 1, bl, stdout);
        at_line_start = 0;
      }
    }
    free(buf);
  } else if (!strcmp(cmd, "block")) {
    if (argc < 9) usage();
    int64_t col_len = num(argv[4]), col_first = num(argv[5]), offset = num(argv[7]);
    int n_cols = (int)num(argv[6]), n_rows = (int)num(argv[8]);
    int32_t *out = malloc((size_t)(n_cols > 0 ? n_cols : 1) * (size_t)(n_rows > 0 ? n_rows : 1) * 4);
    if (txl_corpus_read_block(c, argv[3], col_len, col_first, n_cols, offset, n_rows, out, NULL, err,
                              sizeof err) != 0)
      txl_fatal("%s", err);
    for (int i = 0; i < n_rows; i++) {
      for (int j = 0; j < n_cols; j++) printf(j ? " %d" : "%d", out[i * n_cols + j]);
      putchar('\n');
    }
    free(out);
  } else if (!strcmp(cmd, "entropy")) {
    if (argc < 4) usage();
    double bits;
    if (txl_corpus_unigram_entropy_bits(c, argv[3], &bits, err, sizeof err) != 0) txl_fatal("%s", err);
    printf("%.12f\n", bits);
  } else if (!strcmp(cmd, "bpe-encode")) { /* bpe-encode CORPUS TEXTFILE: the ids of the file's bytes */
    if (argc < 4) usage();
    FILE *f = fopen(argv[3], "rb");
    if (!f) txl_fatal("%s: cannot open", argv[3]);
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + n, 1, cap - n, f)) > 0;)
      if ((n += got) == cap) text = realloc(text, cap *= 2);
    fclose(f);
    if (!text) txl_fatal("out of memory");
    int32_t *ids;
    int64_t m;
    if (txl_corpus_bpe_encode(c, text, n, &ids, &m, err, sizeof err) != 0) txl_fatal("%s", err);
    for (int64_t i = 0; i < m; i++) printf("%d\n", ids[i]);
    free(ids);
    free(text);
  } else if (!strcmp(cmd, "tokid")) {
    if (argc < 4) usage();
    printf("%lld\n", (long long)txl_corpus_token_id(c, argv[3]));
  } else if (!strcmp(cmd, "check")) {
    if (argc < 4) usage();
    const int parts = (int)num(argv[3]);
    for (int p = 0; p < parts; p++) {
      int64_t tokens = 0;
      if (txl_corpus_check(c, p, parts, &tokens, err, sizeof err) != 0) txl_fatal("%s", err);
      printf("part %d: %lld tokens\n", p, (long long)tokens);
    }
  } else {
    usage();
  }
  txl_corpus_close(c);
  return 0;
}
