/* Training a SentencePiece model (libsentencepiece_train) for txl-prep --mode spm, behind a C
 * interface. The settings that make a model txl can store and decode exactly are fixed here
 * (data/FORMAT.md): no normalization (the "identity" rule) and no removal of extra whitespace, so
 * that decoding gives back every line's bytes; every character of the training text in the
 * vocabulary (character coverage 1.0); one thread, all lines, no sampling or shuffling, a fixed
 * random seed, so that the same lines give the same model bytes. */
#ifndef TXL_DATA_PREP_SPM_TRAIN_H
#define TXL_DATA_PREP_SPM_TRAIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The next training sentence: returns 1 with *line (len bytes, no line end) valid until the next
 * call, or 0 after the last. A problem with the input ends the program in the callback. */
typedef int (*TxlSpmNextLine)(void *ctx, const char **line, size_t *len);

/* Trains a model of `type` ("bpe" or "unigram") with vocab_size pieces on the lines that next()
 * gives, into *model (malloc'ed serialized bytes, *model_len of them). Returns 0, or -1 with the
 * reason in err (one line: a vocabulary too large for the text, too small for its characters). */
int txl_spm_train(const char *type, int vocab_size, TxlSpmNextLine next, void *ctx, char **model,
                  size_t *model_len, char *err, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
