/* Fuzz harness: the tokenizer files of txl-prep --mode bpe. The input is a tokenizer.json: the
 * JSON parser (data/prep/json.c) must return a tree or its error, never exit or crash; then the
 * tokenizer is loaded as txl-prep loads it (data/prep/bpe_prep.c, which may reject it with its
 * one-line error), and when it loads, the input's own bytes are encoded (data/bpe.c) and the ids
 * must decode back to them (decoding is concatenating the tokens' bytes). */
#include <stdint.h>
#include <string.h>

#include "data/prep/bpe_prep.h"
#include "data/prep/json.h"
#include "tests/fuzz/fuzz.h"

static const char *g_path;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_path = fuzz_path("tokenizer.json");
  return 0;
}

typedef struct {
  const uint8_t *data;
  size_t size;
} Input;

static void parse(void *arg) {
  const Input *in = arg;
  JsonValue root;
  char err[512];
  if (json_parse((const char *)in->data, in->size, &root, err, sizeof err) == 0) json_free(&root);
  else if (!strstr(err, "line ")) fuzz_fail("a JSON error without its line: %s", err);
}

static void load(void *arg) {
  const Input *in = arg;
  BpePrep b;
  bpe_prep_load_tokenizer(&b, g_path);
  TxlBpeIds ids = {0};
  if (txl_bpe_encode(b.bpe, (const char *)in->data, in->size, &ids) != 0) fuzz_fail("encoding ran out of memory");
  size_t at = 0;
  for (size_t i = 0; i < ids.n; i++) {
    const int32_t id = ids.id[i];
    if (id < 0 || id >= b.size) fuzz_fail("id %d outside the vocabulary of %lld", id, (long long)b.size);
    if (b.tok_len[id] > in->size - at || memcmp(b.tok[id], in->data + at, b.tok_len[id]) != 0)
      fuzz_fail("the ids do not decode to the text (at byte %zu)", at);
    at += b.tok_len[id];
  }
  if (at != in->size) fuzz_fail("the ids decode to %zu of the text's %zu bytes", at, in->size);
  fuzz_free(ids.id); /* allocated by the code under test: its tracked allocator */
  bpe_prep_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in = {data, size};
  fuzz_run(parse, &in, FUZZ_EXIT_CRASH);
  fuzz_write_file(g_path, data, size);
  fuzz_run(load, &in, FUZZ_EXIT_OK);
  return 0;
}
