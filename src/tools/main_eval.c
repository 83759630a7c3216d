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
#include "src/tools/loaded.h"
#include "src/tools/options.h"
#include "src/config/config.h"
#include "src/train/evaluate.h"
#include "data/stream.h"
#include "src/train/report.h"
#include "src/train/trainer.h"

#define MAX_SWEEP 64

/* The options; the rows with a key set it over the checkpoint's config (see options.h). */
enum { OPT_BEST, OPT_SPLIT, OPT_CORPUS, OPT_TGT_LEN, OPT_MEM_LEN, OPT_CLAMP_LEN, OPT_SAME_LENGTH,
       OPT_NO_SAME_LENGTH, OPT_BATCH_SIZE, OPT_MAX_SEGMENTS, N_OPTS };
static const TxlToolOption OPTS[N_OPTS] = {
    [OPT_BEST] = {"--best", NULL, NULL, NULL,
                  "with a RUN_DIR: the checkpoint its 'best' pointer names (the best validation)\n"
                  "instead of the newest"},
    [OPT_SPLIT] = {"--split", "NAME", NULL, NULL, "train, valid or test (default test)"},
    [OPT_CORPUS] = {"--corpus", "FILE", NULL, NULL,
                    "another corpus of the same vocabulary (default: data.corpus of the checkpoint)"},
    [OPT_TGT_LEN] = {"--tgt-len", "N", "eval.eval_tgt_len", NULL, "rows per segment (eval.eval_tgt_len)"},
    [OPT_MEM_LEN] = {"--mem-len", "N[,N...]", NULL, NULL,
                     "memory rows (eval.eval_mem_len; -1: train.mem_len); a list evaluates each\n"
                     "in turn (a table of loss against memory)"},
    [OPT_CLAMP_LEN] = {"--clamp-len", "N", "eval.eval_clamp_len", NULL,
                       "relative distances clamped to N (eval.eval_clamp_len; <= 0: none, -2: the\n"
                       "training's model.clamp_len)"},
    [OPT_SAME_LENGTH] = {"--same-length", NULL, "eval.eval_same_length", "true",
                         "every query attends to the same number of keys (needs memory)"},
    [OPT_NO_SAME_LENGTH] = {"--no-same-length", NULL, "eval.eval_same_length", "false",
                            "the opposite (default: eval.eval_same_length)"},
    [OPT_BATCH_SIZE] = {"--batch-size", "N", "eval.eval_batch_size", NULL,
                        "columns of the split (eval.eval_batch_size; at least P)"},
    [OPT_MAX_SEGMENTS] = {"--max-segments", "N", "eval.max_eval_steps", NULL,
                          "stop after N segments (eval.max_eval_steps; default -1: the whole split)"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-eval CHECKPOINT|RUN_DIR [options]\n"
          "       mpirun -n P txl-eval CHECKPOINT|RUN_DIR [options]   (eval columns split among P ranks)\n"
          "\n"
          "Evaluates a checkpoint's parameters on a split of the corpus; a RUN_DIR means its newest\n"
          "checkpoint (--best: its best), a run folder's 'latest' or 'best' file the one it names.\n"
          "Settings not given come from the checkpoint's config (its eval.* keys); an option that\n"
          "names a key takes that key's values (types and ranges: txl-train --help).\n"
          "\n"
          "options:\n");
  txl_loaded_options_help(f, OPTS, N_OPTS);
}

/* The command line: the checkpoint, the split, the key settings, the --mem-len sweep. */
typedef struct {
  const char *target, *split, *corpus;
  int best;
  TxlKeySettings keys;
  TxlDeviceOptions dev;
  const char *mem[MAX_SWEEP];
  char mem_list[1024];
  int n_mem;
} EvalArgs;

/* --mem-len N[,N...]: each value checked as eval.eval_mem_len. */
static void parse_mem_list(EvalArgs *e, const char *a, const char *v) {
  if (!v) txl_fatal_all("--mem-len needs N or a list N,N,...");
  if (strlen(v) >= sizeof e->mem_list)
    txl_fatal_all("--mem-len: a list of at most %zu characters", sizeof e->mem_list - 1);
  snprintf(e->mem_list, sizeof e->mem_list, "%s", v);
  e->n_mem = 0;
  for (char *tok = strtok(e->mem_list, ","); tok; tok = strtok(NULL, ",")) {
    if (e->n_mem == MAX_SWEEP) txl_fatal_all("--mem-len: at most %d values", MAX_SWEEP);
    e->mem[e->n_mem++] = txl_key_option(a, tok, "eval.eval_mem_len");
  }
  if (!e->n_mem) txl_fatal_all("--mem-len %s: no value", v);
}

