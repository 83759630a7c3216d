/* txl-train: train a Transformer-XL language model.
 *   mpirun -n P txl-train CONFIG.ini [--set section.key=value ...] [--bench [STEPS]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "src/base/cli.h"
#include "src/base/stop.h"
#include "src/config/config.h"
#include "src/train/check.h"
#include "src/tools/options.h"
#include "src/train/trainer.h"
#include "src/device/backend.h"

/* Exit status: 0 done; 1 an error (a message on stderr); TXL_STOP_EXIT (75) stopped by SIGINT,
 * SIGTERM or SIGUSR1 (or --stop-at) after writing a checkpoint, to be requeued (src/base/stop.h). */

enum { OPT_SET, OPT_BENCH, OPT_BENCH_WARMUP, OPT_PROFILE, OPT_RESUME, OPT_STOP_AT, OPT_PRINT_CONFIG, OPT_CHECK, OPT_RANKS,
       OPT_DUMP_PARAMS, N_OPTS };
static const TxlToolOption OPTS[N_OPTS] = {
    [OPT_SET] = {"--set", "section.key=value", NULL, NULL,
                 "override one config key (repeatable), e.g. --set train.lr=1e-3"},
    [OPT_BENCH] = {"--bench", "[STEPS]", NULL, NULL,
                   "time STEPS training steps (default 20) on synthetic tokens (Zipf-distributed\n"
                   "ids) after 3 warm-up steps; prints tokens/s, ms/step and the share of the\n"
                   "measured GEMM peak"},
    [OPT_BENCH_WARMUP] = {"--bench-warmup", "N", NULL, NULL, "warm-up steps of --bench (default 3)"},
    [OPT_PROFILE] = {"--profile", NULL, NULL, NULL,
                     "with --bench, on run.device = cuda: also time each op family of the timed\n"
                     "steps with CUDA events (attention, GEMMs by weight, layer norm, optimizer,\n"
                     "all-reduce wait, uploads, ...) and print a table of ms, share, host time and\n"
                     "the achieved TFLOP/s and GB/s of the work counted from the shapes; the\n"
                     "steps are not captured as CUDA graphs and each waits for the device"},
    [OPT_RESUME] = {"--resume", "DIR|FILE", "run.resume", NULL,
                    "continue from a checkpoint (DIR: the newest valid one in it); same as\n"
                    "--set run.resume=DIR|FILE; run.resume=auto continues from work_dir when\n"
                    "it holds a checkpoint and starts fresh otherwise"},
    [OPT_STOP_AT] = {"--stop-at", "STEP", NULL, NULL,
                     "stop after STEP as if signalled: write a checkpoint, exit with status 75"},
    [OPT_PRINT_CONFIG] = {"--print-config", NULL, NULL, NULL, "print the resolved config and exit"},
    [OPT_CHECK] = {"--check", NULL, NULL, NULL,
                   "check the run for --ranks P and run.device without starting it: the config,\n"
                   "the corpus header when the file is here (else data.n_token is needed), the\n"
                   "model's shape; prints the memory per rank; exit status 0 when it can start"},
    [OPT_RANKS] = {"--ranks", "P", NULL, NULL, "the rank count --check checks for (default 1)"},
    [OPT_DUMP_PARAMS] = {"--dump-params", "FILE", NULL, NULL,
                         "after training, write the parameters as raw float32 (table order,\n"
                         "packed as in a checkpoint, host byte order) to FILE, from rank 0: for tests and debugging"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-train CONFIG.ini [options]\n"
          "       mpirun -n P txl-train CONFIG.ini [options]   (P ranks, train.batch_size columns split among them)\n"
          "\n"
          "options:\n");
  txl_tool_options_help(f, OPTS, N_OPTS, 28);
  fprintf(f,
          "  -h, --help                this text, with every config key\n"
          "\n"
          "config keys (INI sections and keys; values are checked, unknown keys are errors):\n");
  txl_config_print_help(f);
  fprintf(f, "\n");
  txl_graph_step_print_rules(f);
}

/* The command line but the config overrides (--set, --resume: read in order over the file). */
typedef struct {
  const char *config_path, *dump_path;
  int bench, bench_steps, bench_warmup, profile, print_only, check, check_ranks, stop_at;
} TrainArgs;

/* Sets the option of row o; i is at the option, and moves past the words it used. */
static void parse_option(TrainArgs *t, int o, int *i, int argc, char **argv) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  switch (o) {
    case OPT_SET:
      if (++*i >= argc) txl_fatal_all("--set needs section.key=value");
      break;
    case OPT_BENCH:
      t->bench = 1;
      if (v && v[0] >= '0' && v[0] <= '9') {
        char *end;
        long n = strtol(argv[++*i], &end, 10);
        if (*end || n < 1 || n > 1000000) txl_fatal_all("--bench %s: expected a step count in [1, 1000000]", argv[*i]);
        t->bench_steps = (int)n;
      }
      break;
    case OPT_BENCH_WARMUP: t->bench_warmup = (int)txl_cli_number(a, v, 0, 1000000, 1), ++*i; break;
    case OPT_PROFILE: t->profile = 1; break;
    case OPT_STOP_AT: t->stop_at = (int)txl_cli_number(a, v, 1, 2147483647.0, 1), ++*i; break;
    case OPT_RESUME:
      if (++*i >= argc) txl_fatal_all("--resume needs a checkpoint file or directory");
      break;
    case OPT_DUMP_PARAMS:
      if (++*i >= argc) txl_fatal_all("--dump-params needs a file name");
      t->dump_path = argv[*i];
      break;
    case OPT_PRINT_CONFIG: t->print_only = 1; break;
    case OPT_CHECK: t->check = 1; break;
    case OPT_RANKS: t->check_ranks = (int)txl_cli_number(a, v, 1, 1048576, 1), ++*i; break;
  }
}

