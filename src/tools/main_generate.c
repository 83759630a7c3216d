/* txl-generate: sample text from a checkpoint, carrying the memory so that every new token
 * costs one query row; --compare also times the recompute-the-context way.
 *   txl-generate CHECKPOINT|RUN_DIR [options] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/cli.h"
#include "src/base/error.h"
#include "src/tools/loaded.h"
#include "src/tools/options.h"
#include "src/config/config.h"
#include "src/train/generate.h"
#include "src/train/trainer.h"

/* The options; --clamp-len sets eval.eval_clamp_len over the checkpoint's config (see options.h). */
enum { OPT_BEST, OPT_PROMPT, OPT_LENGTH, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SEED, OPT_MEM_LEN, OPT_CLAMP_LEN,
       OPT_CORPUS, OPT_COMPARE, OPT_RECOMPUTE, OPT_QUIET, N_OPTS };
static const TxlToolOption OPTS[N_OPTS] = {
    [OPT_BEST] = {"--best", NULL, NULL, NULL,
                  "with a RUN_DIR: the checkpoint its 'best' pointer names (the best validation)\n"
                  "instead of the newest"},
    [OPT_PROMPT] = {"--prompt", "TEXT", NULL, NULL, "text to continue (default: the start of a line)"},
    [OPT_LENGTH] = {"--length", "N", NULL, NULL, "tokens to generate (default 200)"},
    [OPT_TEMPERATURE] = {"--temperature", "T", NULL, NULL, "softmax temperature, > 0 (default 0.8)"},
    [OPT_TOP_K] = {"--top-k", "K", NULL, NULL, "sample among the K most likely tokens; 0: all (default 0)"},
    [OPT_TOP_P] = {"--top-p", "P", NULL, NULL,
                   "sample among the most likely tokens whose probability reaches P, in (0, 1]\n(default 1: all)"},
    [OPT_SEED] = {"--seed", "S", NULL, NULL,
                  "the i-th token draws the Philox uniform keyed by (S, i) (default: the run's seed)"},
    [OPT_MEM_LEN] = {"--mem-len", "N", NULL, NULL, "memory rows (default: the checkpoint's eval memory, else mem_len)"},
    [OPT_CLAMP_LEN] = {"--clamp-len", "N", "eval.eval_clamp_len", NULL,
                       "relative distances clamped to N (eval.eval_clamp_len); <= 0: none, -2: the training's\n"
                       "model.clamp_len (default: the checkpoint's)"},
    [OPT_CORPUS] = {"--corpus", "FILE", NULL, NULL,
                    "the corpus whose vocabulary maps text and ids (default: the checkpoint's)"},
    [OPT_COMPARE] = {"--compare", "[W]", NULL, NULL,
                     "also generate by re-running the model over the last W tokens for every new\n"
                     "token (no memory; default W = mem_len) and print both speeds"},
    [OPT_RECOMPUTE] = {"--recompute", "W", NULL, NULL,
                       "generate that way instead (the baseline; same text as the memory when both\n"
                       "see every earlier token)"},
    [OPT_QUIET] = {"--quiet", NULL, NULL, NULL, "print only the figures, not the text"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-generate CHECKPOINT|RUN_DIR [options]\n"
          "\n"
          "Samples text from a checkpoint's model (a RUN_DIR means its newest checkpoint, --best its best;\n"
          "a run folder's 'latest' or 'best' file the one it names). The prompt primes\n"
          "the memory; each new token is one forward pass of one row attending to the remembered rows.\n"
          "\n"
          "options:\n");
  txl_loaded_options_help(f, OPTS, N_OPTS);
}

/* The command line. */
typedef struct {
  const char *target, *prompt, *corpus;
  int best, length, top_k, mem_len, compare, quiet, window;
  double temperature, top_p;
  long long seed;
  TxlKeySettings keys;
  TxlDeviceOptions dev;
} GenArgs;

/* Sets the option of row o from v (argv's next word, or NULL); returns the words of argv it used. */
static int parse_option(GenArgs *g, int o, const char *a, const char *v) {
  switch (o) {
    case OPT_BEST: g->best = 1; return 0;
    case OPT_PROMPT:
      if (!v) txl_fatal_all("--prompt needs a text");
      g->prompt = v;
      return 1;
    case OPT_LENGTH: g->length = (int)txl_cli_number(a, v, 1, 1048576, 1); return 1;
    case OPT_TEMPERATURE: g->temperature = txl_cli_number(a, v, 1e-3, 1e3, 0); return 1;
    case OPT_TOP_K: g->top_k = (int)txl_cli_number(a, v, 0, 2147483647.0, 1); return 1;
    case OPT_TOP_P: g->top_p = txl_cli_number(a, v, 1e-9, 1.0, 0); return 1;
    case OPT_SEED: g->seed = (long long)txl_cli_number(a, v, 0, 4294967295.0, 1); return 1;
    case OPT_MEM_LEN: g->mem_len = (int)txl_cli_number(a, v, 1, 1048576, 1); return 1;
    case OPT_CLAMP_LEN: return txl_key_settings_add(&g->keys, &OPTS[o], v);
    case OPT_CORPUS:
      if (!v) txl_fatal_all("--corpus needs a file");
      g->corpus = v;
      return 1;
    case OPT_COMPARE:
      g->compare = 0;
      if (v && v[0] >= '0' && v[0] <= '9') return g->compare = (int)txl_cli_number(a, v, 1, 1048576, 1), 1;
      return 0;
    case OPT_RECOMPUTE: g->window = (int)txl_cli_number(a, v, 1, 1048576, 1); return 1;
    case OPT_QUIET: g->quiet = 1; return 0;
  }
  return 0;
}

