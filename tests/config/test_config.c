/* src/config: the INI parser, --set, the key ranges and the combination checks. Each defect the
 * config issue names has a case here: a duplicate key, a NUL byte, values shown rounded, --set
 * errors blamed on the file, ranges that let a run do nothing or make NaN, sizes that overflow
 * an int. Then a property check over generated INI-like text: every input is either read (and
 * then written and read back to the same values) or refused with one line naming the text.
 *   test_config WORK_DIR */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/config/config.h"

static int failures = 0;
static char path[1024]; /* WORK_DIR/t.ini: each case's file */

static void check(int ok, const char *what, const char *detail) {
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail && *detail ? ": " : "", detail ? detail : "");
  if (!ok) failures++;
}

/* Writes len bytes to the case's file and reads it over the defaults. */
static int load(TxlConfig *c, const char *bytes, size_t len, char *err) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
  txl_config_defaults(c);
  err[0] = 0;
  return txl_config_load_ini(c, path, err, 1024);
}

/* The file must be refused with a message that holds every one of `want` (NULL-terminated). */
static void refused(const char *what, const char *bytes, size_t len, const char *const *want) {
  TxlConfig c;
  char err[1024];
  int ok = load(&c, bytes, len, err) != 0;
  for (int i = 0; ok && want[i]; i++) ok = strstr(err, want[i]) != NULL;
  check(ok, what, err[0] ? err : "accepted");
}
#define REFUSED(what, text, ...) refused(what, text, sizeof text - 1, (const char *const[]){__VA_ARGS__, NULL})

static void accepted(const char *what, const char *bytes, size_t len, TxlConfig *c) {
  char err[1024];
  check(load(c, bytes, len, err) == 0, what, err);
}
#define ACCEPTED(what, text, c) accepted(what, text, sizeof text - 1, c)

/* The file is read, then validated for `world` ranks; the validation's message must start with
 * `prefix` and hold `want`. */
static void invalid_on(int world, const char *what, const char *text, const char *prefix, const char *want) {
  TxlConfig c;
  char err[1024];
  if (load(&c, text, strlen(text), err) != 0) {
    check(0, what, err);
    return;
  }
  err[0] = 0;
  int ok = txl_config_validate(&c, world, err, sizeof err) != 0 && !strncmp(err, prefix, strlen(prefix)) &&
           strstr(err, want);
  check(ok, what, err[0] ? err : "valid");
}
#define invalid(...) invalid_on(1, __VA_ARGS__)

