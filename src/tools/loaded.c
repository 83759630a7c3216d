#include "src/tools/loaded.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/tools/options.h"
#include "src/tools/target.h"
#include "data/stream.h"
#include "src/train/trainer.h"

enum { OPT_DEVICE, OPT_PRECISION, OPT_THREADS, N_DEVICE_OPTS };
static const TxlToolOption DEVICE_OPTS[N_DEVICE_OPTS] = {
    [OPT_DEVICE] = {"--device", "cpu|cuda|auto", "run.device", NULL, "where to compute (default: run.device of the checkpoint)"},
    [OPT_PRECISION] = {"--precision", "P", "run.precision", NULL,
                       "fp32|tf32|bf16|fp16, as run.precision (default: the checkpoint's; fp32 with\n"
                       "--device cpu, which computes in fp32)"},
    [OPT_THREADS] = {"--threads", "N", "run.threads", NULL,
                     "CPU threads per rank, as run.threads (default: the checkpoint's)"},
};

int txl_device_option(TxlDeviceOptions *o, const char *a, const char *v) {
  const int k = txl_tool_option_find(DEVICE_OPTS, N_DEVICE_OPTS, a);
  if (k < 0) return 0;
  const char *value = txl_key_option(a, v, DEVICE_OPTS[k].key);
  switch (k) {
    case OPT_DEVICE: o->device = value; break;
    case OPT_PRECISION: o->precision = value; break;
    case OPT_THREADS: o->threads = value; break;
  }
  return 1;
}

void txl_loaded_options_help(FILE *f, const TxlToolOption *opts, int n) {
  txl_tool_options_help(f, opts, n, 24);
  txl_tool_options_help(f, DEVICE_OPTS, N_DEVICE_OPTS, 24);
  fprintf(f, "  -h, --help            this text\n");
}

void txl_device_options_apply(const TxlDeviceOptions *o, TxlConfig *c) {
  if (o->threads) txl_key_option_apply(c, "--threads", o->threads, "run.threads");
  if (o->device) txl_key_option_apply(c, "--device", o->device, "run.device");
  /* a model trained in bf16 or fp16 on a GPU is evaluated on the CPU in fp32 (all the CPU computes in) */
  if (o->precision)
    txl_key_option_apply(c, "--precision", o->precision, "run.precision");
  else if (c->device == TXL_DEVICE_CPU)
    c->precision = TXL_PRECISION_FP32;
}

/* One line for the user on the tool's notice stream (rank 0's; NULL on the others). */
static void print_notice(const TxlLoaded *ld, const char *line) {
  if (!line[0] || !ld->notices) return;
  fprintf(ld->notices, "checkpoint: %s\n", line);
  fflush(ld->notices);
}

void txl_loaded_config(TxlLoaded *ld, const char *target, int best, FILE *notices) {
  memset(ld, 0, sizeof *ld);
  ld->notices = notices;
  char err[2048];
  txl_tool_checkpoint(target, best, ld->path, sizeof ld->path, notices);
  char *text = NULL;
  if (txl_ckpt_peek(ld->path, &text, &ld->st, err, sizeof err) != 0) txl_fatal_all("%s", err);
  txl_config_defaults(&ld->cfg);
  if (txl_config_load_ini_text(&ld->cfg, text, ld->path, err, sizeof err) != 0)
    txl_fatal_all("%s: its config does not parse: %s", ld->path, err);
  free(text);
}

void txl_loaded_open(TxlLoaded *ld, const TxlDist *dist) {
  TxlConfig *c = &ld->cfg;
  char err[1024];
  char device_note[400];
  const int said = txl_config_resolve_device(c, dist, device_note, sizeof device_note); /* --device auto */
  if (said == 1 && dist->rank == 0) fprintf(stderr, "%s\n", device_note);
  const TxlDeviceSpec device_spec = txl_device_spec_of(c);
  txl_backend_open(&ld->backend, &device_spec, dist, 0);
  ld->corpus = txl_stream_corpus_open(c->corpus);
  txl_stream_corpus_check(ld->corpus, dist->rank, dist->world, 0); /* the vocabulary; the split is checked as read */
  const int64_t V = txl_corpus_vocab_size(ld->corpus);
  if (c->n_token != V)
    txl_fatal_all("%s: vocabulary of %lld tokens, but the checkpoint's model has %d", c->corpus, (long long)V,
                  c->n_token);
  char msg[2048];
  const int vocab = txl_ckpt_check_vocab(ld->path, &ld->st, c->corpus, txl_corpus_vocab_digest(ld->corpus), msg,
                                         sizeof msg);
  if (vocab < 0) txl_fatal_all("%s", msg);
  if (vocab > 0) print_notice(ld, msg);
  TxlModelSpec spec;
  txl_model_spec_from_config(c, (int)V, &spec);
  txl_model_create(&ld->model, ld->backend.ops, &spec);
  const size_t bytes = (size_t)ld->model.table.total * sizeof(float);
  float *host = txl_calloc(bytes, 1, "checkpoint parameters"); /* the padding stays zero */
  if (txl_ckpt_read_params(ld->path, &ld->model.table, c->n_layer, c->d_model, host, NULL, err, sizeof err) != 0)
    txl_fatal_all("%s", err);
  txl_model_set_params(&ld->model, host);
  free(host);
}

void txl_loaded_close(TxlLoaded *ld) {
  txl_model_destroy(&ld->model);
  if (ld->corpus) txl_corpus_close(ld->corpus);
  ld->corpus = NULL;
  txl_backend_close(&ld->backend);
}
