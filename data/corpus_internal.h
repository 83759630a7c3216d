/* What the corpus reader's files (data/corpus.c, data/corpus_vocab.c) share: the open corpus,
 * the error buffer, and their helpers. Nothing else includes it. */
#ifndef TXL_DATA_CORPUS_INTERNAL_H
#define TXL_DATA_CORPUS_INTERNAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "data/corpus.h"
#include "data/bpe.h"
#include "data/spm.h"

enum { N_SPLITS = 3 }; /* train, valid, test */

/* Largest chunk cache a split is given (per split, per rank). */
#define MAX_CACHE_BYTES ((size_t)1 << 30)
/* Elements per read when streaming through a split. */
#define STREAM_ELEMS ((int64_t)1 << 20)
/* Largest vocabulary: ids and the vocabulary size are ints in the trainer (n_token). */
#define MAX_VOCAB_SIZE ((int64_t)INT32_MAX)
/* Longest string attribute read (the corpus's are a few dozen bytes). */
#define MAX_ATTR_STRING 4096

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
  /* mode "spm": the stored SentencePiece model (loaded at open) and, with the vocabulary, the
   * translation of ids: spm_of[txl id] and txl_of[SentencePiece id] */
  TxlSpm *spm;
  int32_t *spm_of, *txl_of;
  /* mode "bpe": the merges [2 * n_merges] and added tokens' ids read at open, ByteLevel's options;
   * the encoder, built with the vocabulary (which checks them against it) */
  int32_t *bpe_merges;
  int64_t bpe_n_merges;
  int64_t *bpe_special;
  int64_t bpe_n_special;
  int bpe_prefix_space, bpe_use_regex;
  TxlBpe *bpe;
};

/* ---- Errors: the caller's buffer ---- */

typedef struct {
  char *buf;
  size_t cap;
} Err;

/* ---- HDF5 error printing: off while the reader runs ---- */

typedef struct {
  H5E_auto2_t fn;
  void *data;
} H5Quiet;

/* Writes the message into the caller's buffer; returns -1 (for `return corpus_fail(...)`). */
int corpus_fail(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "<path>: <message> (HDF5: <reason>)", the reason left out when HDF5 gave none. Returns -1.
 * Call it right after the failed HDF5 call: the next call (a close) clears HDF5's error stack. */
int corpus_fail_h5(Err *e, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* malloc whose failure is an error naming the file (sizes come from the file: no job-ending
 * txl_malloc here). */
void *corpus_alloc(Err *e, const char *path, size_t bytes, const char *what);
void corpus_h5_quiet(H5Quiet *q);
/* mode "spm" (data/corpus_spm.c): reads the open dataset '/spm_model' (n bytes) and loads the
 * model into c->spm, checking that it has vocab_size pieces. Returns 0, or -1 with the message. */
int corpus_spm_load(TxlCorpus *c, hid_t dset, int64_t n, Err *e);
/* mode "spm": with the vocabulary loaded (vocab_text, vocab_pos), the translation of ids; every
 * token must be a piece of the model, eos_id its end-of-sentence piece. Returns 0, or -1. */
int corpus_spm_map(TxlCorpus *c, Err *e);
void corpus_spm_free(TxlCorpus *c);
void corpus_h5_restore(const H5Quiet *q);
/* Opens a 1-D dataset (cols = 0) or a 2-D one of cols columns (*len: its rows), checked: element
 * type (integers of the sign asked and one of `sizes`, a 0-terminated list), Fletcher32, the
 * stored bytes. Returns it, or -1 with the message. */
hid_t corpus_open_dataset(TxlCorpus *c, const char *name, hid_t dapl, int64_t cols, int64_t *len, size_t *type_size,
                          const size_t *sizes, int want_signed, Err *e);
/* mode "bpe" (data/corpus_bpe.c): at open, the attributes bpe_prefix_space and bpe_use_regex and
 * the datasets '/bpe_merges' and '/bpe_special' (read whole). Returns 0, or -1 with the message. */
int corpus_bpe_load(TxlCorpus *c, Err *e);
/* mode "bpe": with the vocabulary loaded, the encoder (data/bpe.h checks every id, the 256 byte
 * tokens and every merge against the vocabulary). Returns 0, or -1 with the message. */
int corpus_bpe_build(TxlCorpus *c, Err *e);
void corpus_bpe_free(TxlCorpus *c);

#endif