static void parser_cases(void) {
  TxlConfig c;
  char at[1100];
  snprintf(at, sizeof at, "%s:3", path);
  REFUSED("a key given twice names the file, both lines and the key", "[model]\nn_layer = 3\nn_layer = 5\n", at,
          "model.n_layer", "lines 2 and 3");
  ACCEPTED("the same key in two [model] blocks is still one key ... ", "[model]\nn_layer = 3\n[train]\nlr = 0.001\n",
           &c);
  REFUSED("... and given twice across them is refused",
          "[model]\nn_layer = 3\n[train]\nlr = 0.001\n[model]\nn_layer = 4\n", "model.n_layer", "lines 2 and 6");
  snprintf(at, sizeof at, "%s:2", path);
  REFUSED("a NUL byte inside a value", "[data]\ncorpus = /data/a\0b.h5\n", at, "NUL");
  REFUSED("a NUL byte ending the file", "[data]\ncorpus = /data/a.h5\0", at, "NUL");
  REFUSED("a control byte", "[data]\ncorpus = /data/a\x01.h5\n", at, "0x01");
  REFUSED("a lone CR (old Mac line ends) is not taken for a line end", "[model]\rn_layer = 3\r", "0x0d");

  ACCEPTED("CRLF line ends", "[model]\r\nn_layer = 3\r\n", &c);
  check(c.n_layer == 3, "CRLF: n_layer = 3", NULL);
  ACCEPTED("a UTF-8 byte-order mark", "\xEF\xBB\xBF[model]\nn_layer = 3\n", &c);
  check(c.n_layer == 3, "BOM: n_layer = 3", NULL);
  ACCEPTED("a comment after a section header", "[model]   # the model\nn_layer = 3\n", &c);
  REFUSED("text after a section header", "[model] x\nn_layer = 3\n", "malformed section header");
  REFUSED("a section header without ']'", "[model\nn_layer = 3\n", "malformed section header");
  REFUSED("a key outside any section", "n_layer = 3\n", "outside any [section]");
  REFUSED("a line without '='", "[model]\nn_layer 3\n", "expected 'key = value'");
  REFUSED("'=' without a key", "[model]\n = 3\n", "no key before '='");
  ACCEPTED("a comment right after '=' leaves the value empty", "[data]\ncorpus = # none yet\n", &c);
  check(c.corpus[0] == 0, "corpus is empty", c.corpus);

  REFUSED("trailing text after an integer", "[model]\nn_layer = 3x\n", "model.n_layer: '3x' is not an integer");
  REFUSED("two integers", "[model]\nn_layer = 3 4\n", "'3 4' is not an integer");
  REFUSED("a hex integer", "[model]\nn_layer = 0x10\n", "'0x10' is not an integer");
  REFUSED("an integer beyond 64 bits", "[model]\nn_layer = 99999999999999999999\n",
          "model.n_layer = 99999999999999999999 is out of range [1, 1024]");
  REFUSED("an integer beyond 32 bits", "[train]\nseed = 4294967297\n", "train.seed = 4294967297 is out of range");
  REFUSED("a hex float", "[train]\nlr = 0x1p-10\n", "'0x1p-10' is not a decimal number");
  REFUSED("inf", "[train]\nclip = inf\n", "'inf' is not a decimal number");
  REFUSED("infinity", "[train]\nclip = infinity\n", "'infinity' is not a decimal number");
  REFUSED("nan", "[train]\nlr = nan\n", "'nan' is not a decimal number");
  REFUSED("1e999 (a double's overflow)", "[train]\nclip = 1e999\n", "train.clip = 1e999 is out of range [0, 1e30]");
  REFUSED("trailing text after a float", "[train]\nlr = 0.001abc\n", "'0.001abc' is not a decimal number");
  ACCEPTED("decimal forms: .5, 5., 2.5E-4, +1",
           "[model]\ndropout = .5\n[train]\nclip = 5.\nlr = 2.5E-4\nbeta1 = +0.5\n", &c);
  check(c.dropout == 0.5 && c.clip == 5.0 && c.lr == 2.5e-4 && c.beta1 == 0.5, "their values", NULL);

  ACCEPTED("a quoted value keeps blanks, '#', ';' and escapes",
           "[run]\nsample_prompt = \"  ROMEO: # not a comment; \\\"x\\\" \\\\ \\n\"  # a comment\n", &c);
  check(!strcmp(c.sample_prompt, "  ROMEO: # not a comment; \"x\" \\ \n"), "its value", c.sample_prompt);
  REFUSED("an unterminated quote", "[run]\nsample_prompt = \"ROMEO\n", "unterminated quote");
  REFUSED("text after the closing quote", "[run]\nsample_prompt = \"ROMEO\" x\n", "text after the closing quote");
  REFUSED("an unknown escape", "[run]\nsample_prompt = \"a\\qb\"\n", "unknown escape");
  REFUSED("a backslash ending a quoted line", "[run]\nsample_prompt = \"ab\\\n", "unterminated quote");

  /* a value is never cut: a long one is refused, however long its line */
  char longv[8192];
  int n = snprintf(longv, sizeof longv, "[run]\nsample_prompt = ");
  memset(longv + n, 'x', 5000);
  n += 5000;
  longv[n++] = '\n';
  longv[n] = 0;
  refused("a value longer than TXL_CFG_STRLEN - 1", longv, (size_t)n, (const char *const[]){"longer than 511", NULL});
  n = snprintf(longv, sizeof longv, "[run]\nsample_prompt = ");
  memset(longv + n, 'x', 511);
  n += 511;
  longv[n] = 0;
  accepted("a value of exactly 511 bytes", longv, (size_t)n, &c);
  check(strlen(c.sample_prompt) == 511, "all 511 kept", NULL);
  n = snprintf(longv, sizeof longv, "[run]\n#");
  memset(longv + n, 'c', 6000);
  n += 6000;
  n += snprintf(longv + n, sizeof longv - (size_t)n, "\nwork_dir = r\n");
  accepted("a comment line of 6000 bytes", longv, (size_t)n, &c);
}

