/* The corpus's vocabulary (FORMAT.md: /vocab, /vocab_offsets), loaded on first use: id -> token
 * bytes, token -> id through a hash table, and the vocabulary's digest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "data/corpus_internal.h"
#include "data/sha256.h"
#include "src/base/error.h"
#include "src/base/hash.h"

static uint64_t hash_bytes(const char *s, size_t n) {
  const uint64_t h = txl_hash_bytes(s, n); /* FNV-1a, then a final mix */
  return h ^ (h >> 29);
}

/* Reads a whole dataset into buf. Returns 0, or -1 with the message. */
static int read_whole(TxlCorpus *c, const char *name, hid_t memtype, void *buf, Err *e) {
  hid_t d = H5Dopen2(c->file, name, H5P_DEFAULT);
  int rc = 0;
  if (d < 0 || H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) /* the reason before H5Dclose */
    rc = corpus_fail_h5(e, c->path, "reading '/%s' failed (damaged file or checksum mismatch)", name);
  if (d >= 0) H5Dclose(d);
  return rc;
}

/* Reads '/vocab_offsets' into off [V + 1] and checks that the offsets span '/vocab' and
 * increase (no token is empty). Returns 0, or -1 with the message. */
static int read_offsets(TxlCorpus *c, int64_t *off, Err *e) {
  const int64_t V = c->vocab_size;
  if (read_whole(c, "vocab_offsets", H5T_NATIVE_INT64, off, e) != 0) return -1;
  if (off[0] != 0 || off[V] != c->vocab_bytes)
    return corpus_fail(e, "%s: not a valid txl corpus: '/vocab_offsets' does not span '/vocab' "
                "(first %lld, last %lld, vocab bytes %lld)", c->path, (long long)off[0],
                (long long)off[V], (long long)c->vocab_bytes);
  for (int64_t i = 0; i < V; i++)
    if (off[i + 1] <= off[i])
      return corpus_fail(e, "%s: not a valid txl corpus: '/vocab_offsets' is not increasing at token %lld",
                  c->path, (long long)i);
  return 0;
}

/* The table of ids by string (open addressing, 2 to 4 slots per token); a token that occurs
 * twice is an error. Returns 0, or -1 with the message. */
static int build_hash(TxlCorpus *c, Err *e) {
  const int64_t V = c->vocab_size;
  const char *text = c->vocab_text;
  const int64_t *pos = c->vocab_pos;
  uint64_t size = 16;
  while (size < 2 * (uint64_t)V) size <<= 1; /* V <= 2^31 - 1: at most 2^32 slots */
  int64_t *hash = corpus_alloc(e, c->path, size * sizeof *hash, "the vocabulary's hash table");
  if (!hash) return -1;
  for (uint64_t i = 0; i < size; i++) hash[i] = -1;
  for (int64_t i = 0; i < V; i++) {
    size_t len = (size_t)(pos[i + 1] - pos[i] - 1);
    uint64_t h = hash_bytes(text + pos[i], len) & (size - 1);
    while (hash[h] >= 0) {
      int64_t o = hash[h];
      if ((size_t)(pos[o + 1] - pos[o] - 1) == len && memcmp(text + pos[o], text + pos[i], len) == 0) {
        free(hash);
        return corpus_fail(e, "%s: not a valid txl corpus: token %lld repeats token %lld in the vocabulary",
                    c->path, (long long)i, (long long)o);
      }
      h = (h + 1) & (size - 1);
    }
    hash[h] = i;
  }
  c->hash = hash;
  c->hash_mask = size - 1;
  return 0;
}

/* Loads the vocabulary into c (vocab_text, vocab_pos, hash). Every size here comes from the
 * file: vocab_size <= 2^31 - 1 and vocab_bytes <= 2^63 - 1 (checked at open, each backed by the
 * stored bytes), and their sum is checked before it sizes an allocation. Returns 0, or -1. */
static int load_vocab(TxlCorpus *c, Err *e) {
  const int64_t V = c->vocab_size, nb = c->vocab_bytes;
  if (nb > INT64_MAX - V)
    return corpus_fail(e, "%s: not a valid txl corpus: '/vocab' holds %lld bytes, too many for this machine",
                c->path, (long long)nb);
  int64_t *off = corpus_alloc(e, c->path, (size_t)(V + 1) * sizeof *off, "the vocabulary offsets");
  int rc = off ? read_offsets(c, off, e) : -1;
  unsigned char *bytes = rc == 0 ? corpus_alloc(e, c->path, (size_t)nb, "the vocabulary") : NULL;
  char *text = bytes ? corpus_alloc(e, c->path, (size_t)(nb + V), "the vocabulary strings") : NULL;
  int64_t *pos = text ? corpus_alloc(e, c->path, (size_t)(V + 1) * sizeof *pos, "the vocabulary positions") : NULL;
  if (!pos) rc = -1;
  if (rc == 0 && nb > 0) rc = read_whole(c, "vocab", H5T_NATIVE_UCHAR, bytes, e);
  if (rc == 0) {
    int64_t p = 0;
    for (int64_t i = 0; i < V; i++) {
      pos[i] = p;
      memcpy(text + p, bytes + off[i], (size_t)(off[i + 1] - off[i]));
      p += off[i + 1] - off[i];
      text[p++] = '\0';
    }
    pos[V] = p;
    c->vocab_text = text;
    c->vocab_pos = pos;
    rc = build_hash(c, e);
    if (rc == 0 && ((c->spm && corpus_spm_map(c, e) != 0) || (!strcmp(c->mode, "bpe") && corpus_bpe_build(c, e) != 0))) {
      free(c->hash);
      c->hash = NULL;
      rc = -1;
    }
  }
  free(bytes);
  free(off);
  if (rc != 0) {
    free(text);
    free(pos);
    c->vocab_text = NULL;
    c->vocab_pos = NULL;
  }
  return rc;
}

int txl_corpus_load_vocab(TxlCorpus *c, char *err, size_t cap) {
  if (c->vocab_text) return 0;
  Err e = {err, cap};
  H5Quiet q;
  corpus_h5_quiet(&q);
  int rc = load_vocab(c, &e);
  corpus_h5_restore(&q);
  return rc;
}

/* The vocabulary for the accessors below, which have no error to return: a failure to load it
 * ends the program (callers that must agree load it first with txl_corpus_load_vocab). */
static void need_vocab(TxlCorpus *c) {
  char err[1024];
  if (txl_corpus_load_vocab(c, err, sizeof err) != 0) txl_fatal("%s", err);
}

const char *txl_corpus_token_bytes(TxlCorpus *c, int64_t id, size_t *len) {
  need_vocab(c);
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
  need_vocab(c);
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
  need_vocab(c);
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

