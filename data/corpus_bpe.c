/* Byte-level BPE corpora (mode "bpe", FORMAT.md): the stored merges and added tokens, checked
 * against the vocabulary by the encoder (data/bpe.h), and text -> ids for generation. */
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/corpus_internal.h"
#include "src/base/error.h"

/* Reads the whole open dataset d (n elements) as mem_type into a new buffer. */
static void *read_all(TxlCorpus *c, hid_t d, const char *name, hid_t mem_type, size_t elem, int64_t n, Err *e) {
  void *buf = corpus_alloc(e, c->path, (size_t)n * elem, name);
  if (!buf) return NULL;
  if (n > 0 && H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    corpus_fail_h5(e, c->path, "reading '/%s' failed (damaged file or checksum mismatch)", name);
    free(buf);
    return NULL;
  }
  return buf;
}

int corpus_bpe_load(TxlCorpus *c, Err *e) {
  static const size_t four[] = {4, 0}, eight[] = {8, 0};
  int64_t rows = 0, n = 0;
  hid_t d = corpus_open_dataset(c, "bpe_merges", H5P_DEFAULT, 2, &rows, NULL, four, 1, e);
  if (d < 0) return -1;
  if (rows > INT32_MAX) {
    H5Dclose(d);
    return corpus_fail(e, "%s: not a valid txl corpus: '/bpe_merges' has %lld merges (more than 2^31 - 1)", c->path,
                       (long long)rows);
  }
  c->bpe_merges = read_all(c, d, "bpe_merges", H5T_NATIVE_INT32, 2 * sizeof *c->bpe_merges, rows, e);
  H5Dclose(d);
  if (!c->bpe_merges) return -1;
  c->bpe_n_merges = rows;
  d = corpus_open_dataset(c, "bpe_special", H5P_DEFAULT, 0, &n, NULL, eight, 1, e);
  if (d < 0) return -1;
  c->bpe_special = read_all(c, d, "bpe_special", H5T_NATIVE_INT64, sizeof *c->bpe_special, n, e);
  H5Dclose(d);
  if (!c->bpe_special) return -1;
  c->bpe_n_special = n;
  return 0;
}

static const char *vocab_token(void *ctx, int64_t id, size_t *len) {
  const TxlCorpus *c = ctx;
  *len = (size_t)(c->vocab_pos[id + 1] - c->vocab_pos[id] - 1);
  return c->vocab_text + c->vocab_pos[id];
}

int corpus_bpe_build(TxlCorpus *c, Err *e) {
  char why[512];
  c->bpe = txl_bpe_new(c->vocab_size, vocab_token, c, c->bpe_merges, c->bpe_n_merges, c->bpe_special,
                       c->bpe_n_special, c->bpe_prefix_space, c->bpe_use_regex, why, sizeof why);
  if (!c->bpe) return corpus_fail(e, "%s: not a valid txl corpus: the byte-level BPE: %s", c->path, why);
  return 0;
}

void corpus_bpe_free(TxlCorpus *c) {
  txl_bpe_free(c->bpe);
  free(c->bpe_merges);
  free(c->bpe_special);
  c->bpe = NULL;
  c->bpe_merges = NULL;
  c->bpe_special = NULL;
}

int txl_corpus_bpe_encode(TxlCorpus *c, const char *text, size_t len, int32_t **ids, int64_t *n, char *err,
                          size_t cap) {
  Err e = {err, cap};
  if (strcmp(c->mode, "bpe") != 0) txl_fatal("%s: a %s corpus has no byte-level BPE (only bpe corpora do)", c->path, c->mode);
  if (txl_corpus_load_vocab(c, err, cap) != 0) return -1;
  TxlBpeIds out = {0};
  if (txl_bpe_encode(c->bpe, text, len, &out) != 0) {
    free(out.id);
    return corpus_fail(&e, "%s: out of memory encoding %zu bytes of text", c->path, len);
  }
  *ids = out.id ? out.id : malloc(sizeof **ids);
  if (!*ids) return corpus_fail(&e, "%s: out of memory encoding the text", c->path);
  *n = (int64_t)out.n;
  return 0;
}