static void value_as_given(void) {
  /* 0.9999999 printed with %g is "1": the message must show what was written */
  REFUSED("a value out of range is shown as written", "[train]\nbeta1 = 0.9999999\n",
          "train.beta1 = 0.9999999 is out of range [0, 0.999999]");
  REFUSED("the range as config.def writes it", "[train]\nbeta2 = 0.99999999\n",
          "train.beta2 = 0.99999999 is out of range [0, 0.9999999]");
  TxlConfig c;
  char err[1024];
  txl_config_defaults(&c);
  check(txl_config_set(&c, "train.lr=1\n2", err, sizeof err) != 0 && !strchr(err, '\n'),
        "a --set value holding a newline gives a one-line message", err);
  /* the resolved config (config.ini, the checkpoint's copy) holds the values themselves */
  char text[256];
  snprintf(text, sizeof text, "[train]\nlr = 0.000123456789012345\neta_min = 1.0000000000000002e-06\n");
  if (load(&c, text, strlen(text), err) != 0) {
    check(0, "17-digit values", err);
    return;
  }
  FILE *f = fopen(path, "w");
  txl_config_write_ini(&c, f, 0);
  fclose(f);
  TxlConfig back;
  txl_config_defaults(&back);
  check(txl_config_load_ini(&back, path, err, sizeof err) == 0 && back.lr == c.lr && back.eta_min == c.eta_min,
        "17-digit values survive write_ini and a reread", err);
}

static void set_names_set(void) {
  TxlConfig c;
  char err[1024];
  txl_config_defaults(&c);
  check(txl_config_set(&c, "train.lr=abc", err, sizeof err) != 0 && !strncmp(err, "--set train.lr=abc: ", 20),
        "a bad --set value names the --set", err);
  check(txl_config_set(&c, "model.n_layerz=2", err, sizeof err) != 0 &&
            strstr(err, "--set model.n_layerz=2: unknown key"),
        "an unknown --set key names the --set", err);
  /* a combination made bad by a --set is blamed on the --set, not on the file's line */
  const char *text = "[train]\nmax_step = 10\n";
  if (load(&c, text, strlen(text), err) != 0) {
    check(0, "file", err);
    return;
  }
  check(txl_config_set(&c, "train.warmup_step=20", err, sizeof err) == 0, "--set train.warmup_step=20", err);
  check(txl_config_validate(&c, 1, err, sizeof err) != 0 &&
            !strncmp(err, "--set train.warmup_step=20: train.warmup_step = 20 exceeds train.max_step = 10", 79),
        "warmup_step from --set beyond the file's max_step blames the --set", err);
  char at[1100];
  snprintf(at, sizeof at, "%s:3: ", path);
  invalid("a bad combination in the file is blamed on the line that completed it",
          "[train]\nmax_step = 10\nwarmup_step = 20\n", at, "warmup_step = 20 exceeds");
  snprintf(at, sizeof at, "%s:2: ", path);
  invalid("... whichever of its keys comes last", "[train]\nwarmup_step = 300000\n", at,
          "exceeds train.max_step = 200000");
  /* 61 ranks for the default 60 columns (and 10 evaluation columns): refused whatever the rule */
  snprintf(at, sizeof at, "%s: ", path);
  invalid_on(61, "keys at their default are blamed on the file", "[model]\n# defaults only\n", at, "batch_size = ");
}

