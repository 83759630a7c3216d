/* A trained model loaded from a checkpoint, for the tools that use one without training it
 * (txl-eval, txl-generate): the checkpoint's config, its corpus and its parameters. */
#ifndef TXL_TRAIN_LOADED_H
#define TXL_TRAIN_LOADED_H

#include "data/corpus.h"
#include "dist/dist.h"
#include "src/checkpoint/checkpoint.h"
#include "src/config/config.h"
#include "src/model/model.h"
#include "src/train/backend.h"

typedef struct {
  char path[1200];  /* the checkpoint file */
  TxlCkptState st;  /* its training state */
  TxlConfig cfg;    /* its config; the caller may override keys before txl_loaded_open */
  TxlCorpus *corpus;
  TxlBackend backend; /* cfg.run.device */
  TxlModel model;
} TxlLoaded;

/* Finds the checkpoint (a file, or a run folder's newest) and reads its config. collective */
void txl_loaded_config(TxlLoaded *ld, const char *target);
/* Opens the backend of cfg (device, threads), opens cfg.corpus (its vocabulary must be the model's), builds the model and
 * reads the parameters. collective */
void txl_loaded_open(TxlLoaded *ld, const TxlDist *dist);
void txl_loaded_close(TxlLoaded *ld);

#endif
