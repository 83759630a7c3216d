/* txl-eval: evaluate a checkpoint on a corpus split with any segment length, memory length,
 * clamp_len and same_length, across ranks.
 *   mpirun -n P txl-eval CKPT|RUN_DIR [options] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/threads.h"
#include "src/base/cli.h"
#include "src/base/error.h"
#include "src/base/timer.h"
#include "src/train/loaded.h"
#include "src/config/config.h"
#include "src/train/evaluate.h"
#include "src/train/stream.h"
#include "src/train/report.h"
#include "src/train/trainer.h"

#define MAX_SWEEP 64

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-eval CHECKPOINT|RUN_DIR [options]\n"
          "       mpirun -n P txl-eval CHECKPOINT|RUN_DIR [options]   (eval columns split among P ranks)\n"
          "\n"
          "Evaluates a checkpoint's parameters on a split of the corpus; a RUN_DIR means its newest\n"
          "checkpoint. Settings not given come from the checkpoint's config (its eval.* keys); an option\n"
          "that names a key takes that key's values (types and ranges: txl-train --help).\n"
          "\n"
          "options:\n"
          "  --split NAME          train, valid or test (default test)\n"
          "  --corpus FILE         another corpus of the same vocabulary (default: data.corpus of the checkpoint)\n"
          "  --tgt-len N           rows per segment (eval.eval_tgt_len)\n"
          "  --mem-len N[,N...]    memory rows (eval.eval_mem_len; -1: train.mem_len); a list evaluates each\n"
          "                        in turn (a table of loss against memory)\n"
          "  --clamp-len N         relative distances clamped to N (eval.eval_clamp_len; <= 0: none, -2: the\n"
          "                        training's model.clamp_len)\n"
          "  --same-length         every query attends to the same number of keys (needs memory)\n"
          "  --no-same-length      the opposite (default: eval.eval_same_length)\n"
          "  --batch-size N        columns of the split (eval.eval_batch_size; at least P)\n"
          "  --max-segments N      stop after N segments (eval.max_eval_steps; default -1: the whole split)\n"
          TXL_DEVICE_OPTIONS_HELP
          "  -h, --help            this text\n");
}

int main(int argc, char **argv) {
  if (txl_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  TxlDist dist;
  txl_dist_init(&dist, &argc, &argv);

  const char *target = NULL, *split = "test", *corpus = NULL;
  /* the options that set a key, applied in order over the checkpoint's config once it is read;
   * each value is checked against its key's range as it is parsed */
  struct {
    const char *opt, *value, *key;
    int flag; /* an option without a value (--same-length): messages name it alone */
  } set[16];
  int n_set = 0;
  TxlDeviceOptions dev = {NULL, NULL, NULL};
  const char *mem[MAX_SWEEP];
  char mem_list[1024] = "";
  int n_mem = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *key = NULL;
    if (!strcmp(a, "--tgt-len")) key = "eval.eval_tgt_len";
    if (!strcmp(a, "--clamp-len")) key = "eval.eval_clamp_len";
    if (!strcmp(a, "--batch-size")) key = "eval.eval_batch_size";
    if (!strcmp(a, "--max-segments")) key = "eval.max_eval_steps";
    if (!strcmp(a, "--same-length")) key = "eval.eval_same_length", v = "true";
    if (!strcmp(a, "--no-same-length")) key = "eval.eval_same_length", v = "false";
    if (key) {
      if (n_set == (int)(sizeof set / sizeof set[0])) txl_fatal_all("%s: too many options", a);
      const int flag = !strcmp(a, "--same-length") || !strcmp(a, "--no-same-length");
      set[n_set].opt = a, set[n_set].value = txl_key_option(a, v, key), set[n_set].key = key, set[n_set++].flag = flag;
      if (!flag) i++;
    } else if (!strcmp(a, "--split")) {
      split = txl_cli_choice(a, v, "train|valid|test"), i++;
    } else if (!strcmp(a, "--corpus")) {
      if (!v) txl_fatal_all("--corpus needs a file");
      corpus = argv[++i];
    } else if (!strcmp(a, "--mem-len")) {
      if (!v) txl_fatal_all("--mem-len needs N or a list N,N,...");
      if (strlen(v) >= sizeof mem_list)
        txl_fatal_all("--mem-len: a list of at most %zu characters", sizeof mem_list - 1);
      snprintf(mem_list, sizeof mem_list, "%s", argv[++i]);
      n_mem = 0;
      for (char *tok = strtok(mem_list, ","); tok; tok = strtok(NULL, ",")) {
        if (n_mem == MAX_SWEEP) txl_fatal_all("--mem-len: at most %d values", MAX_SWEEP);
        mem[n_mem++] = txl_key_option(a, tok, "eval.eval_mem_len");
      }
      if (!n_mem) txl_fatal_all("--mem-len %s: no value", argv[i]);
    } else if (txl_device_option(&dev, a, v)) {
      i++;
    } else {
      txl_cli_positional("txl-eval", "checkpoint", a, &target);
    }
  }
  if (!target) txl_fatal_all("no checkpoint given (usage: txl-eval CHECKPOINT|RUN_DIR [options], see --help)");

  TxlLoaded ld;
  txl_loaded_config(&ld, target, dist.rank == 0 ? stdout : NULL);
  TxlConfig cfg = ld.cfg;
  char err[1024];
  if (corpus) snprintf(cfg.corpus, sizeof cfg.corpus, "%s", corpus);
  cfg.max_eval_steps = -1; /* txl-eval's default: the whole split, whatever validation used */
  for (int k = 0; k < n_set; k++) {
    if (!set[k].flag)
      txl_key_option_apply(&cfg, set[k].opt, set[k].value, set[k].key);
    else if (txl_config_set_key(&cfg, set[k].key, set[k].value, set[k].opt, err, sizeof err) != 0)
      txl_fatal_all("%s", err);
  }
  txl_device_options_apply(&dev, &cfg);
  for (int k = 0; k < (n_mem ? n_mem : 1); k++) { /* every length of a sweep is checked before the first runs */
    if (n_mem) txl_key_option_apply(&cfg, "--mem-len", mem[k], "eval.eval_mem_len");
    if (txl_config_validate_eval(&cfg, dist.world, err, sizeof err) != 0) txl_fatal_all("%s", err);
  }

  ld.cfg = cfg;
  txl_loaded_open(&ld, &dist);
  TxlCorpus *c = ld.corpus;
  txl_stream_check_length(c, split, cfg.eval_batch_size, 1);
  const int char_level = strcmp(txl_corpus_mode(c), "word") != 0;
  if (dist.rank == 0) {
    printf("txl-eval: %s (step %lld) on split '%s' of %s; %d rank%s x %d thread%s\n", ld.path, (long long)ld.st.step,
           split, cfg.corpus, dist.world, dist.world > 1 ? "s" : "", txl_cpu_threads(),
           txl_cpu_threads() > 1 ? "s" : "");
    fflush(stdout);
  }
  for (int k = 0; k < (n_mem ? n_mem : 1); k++) {
    if (n_mem) txl_key_option_apply(&cfg, "--mem-len", mem[k], "eval.eval_mem_len");
    const TxlEvalShape es = {cfg.eval_tgt_len, txl_config_eval_mem_len(&cfg), txl_config_eval_clamp_len(&cfg),
                             cfg.eval_same_length, cfg.eval_batch_size};
    double tokens = 0.0, t0 = txl_now_s();
    const double loss = txl_evaluate(&ld.model, c, split, &es, &dist, cfg.max_eval_steps, &tokens);
    const double dt = txl_now_s() - t0;
    if (dist.rank == 0) {
      char q[64], tok[32];
      txl_loss_quality(char_level, loss, q, sizeof q, NULL, NULL);
      txl_format_count((long long)tokens, tok, sizeof tok);
      printf("tgt_len %d mem_len %d clamp_len %d same_length %d batch %d: loss %.6f nats, %s | %s tokens in "
             "%.1f s (%.0f tok/s)\n",
             es.tgt_len, es.mem_len, es.clamp_len, es.same_length, es.batch_size, loss, q, tok, dt,
             dt > 0 ? tokens / dt : 0.0);
      fflush(stdout);
    }
  }
  txl_loaded_close(&ld);
  txl_dist_finalize();
  return 0;
}