static void ranges(void) {
  char at[1100];
  snprintf(at, sizeof at, "%s:2: ", path);
  invalid("max_eval_steps = 0 (a validation of no tokens: loss -nan, no best checkpoint)",
          "[eval]\nmax_eval_steps = 0\n", at, "eval.max_eval_steps = 0");
  invalid("lr = 0 (trains nothing)", "[train]\nlr = 0\n", at, "train.lr = 0 would train nothing");
  invalid("lr = 1e-50 (0 in single precision)", "[train]\nlr = 1e-50\neta_min = 0\n", at, "train.lr = 1e-50");
  invalid("d_embed = 0 (no embedding width; -1 is d_model)", "[model]\nd_embed = 0\n", at, "model.d_embed = 0");
  invalid("an empty work_dir (files in /)", "[run]\nwork_dir =\n", at, "run.work_dir is empty");
  snprintf(at, sizeof at, "%s:3: ", path);
  invalid("tgt_len x batch_size beyond an int (the GEMMs' row count)",
          "[train]\ntgt_len = 1048576\nbatch_size = 4096\n", at, "more than 2147483647");
  invalid("eval rows beyond an int", "[eval]\neval_tgt_len = 1048576\neval_batch_size = 4096\n", at,
          "more than 2147483647");
  REFUSED("beta2 that rounds to 1 in single precision (NaN after one step)", "[train]\nbeta2 = 0.99999999\n",
          "out of range");
  REFUSED("adam_eps = 0 (0 / 0 for a parameter never given a gradient)", "[train]\nadam_eps = 0\n", "out of range");
  REFUSED("bucket_mb beyond an MPI count of floats", "[dist]\nbucket_mb = 10000\n", "out of range [0.0001, 4096]");
  snprintf(at, sizeof at, "%s:2: ", path);
  invalid("a cutoff beyond an int", "[model]\ncutoffs = 4294967297\n", at, "4294967297 is not a token id");
  invalid("a trailing comma in cutoffs", "[model]\ncutoffs = 10,20,\n", at, "a comma with no token id after it");
  /* the largest values the ranges allow are usable: beta1, beta2 below 1 in single precision */
  TxlConfig c;
  ACCEPTED("beta1 and beta2 at their upper bounds", "[train]\nbeta1 = 0.999999\nbeta2 = 0.9999999\n", &c);
  check((float)c.beta1 < 1.0f && (float)c.beta2 < 1.0f, "both below 1 as floats", NULL);
  char err[1024];
  const char *big = "[train]\ntgt_len = 16384\nmem_len = 16384\nbatch_size = 65536\n";
  load(&c, big, strlen(big), err);
  check(txl_config_validate(&c, 1, err, sizeof err) != 0, "(16384 + 16384) x 65536 rows on 1 rank: refused", err);
  err[0] = 0;
  check(txl_config_validate(&c, 2, err, sizeof err) == 0, "the same on 2 ranks (2^30 rows each): accepted", err);
  /* dev_perf decays on validation losses: it needs validations, and a decay_rate in (0, 1) */
  const char *dp = "[train]\nscheduler = dev_perf\neval_interval = 0\n";
  load(&c, dp, strlen(dp), err);
  check(txl_config_validate(&c, 1, err, sizeof err) != 0 && strstr(err, "train.scheduler = dev_perf") &&
            strstr(err, "train.eval_interval = 0") && !strchr(err, '\n'),
        "dev_perf with eval_interval = 0: refused in one line naming both keys", err);
  c.eval_interval = 100;
  err[0] = 0;
  check(txl_config_validate(&c, 1, err, sizeof err) == 0, "dev_perf with eval_interval = 100: accepted", err);
  c.decay_rate = 1.0;
  check(txl_config_validate(&c, 1, err, sizeof err) != 0 && strstr(err, "train.decay_rate = 1 must lie in (0, 1)"),
        "decay_rate = 1: refused", err);
  c.decay_rate = 0.0;
  check(txl_config_validate(&c, 1, err, sizeof err) != 0, "decay_rate = 0: refused", err);
}

/* model.attn_type: an ENUM_NUM key, named, or numbered as the original (and the INI files and
 * checkpoints written before the names); the numbers are its own, not every ENUM key's */
