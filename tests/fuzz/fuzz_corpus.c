/* Fuzz harness: the corpus reader (data/corpus.c) on a corpus file: open and validate, then what
 * the trainer and the tools do with it: the length of every split, blocks of columns and
 * contiguous ranges of ids, the unigram entropy, every token's bytes looked up back to its id,
 * the vocabulary digest, and for a bpe corpus a text encoded (data/bpe.c) and decoded back.
 *
 * Input: an HDF5 file (starting with HDF5's signature: mutations of txl-prep's output,
 * tests/fuzz/seeds.sh), read as it is; or anything else, a description of a corpus (h5gen.h:
 * each attribute and dataset as in a valid corpus or not, the vocabulary's tokens, the ids),
 * written with plain HDF5 calls first. A damaged byte of a real file mostly stops at HDF5's
 * checksums; described files reach the reader's own checks.
 *
 * The reader returns its errors (NULL or -1 with a one-line message): an exit through txl_fatal
 * is a defect here (FUZZ_EXIT_CRASH), as is a failed read of a file that passed
 * txl_corpus_check. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/h5gen.h"

/* Bounds on the work per input (a damaged header may claim any length; reading 2^40 ids of fill
 * values is slow, not wrong). */
enum { MAX_READ = 1 << 16, MAX_TOKENS = 1 << 12 };

static const char *g_path;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_path = fuzz_path("corpus.h5");
  return 0;
}

/* Blocks of 1 and 2 columns and a range, as the training and evaluation streams read them.
 * `checked`: the corpus passed txl_corpus_check, so every read must succeed. */
static void read_split(TxlCorpus *c, const char *split, int checked) {
  const int64_t len = txl_corpus_split_length(c, split);
  if (len < 1) return;
  const int64_t n = len < MAX_READ ? len : MAX_READ;
  int32_t *ids = fuzz_malloc((size_t)n * sizeof *ids), *scratch = fuzz_malloc((size_t)n * sizeof *ids);
  if (!ids || !scratch) fuzz_fail("out of memory");
  char err[1024];
  const int n_cols = len >= 2 ? 2 : 1;
  const int64_t col_len = len / n_cols;
  const int rows = (int)(col_len < n / n_cols ? col_len : n / n_cols);
  double bits = 0.0;
  int failed = txl_corpus_read_range(c, split, len - n, n, ids, err, sizeof err) != 0;
  failed = failed || txl_corpus_read_block(c, split, col_len, 0, n_cols, col_len - rows, rows, ids, scratch, err,
                                           sizeof err) != 0;
  failed = failed || txl_corpus_read_block(c, split, col_len, n_cols - 1, 1, 0, rows, ids, NULL, err, sizeof err) != 0;
  failed = failed || (len <= MAX_READ && txl_corpus_unigram_entropy_bits(c, split, &bits, err, sizeof err) != 0);
  if (failed && !err[0]) fuzz_fail("a read of split %s failed without a message", split);
  if (failed && checked) fuzz_fail("a read of split %s failed after txl_corpus_check passed: %s", split, err);
  fuzz_free(ids);
  fuzz_free(scratch);
}

static void run(void *arg) {
  (void)arg;
  char err[1024] = "";
  TxlCorpus *c = txl_corpus_open(g_path, err, sizeof err);
  if (!c) {
    if (!err[0]) fuzz_fail("txl_corpus_open failed without a message");
    return;
  }
  const int64_t V = txl_corpus_vocab_size(c);
  (void)txl_corpus_mode(c);
  (void)txl_corpus_eos_id(c);
  (void)txl_corpus_unk_id(c);
  int64_t tokens = 0;
  const int checked = txl_corpus_check(c, 0, 1, &tokens, err, sizeof err) == 0;
  read_split(c, "train", checked);
  read_split(c, "valid", checked);
  read_split(c, "test", checked);
  if (txl_corpus_load_vocab(c, err, sizeof err) != 0) {
    if (checked) fuzz_fail("the vocabulary failed to load after txl_corpus_check passed: %s", err);
    txl_corpus_close(c);
    return;
  }
  for (int64_t id = 0; id < V && id < MAX_TOKENS; id++) {
    size_t len;
    const char *s = txl_corpus_token_bytes(c, id, &len);
    const int64_t back = txl_corpus_token_id_n(c, s, len);
    if (back != id) fuzz_fail("token %" PRId64 " looks up as %" PRId64, id, back);
    (void)txl_corpus_token_string(c, id);
  }
  (void)txl_corpus_token_id(c, "<unk>");
  (void)txl_corpus_token_id_n(c, "\xff\xfe", 2);
  (void)txl_corpus_vocab_digest(c);
  if (!strcmp(txl_corpus_mode(c), "bpe")) { /* a loaded bpe corpus encodes any text, decoding back to it */
    static const char text[] = "It's 12 o'clock  \n\t<|endoftext|>caf\xc3\xa9 \xff\xfe";
    int32_t *ids;
    int64_t n;
    if (txl_corpus_bpe_encode(c, text, sizeof text - 1, &ids, &n, err, sizeof err) != 0)
      fuzz_fail("a bpe corpus whose vocabulary loaded does not encode: %s", err);
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
      size_t len;
      const char *s = txl_corpus_token_bytes(c, ids[i], &len);
      if (len > sizeof text - 1 - at || memcmp(s, text + at, len) != 0) fuzz_fail("bpe ids do not decode to the text");
      at += len;
    }
    if (at != sizeof text - 1) fuzz_fail("bpe ids decode to %zu of %zu bytes", at, sizeof text - 1);
    fuzz_free(ids);
  }
  txl_corpus_close(c);
}

