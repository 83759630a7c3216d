/* Fuzz harness: the configuration (src/config/config.c) on arbitrary INI text and --set
 * assignments, then the checks across keys, and the resolved config written as INI and read
 * back (what a checkpoint stores and txl-eval / a resume read): it must parse and give the same
 * values.
 *
 * Input: byte 0 picks the rank count for txl_config_validate (1 + b % 8) and whether the INI is
 * written with the "# default" marks (b & 8); then the INI text up to the first NUL byte; then
 * up to 8 NUL-separated --set assignments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/config/config.h"
#include "tests/fuzz/fuzz.h"

enum { MAX_SETS = 8 };

typedef struct {
  int world, mark;
  const char *text;
  const char *set[MAX_SETS];
  int n_set;
} Input;

/* The written INI of c, read back over the defaults, must give c's values again. */
static void check_round_trip(const TxlConfig *c, int mark) {
  char *ini = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&ini, &len);
  if (!f) fuzz_fail("open_memstream failed");
  txl_config_write_ini(c, f, mark);
  fclose(f);
  TxlConfig back;
  txl_config_defaults(&back);
  char err[1024], diff[4096];
  if (txl_config_load_ini_text(&back, ini, "written.ini", err, sizeof err) != 0)
    fuzz_fail("the config written as INI does not read back: %s", err);
  if (txl_config_diff(c, &back, 0, diff, sizeof diff) != 0)
    fuzz_fail("the config written as INI reads back with other values: %s", diff);
  free(ini);
}

static void run(void *arg) {
  const Input *in = arg;
  TxlConfig c;
  txl_config_defaults(&c);
  char err[1024];
  if (txl_config_load_ini_text(&c, in->text, "fuzz.ini", err, sizeof err) != 0) return;
  for (int i = 0; i < in->n_set; i++)
    if (txl_config_set(&c, in->set[i], err, sizeof err) != 0) return;
  int cut[TXL_CFG_MAX_CUTOFFS];
  txl_config_cutoffs(&c, c.n_token, cut, err, sizeof err);
  (void)txl_config_eval_mem_len(&c);
  (void)txl_config_eval_clamp_len(&c);
  if (txl_config_validate(&c, in->world, err, sizeof err) != 0) return;
  check_round_trip(&c, in->mark);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  /* a NUL-terminated copy: the parts are the NUL-separated strings in it */
  char *buf = malloc(size);
  if (!buf) return 0;
  memcpy(buf, data + 1, size - 1);
  buf[size - 1] = '\0';
  Input in = {.world = 1 + data[0] % 8, .mark = (data[0] & 8) != 0, .text = buf};
  for (size_t i = 0; i + 1 < size - 1 && in.n_set < MAX_SETS; i++)
    if (buf[i] == '\0') in.set[in.n_set++] = buf + i + 1;
  fuzz_run(run, &in, FUZZ_EXIT_CRASH);
  free(buf);
  return 0;
}