static void attn_type_names(void) {
  static const char *const names[] = {"rel", "shaw", "abs_sin", "abs_learned"};
  static const int kinds[] = {TXL_ATTN_REL, TXL_ATTN_SHAW, TXL_ATTN_ABS_SIN, TXL_ATTN_ABS_LEARNED};
  TxlConfig c, n;
  char err[1024], text[128], what[160];
  for (int t = 0; t < 4; t++) {
    snprintf(text, sizeof text, "[model]\nattn_type = %s\n", names[t]);
    snprintf(what, sizeof what, "attn_type = %s", names[t]);
    accepted(what, text, strlen(text), &c);
    check(c.attn_type == kinds[t] && c.attn_type == t, what, names[t]);
    snprintf(text, sizeof text, "[model]\nattn_type = %d\n", t);
    snprintf(what, sizeof what, "attn_type = %d (the original's number) is %s", t, names[t]);
    accepted(what, text, strlen(text), &n);
    check(n.attn_type == kinds[t], what, NULL);
    char diff[256] = "";
    snprintf(what, sizeof what, "attn_type = %d and = %s: no difference on resume", t, names[t]);
    check(txl_config_diff(&c, &n, 1, diff, sizeof diff) == 0, what, diff);
    snprintf(text, sizeof text, "model.attn_type=%d", t);
    txl_config_defaults(&n);
    snprintf(what, sizeof what, "--set %s", text);
    check(txl_config_set(&n, text, err, sizeof err) == 0 && n.attn_type == kinds[t], what, err);
    check(txl_config_choice_value(TXL_CFG_KEY_attn_type, names[t]) == t &&
              !strcmp(txl_config_choice_name(TXL_CFG_KEY_attn_type, t), names[t]) && !strcmp(txl_attn_name(t), names[t]),
          "the config's choice name is TxlAttnType's", names[t]);
  }
  /* the config text (config.ini, the checkpoint's copy) writes the name */
  ACCEPTED("attn_type = 3", "[model]\nattn_type = 3\n", &c);
  FILE *f = fopen(path, "w");
  txl_config_write_ini(&c, f, 0);
  fclose(f);
  f = fopen(path, "r");
  char line[256];
  int named = 0, numbered = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "attn_type ", 10)) named = strstr(line, "= abs_learned\n") != NULL, numbered = strstr(line, "3") != NULL;
  }
  fclose(f);
  check(named && !numbered, "write_ini writes attn_type = abs_learned, not 3", NULL);
  /* the diff of a resume names the kinds */
  ACCEPTED("attn_type = 1", "[model]\nattn_type = 1\n", &n);
  char diff[256] = "";
  check(txl_config_diff(&n, &c, 1, diff, sizeof diff) == 1 && !strcmp(diff, "model.attn_type shaw -> abs_learned"),
        "the resume diff: model.attn_type shaw -> abs_learned", diff);
  REFUSED("a bad attn_type name", "[model]\nattn_type = relative\n",
          "model.attn_type: 'relative' is not one of rel|shaw|abs_sin|abs_learned or their numbers 0-3");
  REFUSED("attn_type = 4 (no such number)", "[model]\nattn_type = 4\n", "model.attn_type: '4' is not one of");
  REFUSED("attn_type = -1", "[model]\nattn_type = -1\n", "model.attn_type: '-1' is not one of");
  REFUSED("attn_type = 1.0 (not an integer)", "[model]\nattn_type = 1.0\n", "model.attn_type: '1.0' is not one of");
  REFUSED("attn_type = 99999999999999999999", "[model]\nattn_type = 99999999999999999999\n", "is not one of");
  REFUSED("a name's case matters", "[model]\nattn_type = Shaw\n", "model.attn_type: 'Shaw' is not one of");
  ACCEPTED("attn_type = +2: read as an INT key reads it (as before the names)", "[model]\nattn_type = +2\n", &c);
  check(c.attn_type == TXL_ATTN_ABS_SIN, "+2 is abs_sin", NULL);
  /* the other ENUM keys take their names only */
  REFUSED("run.device = 1 (an ENUM key without numbers)", "[run]\ndevice = 1\n", "run.device: '1' is not one of cpu|cuda|auto");
  REFUSED("train.optim = 0", "[train]\noptim = 0\n", "train.optim: '0' is not one of adam|lamb|sgd");
  check(txl_config_choice_value(TXL_CFG_KEY_device, "1") == -1 && txl_config_choice_value(TXL_CFG_KEY_attn_type, "1") == 1,
        "txl_config_choice_value: a number for attn_type only", NULL);
  /* the combination checks name the kind, and its number */
  invalid("shaw with bf16 on a GPU", "[model]\nattn_type = 1\n[run]\ndevice = cuda\nprecision = bf16\n", path,
          "model.attn_type = shaw (1 in the original) keeps its per-key bias");
  invalid("abs_learned with longer evaluation segments", "[model]\nattn_type = abs_learned\n[eval]\neval_tgt_len = 301\n",
          path, "model.attn_type = abs_learned (3 in the original) learns one position per row");
}

/* ---- generated text ------------------------------------------------------------------------ */

static uint64_t rng = 88172645463325252ull;
static unsigned next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng >> 32);
}

/* INI-like text: lines of a section header, `key = value` (mostly a key of the current section)
 * with a value of random pieces, or a comment, each now and then damaged by a stray byte; or a
 * soup of the same pieces. */