static void parse_args(EvalArgs *e, int argc, char **argv) {
  memset(e, 0, sizeof *e);
  e->split = "test";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const int o = txl_tool_option_find(OPTS, N_OPTS, a);
    if (o >= 0 && OPTS[o].key) {
      i += txl_key_settings_add(&e->keys, &OPTS[o], v);
    } else if (o == OPT_BEST) {
      e->best = 1;
    } else if (o == OPT_SPLIT) {
      e->split = txl_cli_choice(a, v, "train|valid|test"), i++;
    } else if (o == OPT_CORPUS) {
      if (!v) txl_fatal_all("--corpus needs a file");
      e->corpus = argv[++i];
    } else if (o == OPT_MEM_LEN) {
      parse_mem_list(e, a, v), i++;
    } else if (txl_device_option(&e->dev, a, v)) {
      i++;
    } else {
      txl_cli_positional("txl-eval", "checkpoint", a, &e->target);
    }
  }
  if (!e->target) txl_fatal_all("no checkpoint given (usage: txl-eval CHECKPOINT|RUN_DIR [options], see --help)");
}

/* The checkpoint's config with the options over it, every length of a sweep checked before the
 * first runs. */
static TxlConfig resolve_config(const EvalArgs *e, const TxlConfig *ckpt, const TxlDist *dist) {
  TxlConfig cfg = *ckpt;
  char err[1024];
  if (e->corpus) snprintf(cfg.corpus, sizeof cfg.corpus, "%s", e->corpus);
  cfg.max_eval_steps = -1; /* txl-eval's default: the whole split, whatever validation used */
  txl_key_settings_apply(&e->keys, &cfg);
  txl_device_options_apply(&e->dev, &cfg);
  for (int k = 0; k < (e->n_mem ? e->n_mem : 1); k++) {
    if (e->n_mem) txl_key_option_apply(&cfg, "--mem-len", e->mem[k], "eval.eval_mem_len");
    if (txl_config_validate_eval(&cfg, dist->world, err, sizeof err) != 0) txl_fatal_all("%s", err);
  }
  return cfg;
}

/* One line per memory length of the sweep (one line without a sweep). */
static void run(const EvalArgs *e, TxlLoaded *ld, TxlConfig cfg, const TxlDist *dist) {
  TxlCorpus *c = ld->corpus;
  const char *split = e->split;
  txl_stream_check_length(c, split, cfg.eval_batch_size, 1);
  const int char_level = txl_corpus_char_level(c);
  if (dist->rank == 0) {
    printf("txl-eval: %s (step %lld) on split '%s' of %s; %d rank%s x %d thread%s\n", ld->path,
           (long long)ld->st.step, split, cfg.corpus, dist->world, dist->world > 1 ? "s" : "", txl_cpu_threads(),
           txl_cpu_threads() > 1 ? "s" : "");
    fflush(stdout);
  }
  for (int k = 0; k < (e->n_mem ? e->n_mem : 1); k++) {
    if (e->n_mem) txl_key_option_apply(&cfg, "--mem-len", e->mem[k], "eval.eval_mem_len");
    const TxlEvalShape es = {cfg.eval_tgt_len, txl_config_eval_mem_len(&cfg), txl_config_eval_clamp_len(&cfg),
                             cfg.eval_same_length, cfg.eval_batch_size, NULL};
    double tokens = 0.0, t0 = txl_now_s();
    const double loss = txl_evaluate(&ld->model, c, split, &es, dist, cfg.max_eval_steps, &tokens);
    const double dt = txl_now_s() - t0;
    if (dist->rank == 0) {
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
}

int main(int argc, char **argv) {
  TxlDist dist;
  txl_tool_begin(&dist, &argc, &argv, usage);
  static EvalArgs e;
  parse_args(&e, argc, argv);
  TxlLoaded ld;
  txl_loaded_config(&ld, e.target, e.best, dist.rank == 0 ? stdout : NULL);
  ld.cfg = resolve_config(&e, &ld.cfg, &dist);
  txl_loaded_open(&ld, &dist);
  run(&e, &ld, ld.cfg, &dist);
  txl_loaded_close(&ld);
  txl_dist_finalize();
  return 0;
}
