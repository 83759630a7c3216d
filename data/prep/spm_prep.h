/* txl-prep --mode spm (data/FORMAT.md): the SentencePiece model, trained on the training split or
 * read from a .model file; each line encoded into SentencePiece ids; and txl's own numbering of
 * the pieces, by descending count in the training split (ties by SentencePiece id), which the
 * adaptive softmax's cutoffs need. Every failure ends the program with one line naming the file. */
#ifndef TXL_DATA_PREP_SPM_PREP_H
#define TXL_DATA_PREP_SPM_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "data/prep/text.h"
#include "data/spm.h"

typedef struct {
  TxlSpm *spm;
  char *model;        /* the serialized model (stored as /spm_model) */
  size_t model_len;
  const char *source; /* where the model came from, for messages: the training or the .model file */
  int size;           /* pieces: the vocabulary size */
  int eos, unk;       /* SentencePiece ids of the end-of-sentence (txl's end of line) and unknown pieces */
  double train_s;     /* seconds the training took (0 for a given model) */
  int64_t *count;     /* [size] occurrences in the training split, by SentencePiece id */
  int32_t *txl_id;    /* [size] txl id of each SentencePiece id (spm_prep_order) */
  int32_t *spm_id;    /* [size] SentencePiece id of each txl id (spm_prep_order) */
  int *ids;           /* the encoding buffer */
  size_t ids_cap;
} SpmPrep;

/* Trains a model of `type` ("bpe" | "unigram") with `vocab` pieces on the lines of the training
 * file (as the corpus sees them: --lower applied, invalid UTF-8 an error), and gives the SHA-256
 * of the bytes read (the caller checks that the file did not change before its own pass). */
void spm_prep_train(SpmPrep *s, const char *type, int64_t vocab, const char *train_path, int lower,
                    char sha[65]);
/* Reads a serialized model (a .model file of SentencePiece's spm_train, or of txl-prep). */
void spm_prep_load(SpmPrep *s, const char *model_path);
/* The SentencePiece ids of one line's content (no line end) of reader r: *ids, the count
 * returned (valid until the next call). */
size_t spm_prep_encode(SpmPrep *s, const LineReader *r, const unsigned char *line, size_t len,
                       const int **ids);
/* After the counting pass: txl_id and spm_id from count. */
void spm_prep_order(SpmPrep *s);
/* The bytes of the piece with txl id `id` (after spm_prep_order). */
const char *spm_prep_piece(const SpmPrep *s, int64_t id, size_t *len);
void spm_prep_free(SpmPrep *s);

#endif
