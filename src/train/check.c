#include "src/train/check.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/corpus.h"
#include "dist/shard.h"
#include "src/base/error.h"
#include "src/base/show.h"
#include "src/device/backend.h"
#include "src/train/estimate.h"
#include "src/train/report.h"
#include "src/train/tail_cap.h"
#include "src/train/config_map.h"
#include "data/stream.h"

/* The vocabulary size: the corpus's when the file is here (its splits checked against the
 * columns, its vocabulary and every chunk of every split read as txl-train does at start; *out
 * the open corpus), else data.n_token (*out NULL). */
static int vocabulary(TxlConfig *c, const char *config_path, TxlCorpus **out) {
  *out = NULL;
  if (*c->corpus && access(c->corpus, F_OK) == 0) {
    char err[1024];
    int64_t tokens = 0;
    TxlCorpus *corpus = txl_corpus_open(c->corpus, err, sizeof err);
    if (!corpus || txl_corpus_check(corpus, 0, 1, &tokens, err, sizeof err) != 0) txl_fatal_all("%s", err);
    const int64_t v = txl_corpus_vocab_size(corpus);
    if (c->n_token > 0 && c->n_token != v)
      txl_fatal_all("%s: vocabulary of %lld tokens, but data.n_token = %d", c->corpus, (long long)v, c->n_token);
    txl_stream_check_length(corpus, "train", c->batch_size, c->tgt_len);
    txl_stream_check_length(corpus, "valid", c->eval_batch_size, 1);
    txl_stream_check_length(corpus, "test", c->eval_batch_size, 1);
    printf("corpus: %s (%s level, vocabulary %lld): %lld tokens intact, the splits hold the columns\n", c->corpus,
           txl_corpus_mode(corpus), (long long)v, (long long)tokens);
    *out = corpus;
    return (int)v;
  }
  char origin[4200];
  if (c->n_token <= 0)
    txl_fatal_all("%s: data.corpus = '%s' is not here; give the vocabulary size (--set data.n_token=N) to check "
                  "without it%s", config_path, c->corpus, txl_show_path_origin(origin, sizeof origin, c->corpus));
  printf("corpus: %s is not here: vocabulary %d from data.n_token (the splits are checked at start)\n",
         *c->corpus ? c->corpus : "none", c->n_token);
  return c->n_token;
}

/* "8" or "7 or 8": the columns of a rank. */
static void shard_text(int B, int P, char *out, size_t n) {
  if (B % P == 0) snprintf(out, n, "%d", B / P);
  else snprintf(out, n, "%d or %d", B / P, txl_shard_max(B, P));
}

void txl_check_run(const TxlConfig *cfg, const char *config_path, int ranks) {
  TxlConfig c = *cfg;
  char err[1024];
  if (txl_config_validate(&c, ranks, err, sizeof err) != 0) txl_fatal_all("%s", err);
  const TxlDeviceSpec device_spec = txl_device_spec_of(&c);
  const TxlOps *ops = txl_backend_ops(&device_spec, err, sizeof err);
  if (!ops) txl_fatal_all("%s: %s", config_path, err);
  const char *device = txl_config_choice_name(TXL_CFG_KEY_device, c.device);
  printf("check: %s for %d rank%s on %s (%s)\n", config_path, ranks, ranks > 1 ? "s" : "", device,
         txl_config_choice_name(TXL_CFG_KEY_precision, c.precision));
  TxlCorpus *corpus;
  c.n_token = vocabulary(&c, config_path, &corpus);
  /* the adaptive softmax's tail targets per segment, counted as txl-train counts them at start
   * (every rank's columns in turn: the largest), when the corpus is here */
  TxlTailCap train_tail, eval_tail;
  TxlModelSpec spec;
  txl_model_spec_from_config(&c, c.n_token, &spec);
  const int counted = corpus != NULL;
  if (counted) {
    txl_tail_caps_of_config(&c, corpus, &spec.dims, ranks, -1, &train_tail, &eval_tail);
    txl_corpus_close(corpus);
  }
  TxlMemEstimate e;
  txl_memory_estimate(&c, c.n_token, ops, ranks, counted ? &train_tail : NULL, counted ? &eval_tail : NULL, &e);
  char n_all[32];
  txl_format_count((long long)e.n_params, n_all, sizeof n_all);
  printf("model: %s parameters; %.3g MFLOP per trained token\n", n_all, e.flops_per_token / 1e6);
  txl_memory_print(&e, stdout);
  if (counted && spec.dims.n_clusters > 0) {
    char tr[96], ev[96];
    txl_tail_cap_format(&train_tail, &spec.dims, tr, sizeof tr);
    txl_tail_cap_format(&eval_tail, &spec.dims, ev, sizeof ev);
    printf("adaptive softmax: the most targets of each tail cluster in any segment of a rank: training %s; "
           "evaluation %s\n", tr, ev);
  }
  char train[48], eval[48];
  shard_text(c.batch_size, ranks, train, sizeof train);
  shard_text(c.eval_batch_size, ranks, eval, sizeof eval);
  printf("columns: %d global, %s on each rank; evaluation %d, %s on each rank\n", c.batch_size, train,
         c.eval_batch_size, eval);
  txl_groups_print(&c, txl_shard_max(c.batch_size, ranks), stdout);
  const char *source = "";
  const double avail = txl_memory_available(&source);
  if (!e.on_gpu && avail >= 0) {
    char a[32];
    txl_format_bytes(avail, a, sizeof a);
    printf("this machine: %s of host memory available (%s)%s\n", a, source,
           e.host > avail ? ": one rank of this run would not fit here" : "");
  }
  printf("check passed: the config is valid for %d rank%s on %s\n", ranks, ranks > 1 ? "s" : "", device);
  fflush(stdout);
}
