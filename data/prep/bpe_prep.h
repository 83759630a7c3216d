/* txl-prep --mode bpe (data/FORMAT.md, docs/bpe.md): a byte-level BPE tokenizer read from a
 * Hugging Face tokenizer.json or from a GPT-2 vocab.json + merges.txt, its tokens turned into
 * their bytes (GPT-2's byte-to-unicode map undone; added tokens as their UTF-8), and the encoder
 * (data/bpe.h) built from them. Every problem ends the program with one line naming the file. */
#ifndef TXL_DATA_PREP_BPE_PREP_H
#define TXL_DATA_PREP_BPE_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "data/bpe.h"

typedef struct {
  int64_t size;        /* the vocabulary: ids 0 .. size - 1 */
  char **tok;          /* [size] each token's bytes */
  size_t *tok_len;     /* [size] */
  int32_t *merges;     /* [2 * n_merges] the ids (a, b) of each merge, in rank order */
  int64_t n_merges;
  int64_t *special;    /* [n_special] the ids of the added tokens (matched literally) */
  int64_t n_special;
  int prefix_space;    /* ByteLevel's add_prefix_space */
  int use_regex;       /* ByteLevel's use_regex */
  int64_t eos_id;      /* the id of <|endoftext|>, -1 when there is none */
  TxlBpe *bpe;
} BpePrep;

/* A Hugging Face tokenizer.json (model BPE, pre-tokenizer ByteLevel, no normalizer). */
void bpe_prep_load_tokenizer(BpePrep *b, const char *path);
/* A GPT-2 vocab.json and merges.txt (no added tokens; add_prefix_space as given). */
void bpe_prep_load_files(BpePrep *b, const char *vocab_path, const char *merges_path, int prefix_space);
void bpe_prep_free(BpePrep *b);

#endif
