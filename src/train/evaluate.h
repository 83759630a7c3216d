/* Evaluation of a model on a corpus split, the way the original evaluates: the split as B
 * contiguous columns (split among the ranks), walked tgt_len rows at a time with the memory of
 * the previous segments; every token of every column scored once. Used by training (validation
 * and test) and by txl-eval. */
#ifndef TXL_TRAIN_EVALUATE_H
#define TXL_TRAIN_EVALUATE_H

#include "data/corpus.h"
#include "dist/dist.h"
#include "src/model/model.h"

typedef struct {
  int tgt_len;     /* rows per segment */
  int mem_len;     /* memory rows (0: none) */
  int clamp_len;   /* <= 0: no clamping */
  int same_length; /* every query sees the same number of keys */
  int batch_size;  /* columns over all ranks (at least the rank count; dist/shard.h splits them) */
  const TxlTailCap *tail; /* this rank's tail targets per segment of the split (src/train/tail_cap.h);
                             NULL: counted here, in the split */
} TxlEvalShape;

/* Mean loss in nats per token over the split (all of it when max_segments < 0); *tokens_out
 * (may be NULL) gets the global number of tokens scored. collective: all ranks */
double txl_evaluate(TxlModel *m, TxlCorpus *c, const char *split, const TxlEvalShape *s, const TxlDist *d,
                    int max_segments, double *tokens_out);

#endif
