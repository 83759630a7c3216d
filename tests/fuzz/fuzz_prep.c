/* Fuzz harness: txl-prep (data/prep: the text reader with its universal newlines and strict
 * UTF-8, the word / char / byte tokenizers, the vocabulary rules, the writer) run as the program
 * on three text files made from the input, then its output read back with the corpus reader
 * (data/corpus.c), which must accept it: txl-prep may reject an input with its one-line error,
 * but what it writes is a valid corpus.
 *
 * Input: byte 0: bits 0-1 the mode (word, char, byte, word), bit 2 --lower, bit 3 --vocab-from
 * train, bits 4-5 --dtype (auto, uint8, uint16, uint32); byte 1: --min-freq (b % 4); byte 2:
 * --max-size (b % 8, 0 = none); bytes 3 and 4: where the valid and test texts start (fractions
 * of what follows: b / 256); the rest is the text. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "tests/fuzz/fuzz.h"

int txl_prep_main(int argc, char **argv); /* data/prep/main.c, compiled with main renamed */

enum { HEADER = 5 };

static const char *g_train, *g_valid, *g_test, *g_out;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_train = fuzz_path("train.txt");
  g_valid = fuzz_path("valid.txt");
  g_test = fuzz_path("test.txt");
  g_out = fuzz_path("out.h5");
  return 0;
}

typedef struct {
  char *argv[32];
  int argc;
  char opt[4][32];
} Args;

static void prep(void *arg) {
  Args *a = arg;
  if (txl_prep_main(a->argc, a->argv) != 0) fuzz_fail("txl-prep returned non-zero without an error message");
}

/* txl-prep's output: opens, every id of every split is read and inside the vocabulary, and the
 * vocabulary is one-to-one. */
static void check_output(void *arg) {
  (void)arg;
  char err[1024];
  TxlCorpus *c = txl_corpus_open(g_out, err, sizeof err);
  if (!c) fuzz_fail("the corpus reader refuses txl-prep's output: %s", err);
  int64_t tokens = 0;
  if (txl_corpus_check(c, 0, 1, &tokens, err, sizeof err) != 0) fuzz_fail("txl-prep's output does not check: %s", err);
  const int64_t V = txl_corpus_vocab_size(c);
  static const char *const splits[] = {"train", "valid", "test"};
  for (int k = 0; k < 3; k++) {
    const int64_t n = txl_corpus_split_length(c, splits[k]);
    if (n < 1) fuzz_fail("txl-prep wrote an empty %s split", splits[k]);
    int32_t *ids = fuzz_malloc((size_t)n * sizeof *ids);
    if (!ids) fuzz_fail("out of memory");
    if (txl_corpus_read_range(c, splits[k], 0, n, ids, err, sizeof err) != 0)
      fuzz_fail("txl-prep's %s split does not read: %s", splits[k], err);
    fuzz_free(ids);
  }
  for (int64_t id = 0; id < V; id++) {
    size_t len;
    const char *s = txl_corpus_token_bytes(c, id, &len);
    int64_t back = txl_corpus_token_id_n(c, s, len);
    if (back != id) fuzz_fail("token %" PRId64 " of txl-prep's vocabulary looks up as %" PRId64, id, back);
  }
  (void)txl_corpus_vocab_digest(c);
  txl_corpus_close(c);
}

static void add(Args *a, const char *s) { a->argv[a->argc++] = (char *)s; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < HEADER) return 0;
  static const char *const modes[] = {"word", "char", "byte", "word"};
  static const char *const dtypes[] = {"auto", "uint8", "uint16", "uint32"};
  const uint8_t *text = data + HEADER;
  const size_t n = size - HEADER;
  const size_t a = n * data[3] / 256, b = a + (n - a) * data[4] / 256;
  fuzz_write_file(g_train, text, a);
  fuzz_write_file(g_valid, text + a, b - a);
  fuzz_write_file(g_test, text + b, n - b);
  remove(g_out);

  Args args = {.argc = 0};
  add(&args, "txl-prep");
  add(&args, "--quiet");
  snprintf(args.opt[0], sizeof args.opt[0], "--mode=%s", modes[data[0] & 3]);
  add(&args, args.opt[0]);
  if (data[0] & 4) add(&args, "--lower");
  if (data[0] & 8) add(&args, "--vocab-from=train");
  snprintf(args.opt[1], sizeof args.opt[1], "--dtype=%s", dtypes[(data[0] >> 4) & 3]);
  add(&args, args.opt[1]);
  if (data[1] % 4) {
    snprintf(args.opt[2], sizeof args.opt[2], "--min-freq=%d", data[1] % 4);
    add(&args, args.opt[2]);
  }
  if (data[2] % 8) {
    snprintf(args.opt[3], sizeof args.opt[3], "--max-size=%d", data[2] % 8);
    add(&args, args.opt[3]);
  }
  add(&args, "--train");
  add(&args, g_train);
  add(&args, "--valid");
  add(&args, g_valid);
  add(&args, "--test");
  add(&args, g_test);
  add(&args, "--out");
  add(&args, g_out);
  args.argv[args.argc] = NULL;

  if (fuzz_run(prep, &args, FUZZ_EXIT_OK) == 0) {
    /* the reader exiting on txl-prep's output is a defect of one of the two */
    fuzz_run(check_output, NULL, FUZZ_EXIT_CRASH);
  }
  return 0;
}
