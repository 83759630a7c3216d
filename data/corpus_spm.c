/* Subword corpora (mode "spm", FORMAT.md): the stored SentencePiece model, the translation between
 * the corpus's ids (by frequency) and the model's, and text <-> ids for generation. */
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/corpus_internal.h"
#include "src/base/error.h"

int corpus_spm_load(TxlCorpus *c, hid_t dset, int64_t n, Err *e) {
  if (n < 1) return corpus_fail(e, "%s: not a valid txl corpus: '/spm_model' is empty", c->path);
  unsigned char *bytes = corpus_alloc(e, c->path, (size_t)n, "the SentencePiece model");
  if (!bytes) return -1;
  if (H5Dread(dset, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0) {
    free(bytes);
    return corpus_fail_h5(e, c->path, "reading '/spm_model' failed (damaged file or checksum mismatch)");
  }
  char why[512];
  c->spm = txl_spm_load(bytes, (size_t)n, why, sizeof why);
  free(bytes);
  if (!c->spm)
    return corpus_fail(e, "%s: not a valid txl corpus: '/spm_model' is no SentencePiece model (%s)", c->path, why);
  if (txl_spm_size(c->spm) != c->vocab_size)
    return corpus_fail(e, "%s: not a valid txl corpus: '/spm_model' has %d pieces but vocab_size = %lld", c->path,
                       txl_spm_size(c->spm), (long long)c->vocab_size);
  return 0;
}

int corpus_spm_map(TxlCorpus *c, Err *e) {
  const int64_t V = c->vocab_size;
  int32_t *spm_of = corpus_alloc(e, c->path, (size_t)V * sizeof *spm_of, "the piece order");
  int32_t *txl_of = spm_of ? corpus_alloc(e, c->path, (size_t)V * sizeof *txl_of, "the piece order") : NULL;
  if (!txl_of) {
    free(spm_of);
    return -1;
  }
  /* the tokens are distinct (build_hash) and as many as the pieces: each a piece makes a bijection */
  for (int64_t i = 0; i < V; i++) {
    const char *s = c->vocab_text + c->vocab_pos[i];
    const size_t len = (size_t)(c->vocab_pos[i + 1] - c->vocab_pos[i] - 1);
    const int sid = txl_spm_piece_id(c->spm, s, len);
    if (sid < 0) {
      free(spm_of);
      free(txl_of);
      return corpus_fail(e, "%s: not a valid txl corpus: token %lld ('%.*s') is no piece of '/spm_model'", c->path,
                         (long long)i, len > 64 ? 64 : (int)len, s);
    }
    spm_of[i] = sid;
    txl_of[sid] = (int32_t)i;
  }
  if (spm_of[c->eos_id] != txl_spm_eos_id(c->spm)) {
    free(spm_of);
    free(txl_of);
    return corpus_fail(e, "%s: not a valid txl corpus: eos_id = %lld is not the end-of-sentence piece of "
                       "'/spm_model'", c->path, (long long)c->eos_id);
  }
  c->spm_of = spm_of;
  c->txl_of = txl_of;
  return 0;
}

void corpus_spm_free(TxlCorpus *c) {
  txl_spm_free(c->spm);
  free(c->spm_of);
  free(c->txl_of);
  c->spm = NULL;
  c->spm_of = c->txl_of = NULL;
}

/* The model and the translation, loaded; the caller's error for another mode. */
static int need_spm(TxlCorpus *c, char *err, size_t cap) {
  if (!c->spm) txl_fatal("%s: a %s corpus has no SentencePiece model (only spm corpora do)", c->path, c->mode);
  return txl_corpus_load_vocab(c, err, cap);
}

int txl_corpus_spm_encode_line(TxlCorpus *c, const char *text, size_t len, int32_t **ids, int64_t *n,
                               char *err, size_t cap) {
  Err e = {err, cap};
  if (need_spm(c, err, cap) != 0) return -1;
  int *sp = NULL;
  size_t sp_cap = 0, m = 0;
  char why[512];
  if (txl_spm_encode(c->spm, text, len, &sp, &sp_cap, &m, why, sizeof why) != 0) {
    free(sp);
    return corpus_fail(&e, "%s: SentencePiece could not encode the text: %s", c->path, why);
  }
  int32_t *out = corpus_alloc(&e, c->path, m * sizeof *out, "the encoded text");
  if (!out) {
    free(sp);
    return -1;
  }
  for (size_t i = 0; i < m; i++) out[i] = c->txl_of[sp[i]];
  free(sp);
  *ids = out;
  *n = (int64_t)m;
  return 0;
}

int txl_corpus_spm_decode_line(TxlCorpus *c, const int32_t *ids, int64_t n, char **text, size_t *len,
                               char *err, size_t cap) {
  Err e = {err, cap};
  if (need_spm(c, err, cap) != 0) return -1;
  int *sp = corpus_alloc(&e, c->path, (size_t)n * sizeof *sp, "the ids to decode");
  if (!sp) return -1;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= c->vocab_size)
      txl_fatal("%s: token id %d is outside the vocabulary [0, %lld)", c->path, ids[i], (long long)c->vocab_size);
    sp[i] = c->spm_of[ids[i]];
  }
  char why[512];
  const int rc = txl_spm_decode(c->spm, sp, (size_t)n, text, len, why, sizeof why);
  free(sp);
  if (rc != 0) return corpus_fail(&e, "%s: SentencePiece could not decode the ids: %s", c->path, why);
  return 0;
}
