/* The text side of generation: see gen_text.h. */
#include "src/train/gen_text.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/base/show.h"

enum { TEXT_WORD, TEXT_CHARS, TEXT_SPM, TEXT_BPE };

/* bpe prints as chars and bytes do (a token's bytes), but encodes the prompt with the BPE */
static int text_mode(const TxlCorpus *c) {
  const char *m = txl_corpus_mode(c);
  return !strcmp(m, "word") ? TEXT_WORD : !strcmp(m, "spm") ? TEXT_SPM : !strcmp(m, "bpe") ? TEXT_BPE : TEXT_CHARS;
}

/* spm: the ids of one line of the prompt appended at ids[n]; returns the new count. */
static int spm_line_ids(TxlCorpus *c, const char *text, size_t len, int32_t *ids, int n, int cap) {
  char err[1024];
  int32_t *line;
  int64_t m;
  if (txl_corpus_spm_encode_line(c, text, len, &line, &m, err, sizeof err) != 0) txl_fatal("prompt: %s", err);
  if (m > cap - n) txl_fatal("the prompt is longer than %d tokens", cap);
  memcpy(ids + n, line, (size_t)m * sizeof *ids);
  free(line);
  return n + (int)m;
}

int txl_gen_prompt_ids(TxlCorpus *c, const char *prompt, int32_t *ids, int cap) {
  int n = 0;
  const int mode = text_mode(c);
  if (mode == TEXT_BPE) { /* the whole prompt as one text, as txl-prep encodes a file */
    char err[1024];
    int32_t *all;
    int64_t m;
    if (txl_corpus_bpe_encode(c, prompt, strlen(prompt), &all, &m, err, sizeof err) != 0) txl_fatal("prompt: %s", err);
    if (m > cap) txl_fatal("the prompt is longer than %d tokens", cap);
    memcpy(ids, all, (size_t)m * sizeof *ids);
    free(all);
    n = (int)m;
  } else if (mode == TEXT_SPM) {
    for (const char *p = prompt; *p;) {
      const char *nl = strchr(p, '\n');
      n = spm_line_ids(c, p, nl ? (size_t)(nl - p) : strlen(p), ids, n, cap);
      if (!nl) break;
      if (n == cap) txl_fatal("the prompt is longer than %d tokens", cap);
      ids[n++] = (int32_t)txl_corpus_eos_id(c);
      p = nl + 1;
    }
  } else if (mode == TEXT_WORD) {
    char *buf = strdup(prompt);
    if (!buf) txl_fatal("out of memory for the prompt");
    for (char *tok = strtok(buf, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
      if (n == cap) txl_fatal("the prompt is longer than %d tokens", cap);
      int64_t id = txl_corpus_token_id(c, tok);
      if (id < 0) id = txl_corpus_unk_id(c);
      char shown[4 * 64 + 1];
      if (id < 0)
        txl_fatal("prompt: '%s%s' is not in the vocabulary of %s",
                  txl_show_bytes(shown, sizeof shown, tok, strnlen(tok, 64), 0), strlen(tok) > 64 ? "..." : "",
                  txl_corpus_path(c));
      ids[n++] = (int32_t)id;
    }
    free(buf);
  } else {
    const int byte_mode = strcmp(txl_corpus_mode(c), "byte") == 0;
    for (const unsigned char *p = (const unsigned char *)prompt; *p;) {
      if (n == cap) txl_fatal("the prompt is longer than %d tokens", cap);
      size_t len = 1;
      if (!byte_mode) /* one UTF-8 character */
        while (len < 4 && (p[len] & 0xC0) == 0x80) len++;
      int64_t id = txl_corpus_token_id_n(c, (const char *)p, len);
      char shown[4 * 4 + 1]; /* a control byte as \xHH, not raw on the terminal */
      if (id < 0)
        txl_fatal("prompt: character '%s' is not in the vocabulary of %s",
                  txl_show_bytes(shown, sizeof shown, (const char *)p, len, byte_mode), txl_corpus_path(c));
      ids[n++] = (int32_t)id;
      p += len;
    }
  }
  if (n == 0) { /* start of a line (bpe: <|endoftext|>, else the newline token) */
    int64_t id = mode == TEXT_CHARS ? txl_corpus_token_id(c, "\n") : txl_corpus_eos_id(c);
    if (mode == TEXT_BPE && id < 0) id = txl_corpus_token_id(c, "\n");
    ids[n++] = (int32_t)(id >= 0 ? id : 0);
  }
  return n;
}

void txl_gen_text_init(TxlGenText *t, TxlCorpus *c, FILE *out) {
  memset(t, 0, sizeof *t);
  t->c = c;
  t->out = out;
  t->mode = text_mode(c);
}

/* spm: decodes and prints the kept line. */
static void spm_flush(TxlGenText *t) {
  char err[1024], *text;
  size_t len;
  if (txl_corpus_spm_decode_line(t->c, t->line, t->n, &text, &len, err, sizeof err) != 0) txl_fatal("%s", err);
  fwrite(text, 1, len, t->out);
  free(text);
  t->n = 0;
}

void txl_gen_text_put(TxlGenText *t, int32_t id) {
  if (!t->out) return;
  if (t->mode == TEXT_SPM) {
    if (id == txl_corpus_eos_id(t->c)) {
      spm_flush(t);
      fputc('\n', t->out);
      return;
    }
    if (t->n == t->cap) {
      t->cap = t->cap ? 2 * t->cap : 256;
      t->line = realloc(t->line, (size_t)t->cap * sizeof *t->line);
      ALLOC_CHECK(t->line);
    }
    t->line[t->n++] = id;
  } else if (t->mode == TEXT_WORD) {
    if (id == txl_corpus_eos_id(t->c)) fputc('\n', t->out);
    else fprintf(t->out, "%s ", txl_corpus_token_string(t->c, id));
  } else {
    size_t len = 0;
    const char *b = txl_corpus_token_bytes(t->c, id, &len);
    fwrite(b, 1, len, t->out);
  }
}

void txl_gen_text_finish(TxlGenText *t) {
  if (t->out && t->mode == TEXT_SPM && t->n > 0) spm_flush(t);
  free(t->line);
  t->line = NULL;
  t->n = t->cap = 0;
}
