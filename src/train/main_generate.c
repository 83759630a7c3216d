/* txl-generate: sample text from a checkpoint, carrying the memory so that every new token
 * costs one query row; --compare also times the recompute-the-context way.
 *   txl-generate CHECKPOINT|RUN_DIR [options] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/cli.h"
#include "src/base/error.h"
#include "src/train/loaded.h"
#include "src/config/config.h"
#include "src/train/generate.h"
#include "src/train/trainer.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-generate CHECKPOINT|RUN_DIR [options]\n"
          "\n"
          "Samples text from a checkpoint's model (a RUN_DIR means its newest checkpoint). The prompt primes\n"
          "the memory; each new token is one forward pass of one row attending to the remembered rows.\n"
          "\n"
          "options:\n"
          "  --prompt TEXT         text to continue (default: the start of a line)\n"
          "  --length N            tokens to generate (default 200)\n"
          "  --temperature T       softmax temperature, > 0 (default 0.8)\n"
          "  --top-k K             sample among the K most likely tokens; 0: all (default 0)\n"
          "  --top-p P             sample among the most likely tokens whose probability reaches P, in (0, 1]\n"
          "                        (default 1: all)\n"
          "  --seed S              the i-th token draws the Philox uniform keyed by (S, i) (default: the run's seed)\n"
          "  --mem-len N           memory rows (default: the checkpoint's eval memory, else mem_len)\n"
          "  --clamp-len N         relative distances clamped to N; <= 0: none (default: the checkpoint's)\n"
          "  --corpus FILE         the corpus whose vocabulary maps text and ids (default: the checkpoint's)\n"
          "  --compare [W]         also generate by re-running the model over the last W tokens for every new\n"
          "                        token (no memory; default W = mem_len) and print both speeds\n"
          "  --recompute W         generate that way instead (the baseline; same text as the memory when both\n"
          "                        see every earlier token)\n"
          "  --quiet               print only the figures, not the text\n"
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
  if (dist.world != 1) txl_fatal_all("txl-generate runs on one rank (started with %d)", dist.world);
  const char *target = NULL, *prompt = "", *corpus = NULL;
  int length = 200, top_k = 0, mem_len = -1, clamp_len = -3, compare = -1, quiet = 0, window = 0;
  TxlDeviceOptions dev = {NULL, NULL, 0};
  double temperature = 0.8, top_p = 1.0;
  long long seed = -1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--prompt")) {
      if (!v) txl_fatal_all("--prompt needs a text");
      prompt = argv[++i];
    } else if (!strcmp(a, "--length")) {
      length = (int)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--temperature")) {
      temperature = txl_cli_number(a, v, 1e-3, 1e3, 0), i++;
    } else if (!strcmp(a, "--top-k")) {
      top_k = (int)txl_cli_number(a, v, 0, 2147483647.0, 1), i++;
    } else if (!strcmp(a, "--top-p")) {
      top_p = txl_cli_number(a, v, 1e-9, 1.0, 0), i++;
    } else if (!strcmp(a, "--seed")) {
      seed = (long long)txl_cli_number(a, v, 0, 4294967295.0, 1), i++;
    } else if (!strcmp(a, "--mem-len")) {
      mem_len = (int)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--clamp-len")) {
      clamp_len = (int)txl_cli_number(a, v, -1, 1073741824.0, 1), i++;
    } else if (!strcmp(a, "--corpus")) {
      if (!v) txl_fatal_all("--corpus needs a file");
      corpus = argv[++i];
    } else if (!strcmp(a, "--compare")) {
      compare = 0;
      if (v && v[0] >= '0' && v[0] <= '9') compare = (int)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--recompute")) {
      window = (int)txl_cli_number(a, v, 1, 1048576, 1), i++;
    } else if (!strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (txl_device_option(&dev, a, v)) {
      i++;
    } else {
      txl_cli_positional("txl-generate", "checkpoint", a, &target);
    }
  }
  if (!target) txl_fatal_all("no checkpoint given (usage: txl-generate CHECKPOINT|RUN_DIR [options], see --help)");

  TxlLoaded ld;
  txl_loaded_config(&ld, target, dist.rank == 0 ? stderr : NULL); /* stdout is the generated text */
  TxlConfig cfg = ld.cfg;
  if (corpus) snprintf(cfg.corpus, sizeof cfg.corpus, "%s", corpus);
  txl_device_options_apply(&dev, &cfg);
  ld.cfg = cfg;
  txl_loaded_open(&ld, &dist);

  if (mem_len < 0) {
    mem_len = txl_config_eval_mem_len(&cfg);
    if (mem_len < 1) mem_len = cfg.mem_len > 0 ? cfg.mem_len : cfg.tgt_len;
  }
  TxlGenOptions o = {prompt, length, temperature, top_k, top_p, seed >= 0 ? (uint32_t)seed : (uint32_t)cfg.seed,
                     cfg.eval_tgt_len, mem_len, clamp_len > -3 ? clamp_len : txl_config_eval_clamp_len(&cfg), window};
  fprintf(stderr, "txl-generate: %s, %d tokens, temperature %g, top-k %d, top-p %g, seed %u, %s %d rows\n", ld.path,
          length, temperature, top_k, top_p, o.seed, window ? "recomputing the last" : "memory", window ? window : mem_len);
  const double t_gen = txl_generate(&ld.model, ld.corpus, &o, quiet ? NULL : stdout, NULL);
  if (!quiet) printf("\n");
  if (window) {
    printf("recomputing: %d tokens in %.3f s = %.1f tokens/s (the last %d tokens re-run for every token)\n", length,
           t_gen, length / t_gen, window);
  } else {
    printf("with memory: %d tokens in %.3f s = %.1f tokens/s (one query row per token, %d memory rows)\n", length,
           t_gen, length / t_gen, mem_len);
  }
  if (compare >= 0 && !window) {
    const double t_mem = t_gen;
    o.window = compare > 0 ? compare : mem_len;
    const double t_re = txl_generate(&ld.model, ld.corpus, &o, NULL, NULL);
    printf("recomputing: %d tokens in %.3f s = %.1f tokens/s (the last %d tokens re-run for every token)\n", length,
           t_re, length / t_re, o.window);
    printf("speed-up of the memory: %.1fx\n", t_re / t_mem);
  }
  fflush(stdout);
  txl_loaded_close(&ld);
  txl_dist_finalize();
  return 0;
}
