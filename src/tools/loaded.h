/* A trained model loaded from a checkpoint, for the tools that use one without training it
 * (txl-eval, txl-generate): the checkpoint's config, its corpus and its parameters. */
#ifndef TXL_TOOLS_LOADED_H
#define TXL_TOOLS_LOADED_H

#include <stdio.h>

#include "data/corpus.h"
#include "dist/dist.h"
#include "src/base/cli.h"
#include "src/checkpoint/checkpoint.h"
#include "src/config/config.h"
#include "src/model/model.h"
#include "src/device/backend.h"

typedef struct {
  char path[1200];  /* the checkpoint file */
  TxlCkptState st;  /* its training state */
  TxlConfig cfg;    /* its config; the caller may override keys before txl_loaded_open */
  TxlCorpus *corpus;
  TxlBackend backend; /* cfg.run.device */
  TxlModel model;
  FILE *notices;      /* where notices go (which file was used, what could not be checked): rank 0's stream, NULL elsewhere */
} TxlLoaded;

/* The options of the tools that load a checkpoint about where it runs: their --help lines, the
 * parsing, and the checkpoint config they override. */
typedef struct {
  const char *device;    /* NULL: the checkpoint's */
  const char *precision; /* NULL: the checkpoint's (fp32 when device is cpu) */
  const char *threads;   /* NULL: the checkpoint's  */
} TxlDeviceOptions;
/* 1 when option a (with value v) is one of them, recorded in o (the caller then skips v); a bad
 * value is a one-line error on every rank. */
int txl_device_option(TxlDeviceOptions *o, const char *a, const char *v);
/* --help's option lines of such a tool: its own options (opts[n]), these, and -h. */
void txl_loaded_options_help(FILE *f, const TxlToolOption *opts, int n);
void txl_device_options_apply(const TxlDeviceOptions *o, TxlConfig *c);

/* Finds the checkpoint (a file, a run folder's newest that opens or with `best` the one its 'best'
 * pointer names, a 'latest' or 'best' pointer's: txl_tool_checkpoint) and reads its config. Notices (an older checkpoint used because latest's is damaged, a version 1 checkpoint
 * whose vocabulary only the size could check) go to `notices`: on rank 0 stdout, or stderr for a
 * tool whose stdout is its product; NULL on the other ranks. collective */
void txl_loaded_config(TxlLoaded *ld, const char *target, int best, FILE *notices);
/* Opens the backend of cfg (device, threads), opens cfg.corpus (its vocabulary must be the model's), builds the model and
 * reads the parameters. collective */
void txl_loaded_open(TxlLoaded *ld, const TxlDist *dist);
void txl_loaded_close(TxlLoaded *ld);

#endif
