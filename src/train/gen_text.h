/* The text side of generation (src/train/generate.c): a prompt as the corpus's token ids, and the
 * ids as text on a stream, by the corpus's mode: whitespace-separated words with <eos> a line end
 * (word); characters or bytes (char, byte); or subwords, each line encoded and decoded by the
 * corpus's SentencePiece model (spm: a line is printed when its <eos> comes, or at the end, since
 * SentencePiece decodes a whole sequence: spaces restored, a character split over pieces joined);
 * or byte-level BPE tokens, each printed as its bytes (bpe: decoding is their concatenation). */
#ifndef TXL_TRAIN_GEN_TEXT_H
#define TXL_TRAIN_GEN_TEXT_H

#include <stdint.h>
#include <stdio.h>

#include "data/corpus.h"

/* The prompt's token ids into ids[cap] (more is an error); "" gives the start of a line (<eos>
 * for words and subwords, a newline for characters). spm: each line of the prompt ("\n" ends one)
 * is encoded and all but the last ended by <eos>. bpe: the whole prompt is one text, encoded as
 * txl-prep encodes a file ("" gives <|endoftext|>, or the newline token without one). Returns the count (>= 1). Text outside the
 * vocabulary is a one-line error (word mode maps it to <unk> when the corpus has one; spm to the
 * model's unknown piece). */
int txl_gen_prompt_ids(TxlCorpus *c, const char *prompt, int32_t *ids, int cap);

typedef struct {
  TxlCorpus *c;
  FILE *out;      /* NULL: nothing is printed */
  int mode;       /* how ids become text (gen_text.c) */
  int32_t *line;  /* spm: the ids of the line not printed yet */
  int64_t n, cap;
} TxlGenText;

void txl_gen_text_init(TxlGenText *t, TxlCorpus *c, FILE *out);
/* Prints token id (spm: keeps it until its line is complete). */
void txl_gen_text_put(TxlGenText *t, int32_t id);
/* Prints what is kept (spm: the last, unfinished line) and frees. */
void txl_gen_text_finish(TxlGenText *t);

#endif
