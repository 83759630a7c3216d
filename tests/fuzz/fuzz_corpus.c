/* Fuzz harness: the corpus reader (data/corpus.c) on a corpus file (the input: mutations of
 * txl-prep's output, tests/fuzz/seeds.sh): open and validate, then what the trainer and the tools
 * do with it: the length of every split, blocks of columns and contiguous ranges of ids, the
 * unigram entropy, every token's bytes looked up back to its id, the vocabulary digest.
 *
 * The reader reports a damaged file with its one-line error and an exit (txl_fatal): such a run
 * ends cleanly here (fuzz.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/corpus.h"
#include "tests/fuzz/fuzz.h"

/* Bounds on the work per input (a damaged header may claim any length; reading 2^40 ids of fill
 * values is slow, not wrong). */
enum { MAX_READ = 1 << 16, MAX_TOKENS = 1 << 12 };

static const char *g_path;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_path = fuzz_path("corpus.h5");
  return 0;
}

/* Blocks of 1 and 2 columns and a range, as the training and evaluation streams read them. */
static void read_split(TxlCorpus *c, const char *split) {
  const int64_t len = txl_corpus_split_length(c, split);
  if (len < 1) return;
  const int64_t n = len < MAX_READ ? len : MAX_READ;
  /* the tracking allocator: an error exit of a read below gives them back too */
  int32_t *ids = fuzz_malloc((size_t)n * sizeof *ids), *scratch = fuzz_malloc((size_t)n * sizeof *ids);
  if (!ids || !scratch) fuzz_fail("out of memory");
  txl_corpus_read_range(c, split, len - n, n, ids);
  const int n_cols = len >= 2 ? 2 : 1;
  const int64_t col_len = len / n_cols;
  const int rows = (int)(col_len < n / n_cols ? col_len : n / n_cols);
  txl_corpus_read_block(c, split, col_len, 0, n_cols, col_len - rows, rows, ids, scratch);
  txl_corpus_read_block(c, split, col_len, n_cols - 1, 1, 0, rows, ids, NULL);
  fuzz_free(ids);
  fuzz_free(scratch);
  if (len <= MAX_READ) (void)txl_corpus_unigram_entropy_bits(c, split);
}

static void run(void *arg) {
  (void)arg;
  TxlCorpus *c = txl_corpus_open(g_path);
  const int64_t V = txl_corpus_vocab_size(c);
  (void)txl_corpus_mode(c);
  (void)txl_corpus_eos_id(c);
  (void)txl_corpus_unk_id(c);
  read_split(c, "train");
  read_split(c, "valid");
  read_split(c, "test");
  for (int64_t id = 0; id < V && id < MAX_TOKENS; id++) {
    size_t len;
    const char *s = txl_corpus_token_bytes(c, id, &len);
    const int64_t back = txl_corpus_token_id_n(c, s, len);
    if (back != id) fuzz_fail("token %" PRId64 " looks up as %" PRId64, id, back);
    (void)txl_corpus_token_string(c, id);
  }
  (void)txl_corpus_token_id(c, "<unk>");
  (void)txl_corpus_token_id_n(c, "\xff\xfe", 2);
  (void)txl_corpus_vocab_digest(c);
  txl_corpus_close(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write_file(g_path, data, size);
  fuzz_run(run, NULL, FUZZ_EXIT_OK);
  return 0;
}