static void parse_args(TrainArgs *t, int argc, char **argv) {
  *t = (TrainArgs){NULL, NULL, 0, 20, 3, 0, 0, 0, 1, 0};
  for (int i = 1; i < argc; i++) {
    const int o = txl_tool_option_find(OPTS, N_OPTS, argv[i]);
    if (o >= 0)
      parse_option(t, o, &i, argc, argv);
    else if (strncmp(argv[i], "--set=", 6))
      txl_cli_positional("txl-train", "config file", argv[i], &t->config_path);
  }
  if (!t->config_path) txl_fatal_all("no config file given (usage: txl-train CONFIG.ini [options], see --help)");
  if (t->profile && !t->bench) txl_fatal_all("--profile profiles the steps of --bench: give --bench too");
}

/* The config file, then the --set and --resume overrides in order. */
static void resolve_config(TxlConfig *cfg, const char *config_path, int argc, char **argv) {
  char err[1024];
  txl_config_defaults(cfg);
  if (txl_config_load_ini(cfg, config_path, err, sizeof err) != 0) txl_fatal_all("%s", err);
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--set")) v = argv[++i];
    else if (!strncmp(argv[i], "--set=", 6)) v = argv[i] + 6;
    if (v && txl_config_set(cfg, v, err, sizeof err) != 0) txl_fatal_all("%s", err);
    if (!strcmp(argv[i], OPTS[OPT_RESUME].name)) {
      char where[64];
      snprintf(where, sizeof where, "--resume %.50s%s", argv[i + 1], strlen(argv[i + 1]) > 50 ? "..." : "");
      if (txl_config_set_key(cfg, OPTS[OPT_RESUME].key, argv[++i], where, err, sizeof err) != 0)
        txl_fatal_all("%s", err);
    }
  }
}

/* Trains (or benchmarks) with the checked config. */
static void run(const TrainArgs *a, TxlConfig *cfg, TxlDist *dist) {
  TxlTrainer t;
  txl_trainer_setup(&t, cfg, dist, a->profile ? TXL_SETUP_PROFILE : a->bench ? TXL_SETUP_BENCH : TXL_SETUP_TRAIN);
  txl_dist_set_timeout(cfg->timeout_s); /* after setup: rank 0 alone scans the corpus there */
  if (a->bench) {
    txl_trainer_bench(&t, a->bench_steps, a->bench_warmup);
  } else {
    t.stop_at = a->stop_at;
    txl_trainer_resume(&t);
    if (a->stop_at > 0 && a->stop_at <= t.st.step) /* the loop would never meet it: the run would go on to max_step */
      txl_fatal_all("--stop-at %d: the run resumed at step %lld, so it would never stop there; give a later step",
                    a->stop_at, (long long)t.st.step);
    txl_trainer_train(&t);
    txl_trainer_generate(&t);
    if (a->dump_path) txl_trainer_dump_params(&t, a->dump_path);
  }
  txl_trainer_teardown(&t);
}

int main(int argc, char **argv) {
  txl_stop_install(); /* before anything else: a request during the start-up is kept for the loop */
  TxlDist dist;
  txl_tool_begin(&dist, &argc, &argv, usage);
  txl_stop_set_rank(dist.rank);
  TrainArgs a;
  parse_args(&a, argc, argv);
  if (a.bench || a.check || a.print_only) txl_stop_uninstall(); /* nothing to checkpoint: signals act as usual */
  TxlConfig cfg;
  resolve_config(&cfg, a.config_path, argc, argv);
  char err[1024], device_note[400];
  txl_config_resolve_device(&cfg, &dist, device_note, sizeof device_note); /* run.device = auto */
  if (device_note[0] && dist.rank == 0 && !a.print_only) printf("%s\n", device_note);
  if (a.check) {
    if (dist.world > 1)
      txl_fatal_all("--check runs in one process (it checks a run of --ranks P without starting it), not under "
                    "mpirun -n %d", dist.world);
    txl_check_run(&cfg, a.config_path, a.check_ranks);
  } else {
    /* its message names where the key that completed a bad combination was set: a --set, or the
     * file's line (the file itself for keys at their default) */
    if (txl_config_validate(&cfg, dist.world, err, sizeof err) != 0) txl_fatal_all("%s", err);
    if (a.print_only) {
      if (dist.rank == 0) txl_config_write_ini(&cfg, stdout, 1);
    } else {
      run(&a, &cfg, &dist);
    }
  }
  txl_dist_finalize();
  return 0;
}
