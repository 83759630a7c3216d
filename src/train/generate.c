/* Text generation: see generate.h. */
#include "src/train/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/philox.h"
#include "src/base/error.h"
#include "src/base/timer.h"
#include "src/train/gen_text.h"
#include "src/train/trainer.h"

#define TXL_PROMPT_MAX 65536

typedef struct {
  double *p;
  int32_t *idx;
} Sampler;

static const double *g_sort_p; /* qsort has no context argument */
static int by_prob_desc(const void *a, const void *b) {
  const int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
  if (g_sort_p[i] != g_sort_p[j]) return g_sort_p[i] > g_sort_p[j] ? -1 : 1;
  return i < j ? -1 : (i > j); /* ties: the smaller id first, so the order is total */
}

/* Samples from softmax(logits / T), cut to the top_k most likely and to the smallest set whose
 * mass reaches top_p, with the Philox uniform keyed by (seed, i). */
static int32_t sample(Sampler *s, const float *logits, int V, const TxlGenOptions *o, uint32_t i) {
  double mx = -INFINITY, sum = 0.0;
  for (int v = 0; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
  for (int v = 0; v < V; v++) sum += s->p[v] = exp((logits[v] - mx) / o->temperature);
  const TxlPhilox4 r = txl_philox4x32_10(i, 0, 0, 0x5a3u, o->seed, 0x6e6e6eu);
  const double u01 = ((double)r.v[0] + 0.5) / 4294967296.0;
  if (o->top_k <= 0 && o->top_p >= 1.0) {
    double u = u01 * sum, acc = 0.0;
    for (int v = 0; v < V; v++)
      if (u < (acc += s->p[v])) return v;
    return V - 1;
  }
  for (int v = 0; v < V; v++) s->idx[v] = v;
  g_sort_p = s->p;
  qsort(s->idx, (size_t)V, sizeof *s->idx, by_prob_desc);
  int keep = o->top_k > 0 && o->top_k < V ? o->top_k : V;
  double kept = 0.0;
  for (int k = 0; k < keep; k++) {
    kept += s->p[s->idx[k]];
    if (kept >= o->top_p * sum) {
      keep = k + 1;
      break;
    }
  }
  kept = 0.0;
  for (int k = 0; k < keep; k++) kept += s->p[s->idx[k]];
  double u = u01 * kept, acc = 0.0;
  for (int k = 0; k < keep; k++)
    if (u < (acc += s->p[s->idx[k]])) return s->idx[k];
  return s->idx[keep - 1];
}

double txl_generate(TxlModel *m, TxlCorpus *c, const TxlGenOptions *o, FILE *out, int32_t *ids_out) {
  const int V = m->spec.dims.n_token;
  const int recompute = o->window > 0;
  if (!recompute && o->mem_len < 1) txl_fatal("generation with memory needs mem_len >= 1");
  int32_t *ids = txl_malloc((size_t)(TXL_PROMPT_MAX + o->length) * sizeof(int32_t), "generated tokens");
  float *row = txl_malloc((size_t)V * sizeof(float), "logits row");
  Sampler s = {txl_malloc((size_t)V * sizeof(double), "probabilities"),
               txl_malloc((size_t)V * sizeof(int32_t), "sort order")};
  int n = txl_gen_prompt_ids(c, o->prompt, ids, TXL_PROMPT_MAX);
  TxlGenText text;
  txl_gen_text_init(&text, c, out);
  for (int i = 0; i < n; i++) txl_gen_text_put(&text, ids[i]);
  /* memory mode: L_max rows per pass while priming, then one; recompute: window rows, no memory */
  /* no targets: the tail buffers hold only what txl_model_logprobs needs (tail counts 0) */
  TxlRunShape gs = {recompute ? o->window : o->tgt_len, 1, 0, recompute ? 0 : o->mem_len, o->clamp_len, 0, 0, 1,
                    TXL_TAIL_NO_TARGETS};
  TxlRun run;
  txl_run_create(&run, m, &gs);
  int last = 0;
  if (!recompute)
    for (int off = 0; off < n; off += gs.L_max) { /* prime the memory with the prompt */
      last = n - off < gs.L_max ? n - off : gs.L_max;
      txl_model_forward(m, &run, ids + off, NULL, last, 0, 0, 0.0f);
    }
  const double t0 = txl_now_s();
  for (int i = 0; i < o->length; i++) {
    if (recompute) { /* the last `window` tokens from scratch */
      last = n < o->window ? n : o->window;
      txl_run_reset_memory(&run);
      txl_model_forward(m, &run, ids + n - last, NULL, last, 0, 0, 0.0f);
    }
    txl_model_logprobs(m, &run, last - 1, row);
    const int32_t next = sample(&s, row, V, o, (uint32_t)i);
    ids[n++] = next;
    if (ids_out) ids_out[i] = next;
    txl_gen_text_put(&text, next);
    if (!recompute) {
      txl_model_forward(m, &run, &next, NULL, 1, 0, 0, 0.0f);
      last = 1;
    }
  }
  const double dt = txl_now_s() - t0;
  txl_gen_text_finish(&text);
  if (out) fflush(out);
  txl_run_destroy(&run, m);
  free(ids);
  free(row);
  free(s.p);
  free(s.idx);
  return dt;
}

void txl_trainer_generate(TxlTrainer *t) {
  const TxlConfig *c = &t->cfg;
  if (c->sample_tokens <= 0 || !t->corpus) return;
  const double timeout_s = txl_dist_set_timeout(0.0); /* the others wait for rank 0's sample */
  if (t->dist.rank == 0) {
    const TxlGenOptions o = {c->sample_prompt, c->sample_tokens, c->sample_temperature, 0, 1.0, (uint32_t)c->seed,
                             c->eval_tgt_len, txl_config_eval_mem_len(c) > 0 ? txl_config_eval_mem_len(c) : 1,
                             txl_config_eval_clamp_len(c), 0};
    printf("\n--- sample: %d tokens at temperature %.2f ---\n", c->sample_tokens, c->sample_temperature);
    txl_generate(&t->model, t->corpus, &o, stdout, NULL);
    printf("\n--- end of sample ---\n");
    fflush(stdout);
  }
  txl_dist_set_timeout(timeout_s); /* once every rank is here */
}