enum { MAX_V = 64, MAX_SPLIT = 4096 };

/* A token of the vocabulary: by default two letters, distinct for every id below 676. */
static size_t token(FuzzIn *in, int64_t i, unsigned char *out) {
  const size_t len = (2 + fuzz_in_byte(in) % 4) % 5; /* 2 by default; 0 (an empty token) is bad */
  for (size_t j = 0; j < len; j++) {
    const unsigned char def = j == 0 ? (unsigned char)('a' + i % 26) : j == 1 ? (unsigned char)('a' + i / 26) : 'x';
    out[j] = def ^ (unsigned char)fuzz_in_byte(in);
  }
  return len;
}

/* Writes the corpus the input describes (h5gen.h) to g_path. Returns 0, or -1 when HDF5 could
 * not write it. */
static int write_described(const uint8_t *data, size_t size) {
  FuzzIn in = {data, size};
  static const char *const modes[] = {"word", "char", "byte"};
  const int64_t V = 1 + (16 + fuzz_in_byte(&in)) % MAX_V; /* 17 by default */
  const unsigned mode = fuzz_in_byte(&in) % 3;
  unsigned char bytes[MAX_V * 4];
  int64_t off[MAX_V + 1], nbytes = 0;
  off[0] = 0;
  for (int64_t i = 0; i < V; i++) {
    nbytes += (int64_t)token(&in, i, bytes + nbytes);
    off[i + 1] = nbytes;
  }
  hid_t f = gen_create(g_path);
  if (f < 0) return -1;
  const Canon format = {.kind = CANON_STRING, .s = TXL_CORPUS_FORMAT},
              version = {.kind = CANON_INT, .type = H5T_STD_I32LE, .i = TXL_CORPUS_FORMAT_VERSION},
              mode_attr = {.kind = CANON_STRING, .s = modes[mode]},
              vocab_size = {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = V},
              eos_id = {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = mode == 0 ? 0 : -1},
              unk_id = {.kind = CANON_INT, .type = H5T_STD_I64LE, .i = -1};
  gen_attr(f, "format", &format, &in);
  gen_attr(f, "format_version", &version, &in);
  gen_attr(f, "mode", &mode_attr, &in);
  gen_attr(f, "vocab_size", &vocab_size, &in);
  gen_attr(f, "eos_id", &eos_id, &in);
  gen_attr(f, "unk_id", &unk_id, &in);
  hsize_t dim = (hsize_t)nbytes;
  int rc = gen_dataset(f, "vocab", H5T_STD_U8LE, 1, &dim, H5T_NATIVE_UCHAR, bytes, &in);
  dim = (hsize_t)V + 1;
  rc |= gen_dataset(f, "vocab_offsets", H5T_STD_I64LE, 1, &dim, H5T_NATIVE_INT64, off, &in);
  static int64_t ids[MAX_SPLIT];
  static const char *const splits[] = {"train", "valid", "test"};
  for (int k = 0; k < 3 && rc == 0; k++) {
    const unsigned lo = fuzz_in_byte(&in), hi = fuzz_in_byte(&in);
    const int64_t n = (64 + lo + 256 * hi) % MAX_SPLIT; /* 64 by default */
    for (int64_t i = 0; i < n; i++) ids[i] = ((i * 7 + k * 3) % V + fuzz_in_byte(&in)) % (V + 1);
    dim = (hsize_t)n;
    rc |= gen_dataset(f, splits[k], H5T_STD_U8LE, 1, &dim, H5T_NATIVE_INT64, ids, &in);
  }
  if (H5Fclose(f) < 0) rc = -1;
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  gen_file_then_run(g_path, data, size, write_described, run);
  return 0;
}
