/* Sampling text from a model. With memory (the Transformer-XL way) the prompt primes the
 * memory and every new token costs one query row attending to the remembered rows; the
 * recompute mode re-runs the model over the last `window` tokens for every new token, as a
 * model without recurrence must (the baseline of the paper's evaluation-speed claim). */
#ifndef TXL_TRAIN_GENERATE_H
#define TXL_TRAIN_GENERATE_H

#include <stdint.h>
#include <stdio.h>

#include "data/corpus.h"
#include "src/model/model.h"

typedef struct {
  const char *prompt; /* "" : start of a line (<eos> for words and subwords, a newline for characters) */
  int length;         /* tokens to generate */
  double temperature; /* softmax(logits / temperature) */
  int top_k;          /* keep the k most likely tokens; 0: all */
  double top_p;       /* keep the smallest set whose probability reaches top_p; 1: all */
  uint32_t seed;      /* the i-th token uses the Philox uniform keyed by (seed, i) */
  int tgt_len;        /* rows per forward pass while priming with the prompt */
  int mem_len;        /* memory rows (memory mode; >= 1) */
  int clamp_len;      /* <= 0: none */
  int window;         /* 0: memory mode; > 0: recompute the last `window` tokens for every token */
} TxlGenOptions;

/* Writes the prompt then the generated text to out (NULL: nothing written) and returns the
 * seconds spent generating after the prompt. ids_out (may be NULL) gets the generated ids
 * ([length]). Serial: one rank. */
double txl_generate(TxlModel *m, TxlCorpus *c, const TxlGenOptions *o, FILE *out, int32_t *ids_out);

#endif
