/* txl-train: train a Transformer-XL language model.
 *   mpirun -n P txl-train CONFIG.ini [--set section.key=value ...] [--bench [STEPS]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist.h"
#include "src/base/cli.h"
#include "src/config/config.h"
#include "src/train/check.h"
#include "src/train/trainer.h"

/* Exit status: 0 done; 1 an error (a message on stderr); TXL_EXIT_REQUEUE (75) stopped by SIGTERM or
 * SIGUSR1 after writing a checkpoint, to be requeued. */

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-train CONFIG.ini [options]\n"
          "       mpirun -n P txl-train CONFIG.ini [options]   (P ranks, train.batch_size columns split among them)\n"
          "\n"
          "options:\n"
          "  --set section.key=value   override one config key (repeatable), e.g. --set train.lr=1e-3\n"
          "  --bench [STEPS]           time STEPS training steps (default 20) on synthetic tokens after 3 warm-up\n"
          "                            steps; prints tokens/s, ms/step and the share of the measured GEMM peak\n"
          "  --bench-warmup N          warm-up steps of --bench (default 3)\n"
          "  --resume DIR|FILE         continue from a checkpoint (DIR: the newest valid one in it); same as\n"
          "                            --set run.resume=DIR|FILE; run.resume=auto continues from work_dir when\n"
          "                            it holds a checkpoint and starts fresh otherwise\n"
          "  --stop-at STEP            stop after STEP as if signalled: write a checkpoint, exit with status 75\n"
          "  --print-config            print the resolved config and exit\n"
          "  --check                   check the run for --ranks P and run.device without starting it: the config,\n"
          "                            the corpus header when the file is here (else data.n_token is needed), the\n"
          "                            model's shape; prints the memory per rank; exit status 0 when it can start\n"
          "  --ranks P                 the rank count --check checks for (default 1)\n"
          "  --dump-params FILE        after training, write the parameters as raw float32 (table order,\n"
          "                            host byte order) to FILE, from rank 0: for tests and debugging\n"
          "  -h, --help                this text, with every config key\n"
          "\n"
          "config keys (INI sections and keys; values are checked, unknown keys are errors):\n");
  txl_config_print_help(f);
}

int main(int argc, char **argv) {
  if (txl_cli_wants_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  TxlDist dist;
  txl_dist_init(&dist, &argc, &argv);

  TxlConfig cfg;
  txl_config_defaults(&cfg);
  const char *config_path = NULL;
  int bench = 0, bench_steps = 20, bench_warmup = 3, print_only = 0, check = 0, check_ranks = 1;
  const char *dump_path = NULL;
  int stop_at = 0;
  char err[1024];
  /* the config file first, then the --set overrides in order */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--set")) {
      if (++i >= argc) txl_fatal_all("--set needs section.key=value");
    } else if (!strncmp(a, "--set=", 6)) {
    } else if (!strcmp(a, "--bench")) {
      bench = 1;
      if (i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9') {
        char *end;
        long v = strtol(argv[++i], &end, 10);
        if (*end || v < 1 || v > 1000000) txl_fatal_all("--bench %s: expected a step count in [1, 1000000]", argv[i]);
        bench_steps = (int)v;
      }
    } else if (!strcmp(a, "--bench-warmup")) {
      bench_warmup = (int)txl_cli_number(a, i + 1 < argc ? argv[++i] : NULL, 0, 1000000, 1);
    } else if (!strcmp(a, "--stop-at")) {
      stop_at = (int)txl_cli_number(a, i + 1 < argc ? argv[++i] : NULL, 1, 2147483647.0, 1);
    } else if (!strcmp(a, "--resume")) {
      if (++i >= argc) txl_fatal_all("--resume needs a checkpoint file or directory");
    } else if (!strcmp(a, "--dump-params")) {
      if (++i >= argc) txl_fatal_all("--dump-params needs a file name");
      dump_path = argv[i];
    } else if (!strcmp(a, "--print-config")) {
      print_only = 1;
    } else if (!strcmp(a, "--check")) {
      check = 1;
    } else if (!strcmp(a, "--ranks")) {
      check_ranks = (int)txl_cli_number(a, i + 1 < argc ? argv[++i] : NULL, 1, 1048576, 1);
    } else {
      txl_cli_positional("txl-train", "config file", a, &config_path);
    }
  }
  if (!config_path) txl_fatal_all("no config file given (usage: txl-train CONFIG.ini [options], see --help)");
  if (txl_config_load_ini(&cfg, config_path, err, sizeof err) != 0) txl_fatal_all("%s", err);
  for (int i = 1; i < argc; i++) {
    const char *v = NULL;
    if (!strcmp(argv[i], "--set")) v = argv[++i];
    else if (!strncmp(argv[i], "--set=", 6)) v = argv[i] + 6;
    if (v && txl_config_set(&cfg, v, err, sizeof err) != 0) txl_fatal_all("%s", err);
    if (!strcmp(argv[i], "--resume")) {
      char where[64];
      snprintf(where, sizeof where, "--resume %.50s%s", argv[i + 1], strlen(argv[i + 1]) > 50 ? "..." : "");
      if (txl_config_set_key(&cfg, "run.resume", argv[++i], where, err, sizeof err) != 0) txl_fatal_all("%s", err);
    }
  }
  if (check) {
    if (dist.world > 1)
      txl_fatal_all("--check runs in one process (it checks a run of --ranks P without starting it), not under "
                    "mpirun -n %d", dist.world);
    txl_check_run(&cfg, config_path, check_ranks);
    txl_dist_finalize();
    return 0;
  }
  /* its message names where the key that completed a bad combination was set: a --set, or the
   * file's line (the file itself for keys at their default) */
  if (txl_config_validate(&cfg, dist.world, err, sizeof err) != 0) txl_fatal_all("%s", err);
  if (print_only) {
    if (dist.rank == 0) txl_config_write_ini(&cfg, stdout, 1);
    txl_dist_finalize();
    return 0;
  }

  TxlTrainer t;
  txl_trainer_setup(&t, &cfg, &dist, bench);
  txl_dist_set_timeout(cfg.timeout_s); /* after setup: rank 0 alone scans the corpus there */
  if (bench) {
    txl_trainer_bench(&t, bench_steps, bench_warmup);
  } else {
    t.stop_at = stop_at;
    txl_trainer_resume(&t);
    if (stop_at > 0 && stop_at <= t.step) /* the loop would never meet it: the run would go on to max_step */
      txl_fatal_all("--stop-at %d: the run resumed at step %d, so it would never stop there; give a later step", stop_at,
                    t.step);
    txl_trainer_train(&t);
    txl_trainer_generate(&t);
    if (dump_path) txl_trainer_dump_params(&t, dump_path);
  }
  txl_trainer_teardown(&t);
  txl_dist_finalize();
  return 0;
}
