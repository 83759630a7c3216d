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
          "checkpoint. Settings not given come from the checkpoint's config (its eval.* keys).\n"
          "\n"
          "options:\n"
          "  --split NAME          train, valid or test (default test)\n"
          "  --corpus FILE         another corpus of the same vocabulary (default: data.corpus of the checkpoint)\n"
          "  --tgt-len N           rows per segment (eval.eval_tgt_len)\n"
          "  --mem-len N[,N...]    memory rows; a list evaluates each in turn (a table of loss against memory)\n"
          "  --clamp-len N         relative distances clamped to N; <= 0: none\n"
          "  --same-length         every query attends to the same number of keys (needs memory)\n"
          "  --no-same-length      the opposite (default: eval.eval_same_length)\n"
          "  --batch-size N        columns of the split (eval.eval_batch_size; divisible by P)\n"
          "  --max-segments N      stop after N segments (default: the whole split)\n"
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
  long tgt_len = -1, clamp_len = -3, batch = -1, max_segments = -1;
  TxlDeviceOptions dev = {NULL, NULL, 0};
  int same_length = -1, n_mem = 0;
  long mem[MAX_SWEEP];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--split")) {
      split = txl_cli_choice(a, v, "train|valid|test"), i++;
    } else if (!strcmp(a, "--corpus")) {
      if (!v) txl_fatal_all("--corpus needs a file");
      corpus = argv[++i];
    } else if (!strcmp(a, "--tgt-len")) {
      tgt_len = (long)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--mem-len")) {
      if (!v) txl_fatal_all("--mem-len needs N or a list N,N,...");
      char buf[1024];
      snprintf(buf, sizeof buf, "%s", argv[++i]);
      for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (n_mem == MAX_SWEEP) txl_fatal_all("--mem-len: at most %d values", MAX_SWEEP);
        mem[n_mem++] = (long)txl_cli_number(a, tok, 0, 1048576, 1);
      }
      if (!n_mem) txl_fatal_all("--mem-len %s: no value", argv[i]);
    } else if (!strcmp(a, "--clamp-len")) {
      clamp_len = (long)txl_cli_number(a, v, -1, 1073741824, 1), i++;
    } else if (!strcmp(a, "--same-length")) {
      same_length = 1;
    } else if (!strcmp(a, "--no-same-length")) {
      same_length = 0;
    } else if (!strcmp(a, "--batch-size")) {
      batch = (long)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--max-segments")) {
      max_segments = (long)txl_cli_number(a, v, 1, 2147483647L, 1), i++;
    } else if (txl_device_option(&dev, a, v)) {
      i++;
    } else {
      txl_cli_positional("txl-eval", "checkpoint", a, &target);
    }
  }
  if (!target) txl_fatal_all("no checkpoint given (usage: txl-eval CHECKPOINT|RUN_DIR [options], see --help)");

  TxlLoaded ld;
  txl_loaded_config(&ld, target, stdout);
  TxlConfig cfg = ld.cfg;
  char err[1024];
  if (corpus) snprintf(cfg.corpus, sizeof cfg.corpus, "%s", corpus);
  if (tgt_len > 0) cfg.eval_tgt_len = (int)tgt_len;
  if (clamp_len > -3) cfg.eval_clamp_len = (int)clamp_len;
  if (same_length >= 0) cfg.eval_same_length = same_length;
  if (batch > 0) cfg.eval_batch_size = (int)batch;
  txl_device_options_apply(&dev, &cfg);
  if (!n_mem) mem[n_mem++] = txl_config_eval_mem_len(&cfg);
  cfg.batch_size = dist.world; /* the training batch plays no part here: any divisible value */
  for (int k = 0; k < n_mem; k++) {
    cfg.eval_mem_len = (int)mem[k];
    if (txl_config_validate(&cfg, dist.world, err, sizeof err) != 0) txl_fatal_all("%s", err);
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
  for (int k = 0; k < n_mem; k++) {
    cfg.eval_mem_len = (int)mem[k];
    const TxlEvalShape es = {cfg.eval_tgt_len, cfg.eval_mem_len, txl_config_eval_clamp_len(&cfg),
                             cfg.eval_same_length, cfg.eval_batch_size};
    double tokens = 0.0, t0 = txl_now_s();
    const double loss = txl_evaluate(&ld.model, c, split, &es, &dist, (int)max_segments, &tokens);
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
