/* Text generation with the trained model: the prompt primes the memory, then one token per
 * forward pass (L = 1), each attending to up to eval_mem_len remembered rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common/philox.h"
#include "src/train/trainer.h"

/* Token ids of the prompt: characters (char/byte corpora) or whitespace-separated words. */
static int prompt_ids(TxlCorpus *c, const char *prompt, int32_t *ids, int cap) {
  int n = 0;
  const int word = strcmp(txl_corpus_mode(c), "word") == 0;
  if (word) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", prompt);
    for (char *tok = strtok(buf, " \t\n"); tok && n < cap; tok = strtok(NULL, " \t\n")) {
      int64_t id = txl_corpus_token_id(c, tok);
      if (id < 0) id = txl_corpus_unk_id(c);
      if (id < 0) txl_fatal("run.sample_prompt: '%s' is not in the vocabulary of %s", tok, txl_corpus_path(c));
      ids[n++] = (int32_t)id;
    }
  } else {
    const int byte_mode = strcmp(txl_corpus_mode(c), "byte") == 0;
    for (const unsigned char *p = (const unsigned char *)prompt; *p && n < cap;) {
      size_t len = 1;
      if (!byte_mode) /* one UTF-8 character */
        while (len < 4 && (p[len] & 0xC0) == 0x80) len++;
      int64_t id = txl_corpus_token_id_n(c, (const char *)p, len);
      if (id < 0)
        txl_fatal("run.sample_prompt: character '%.*s' is not in the vocabulary of %s", (int)len, (const char *)p,
                  txl_corpus_path(c));
      ids[n++] = (int32_t)id;
      p += len;
    }
  }
  if (n == 0) { /* start of a line */
    int64_t id = word ? txl_corpus_eos_id(c) : txl_corpus_token_id(c, "\n");
    ids[n++] = (int32_t)(id >= 0 ? id : 0);
  }
  return n;
}

static void print_token(TxlCorpus *c, int32_t id, int word) {
  if (word) {
    if (id == txl_corpus_eos_id(c)) fputc('\n', stdout);
    else printf("%s ", txl_corpus_token_string(c, id));
  } else {
    size_t len = 0;
    const char *b = txl_corpus_token_bytes(c, id, &len);
    fwrite(b, 1, len, stdout);
  }
}

/* Sample from softmax(logits / temperature) with a Philox uniform keyed by (seed, i). */
static int32_t sample(const float *logits, int V, double temperature, uint32_t seed, uint32_t i, double *p) {
  double mx = -INFINITY, sum = 0.0;
  for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
  for (int v = 0; v < V; v++) sum += p[v] = exp((logits[v] - mx) / temperature);
  TxlPhilox4 r = txl_philox4x32_10(i, 0, 0, 0x5a3u, seed, 0x6e6e6eu);
  double u = ((double)r.v[0] + 0.5) / 4294967296.0 * sum, acc = 0.0;
  for (int v = 0; v < V; v++) {
    acc += p[v];
    if (u < acc) return v;
  }
  return V - 1;
}

void txl_trainer_generate(TxlTrainer *t) {
  const TxlConfig *c = &t->cfg;
  if (c->sample_tokens <= 0 || !t->corpus) return;
  if (t->dist.rank == 0) {
    const int V = t->model.spec.dims.n_token;
    const int word = strcmp(txl_corpus_mode(t->corpus), "word") == 0;
    TxlRunShape gs = {c->eval_tgt_len, 1, 0, txl_config_eval_mem_len(c), txl_config_eval_clamp_len(c),
                      c->eval_same_length, 0};
    TxlRun run;
    txl_run_create(&run, &t->model, &gs);
    int32_t *ids = malloc(4096 * sizeof(int32_t));
    float *row = malloc((size_t)V * sizeof(float));
    double *p = malloc((size_t)V * sizeof(double));
    if (!ids || !row || !p) txl_fatal("out of memory for generation");
    int n = prompt_ids(t->corpus, c->sample_prompt, ids, 4096);
    printf("\n--- sample: %d tokens at temperature %.2f ---\n", c->sample_tokens, c->sample_temperature);
    for (int i = 0; i < n; i++) print_token(t->corpus, ids[i], word);
    int last = 0;
    for (int off = 0; off < n; off += gs.L_max) { /* prime the memory with the prompt */
      last = n - off < gs.L_max ? n - off : gs.L_max;
      txl_model_forward(&t->model, &run, ids + off, NULL, last, t->step, 0, 0.0f);
    }
    for (int i = 0; i < c->sample_tokens; i++) {
      t->ops->to_host(row, run.logits + (size_t)(last - 1) * V, (size_t)V * sizeof(float));
      int32_t next = sample(row, V, c->sample_temperature, (uint32_t)c->seed, (uint32_t)i, p);
      print_token(t->corpus, next, word);
      txl_model_forward(&t->model, &run, &next, NULL, 1, t->step, 0, 0.0f);
      last = 1;
    }
    printf("\n--- end of sample ---\n");
    fflush(stdout);
    free(ids);
    free(row);
    free(p);
    txl_run_destroy(&run, &t->model);
  }
  txl_dist_barrier();
}