static void parse_args(GenArgs *g, int argc, char **argv) {
  memset(g, 0, sizeof *g);
  g->prompt = "", g->length = 200, g->mem_len = -1, g->compare = -1, g->temperature = 0.8, g->top_p = 1.0;
  g->seed = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const int o = txl_tool_option_find(OPTS, N_OPTS, a);
    if (o >= 0)
      i += parse_option(g, o, a, v);
    else if (txl_device_option(&g->dev, a, v))
      i++;
    else
      txl_cli_positional("txl-generate", "checkpoint", a, &g->target);
  }
  if (!g->target) txl_fatal_all("no checkpoint given (usage: txl-generate CHECKPOINT|RUN_DIR [options], see --help)");
}

/* The generation's settings: the options over the checkpoint's config. */
static TxlGenOptions resolve(GenArgs *g, const TxlConfig *cfg) {
  if (g->mem_len < 0) {
    g->mem_len = txl_config_eval_mem_len(cfg);
    if (g->mem_len < 1) g->mem_len = cfg->mem_len > 0 ? cfg->mem_len : cfg->tgt_len;
  }
  const TxlGenOptions o = {g->prompt, g->length, g->temperature, g->top_k, g->top_p,
                           g->seed >= 0 ? (uint32_t)g->seed : (uint32_t)cfg->seed, cfg->eval_tgt_len, g->mem_len,
                           txl_config_eval_clamp_len(cfg), g->window};
  return o;
}

/* Generates (and with --compare, generates again the recompute way) and prints the speeds. */
static void run(const GenArgs *g, TxlLoaded *ld, TxlGenOptions o) {
  const int length = g->length, window = g->window, mem_len = g->mem_len;
  fprintf(stderr, "txl-generate: %s, %d tokens, temperature %g, top-k %d, top-p %g, seed %u, %s %d rows\n", ld->path,
          length, g->temperature, g->top_k, g->top_p, o.seed, window ? "recomputing the last" : "memory",
          window ? window : mem_len);
  const double t_gen = txl_generate(&ld->model, ld->corpus, &o, g->quiet ? NULL : stdout, NULL);
  if (!g->quiet) printf("\n");
  if (window) {
    printf("recomputing: %d tokens in %.3f s = %.1f tokens/s (the last %d tokens re-run for every token)\n", length,
           t_gen, length / t_gen, window);
  } else {
    printf("with memory: %d tokens in %.3f s = %.1f tokens/s (one query row per token, %d memory rows)\n", length,
           t_gen, length / t_gen, mem_len);
  }
  if (g->compare >= 0 && !window) {
    const double t_mem = t_gen;
    o.window = g->compare > 0 ? g->compare : mem_len;
    const double t_re = txl_generate(&ld->model, ld->corpus, &o, NULL, NULL);
    printf("recomputing: %d tokens in %.3f s = %.1f tokens/s (the last %d tokens re-run for every token)\n", length,
           t_re, length / t_re, o.window);
    printf("speed-up of the memory: %.1fx\n", t_re / t_mem);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  TxlDist dist;
  txl_tool_begin(&dist, &argc, &argv, usage);
  if (dist.world != 1) txl_fatal_all("txl-generate runs on one rank (started with %d)", dist.world);
  GenArgs g;
  parse_args(&g, argc, argv);
  TxlLoaded ld;
  txl_loaded_config(&ld, g.target, g.best, dist.rank == 0 ? stderr : NULL); /* stdout is the generated text */
  if (g.corpus) snprintf(ld.cfg.corpus, sizeof ld.cfg.corpus, "%s", g.corpus);
  txl_key_settings_apply(&g.keys, &ld.cfg);
  txl_device_options_apply(&g.dev, &ld.cfg);
  txl_loaded_open(&ld, &dist);
  run(&g, &ld, resolve(&g, &ld.cfg));
  txl_loaded_close(&ld);
  txl_dist_finalize();
  return 0;
}