static size_t generate(char *text, size_t cap) {
  static const struct {
    const char *header, *key[4];
  } sec[] = {{"[model]", {"n_layer", "dropout", "cutoffs", "pre_lnorm"}},
             {"[train]", {"lr", "seed", "scheduler", "clip"}},
             {"[run]", {"sample_prompt", "work_dir", "resume", "device"}},
             {"[data]", {"corpus", "n_token", "corpus", "x"}},
             {"[ eval ]", {"eval_mem_len", "max_eval_steps", "eval_same_length", ""}}};
  static const char *piece[] = {"\"", "\\", "\\n", "\\\"", "#", ";", " ", "\t", "=", "[", "]", "1", "-1", "0", "3",
                                "1e5", "1e-400", "0x1", ".", "+", "e", "99999999999", "true", "cosine", "10,20", ",",
                                "x", "ROMEO:", "\xEF\xBB\xBF", "\xff", "\r", "\r\n", "\n", "a b", "corpora/x.h5"};
  const int n_sec = (int)(sizeof sec / sizeof sec[0]), n_piece = (int)(sizeof piece / sizeof piece[0]);
  const int soup = next() % 4 == 0;
  int cur = (int)(next() % (unsigned)n_sec);
  size_t len = 0;
  const int lines = 1 + (int)(next() % 12);
  for (int l = 0; l < lines; l++) {
    char line[512];
    int n = 0;
    const unsigned kind = next() % 8;
    if (soup) {
      for (int p = (int)(next() % 8); p >= 0; p--)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s", piece[next() % (unsigned)n_piece]);
    } else if (l == 0 || kind == 0) {
      cur = (int)(next() % (unsigned)n_sec);
      n = snprintf(line, sizeof line, "%s\n", sec[cur].header);
    } else if (kind == 1) {
      n = snprintf(line, sizeof line, "; %s\n", piece[next() % (unsigned)n_piece]);
    } else {
      const int other = next() % 8 == 0 ? (int)(next() % (unsigned)n_sec) : cur; /* a key of another section */
      n = snprintf(line, sizeof line, "%s%s", sec[other].key[next() % 4], next() % 2 ? " = " : "=");
      for (int p = (int)(next() % 4); p >= 0; p--)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s", piece[next() % (unsigned)n_piece]);
      n += snprintf(line + n, sizeof line - (size_t)n, "\n");
    }
    if (n > 0 && next() % 16 == 0)
      line[next() % (unsigned)n] = (char)(1 + next() % 255); /* never NUL: the text API stops there */
    if (n <= 0 || len + (size_t)n + 1 >= cap) break;
    memcpy(text + len, line, (size_t)n);
    len += (size_t)n;
  }
  text[len] = 0;
  return len;
}

/* Every input is refused with one line naming the text, or read; what is read writes out and
 * reads back to the same values. */
static void generated(void) {
  const int N = 20000;
  int bad_msg = 0, bad_trip = 0, read_ok = 0;
  char text[4096], err[1024], first[1400] = "";
  for (int t = 0; t < N; t++) {
    const size_t len = generate(text, sizeof text);
    TxlConfig c;
    txl_config_defaults(&c);
    err[0] = 0;
    int rc;
    const char *name = "gen";
    if (t % 10 == 0 && len) { /* NUL bytes too: through a file (the text API stops at the first) */
      for (int k = (int)(next() % 3); k >= 0; k--) text[next() % len] = 0;
      rc = load(&c, text, len, err);
      name = path;
    } else {
      rc = txl_config_load_ini_text(&c, text, name, err, sizeof err);
    }
    if (rc != 0) {
      int one_line = !strncmp(err, name, strlen(name));
      for (const char *p = err; *p; p++) one_line &= (unsigned char)*p >= 0x20;
      if (!one_line && !bad_msg++) snprintf(first, sizeof first, "message '%.300s'", err);
      continue;
    }
    read_ok++;
    FILE *f = fopen(path, "w");
    txl_config_write_ini(&c, f, 1);
    fclose(f);
    TxlConfig back;
    txl_config_defaults(&back);
    char diff[2048] = "";
    if (txl_config_load_ini(&back, path, err, sizeof err) != 0 || txl_config_diff(&c, &back, 0, diff, sizeof diff) ||
        strcmp(c.sample_prompt, back.sample_prompt) || strcmp(c.work_dir, back.work_dir) || c.lr != back.lr ||
        c.dropout != back.dropout) {
      if (!bad_trip++) snprintf(first, sizeof first, "round trip of '%.200s': %.300s%.300s", text, err, diff);
    }
  }
  char detail[1600];
  snprintf(detail, sizeof detail, "%d of %d read; %d bad messages, %d bad round trips; %s", read_ok, N, bad_msg,
           bad_trip, first);
  check(bad_msg == 0 && bad_trip == 0 && read_ok > N / 20, "generated INI text", detail);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_config WORK_DIR\n");
    return 2;
  }
  if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
    perror(argv[1]);
    return 2;
  }
  snprintf(path, sizeof path, "%s/t.ini", argv[1]);
  parser_cases();
  value_as_given();
  set_names_set();
  ranges();
  attn_type_names();
  generated();
  printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
