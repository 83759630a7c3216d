/* bench_cuda_kernels --count (count_step.h). For each recipe and precision: the model made from
 * the config file as txl-train makes it, training steps (txl_train_grad + txl_train_update, the
 * trainer's own step) on the counting table until a step has found the memory full after another
 * that did (the steady state: what one step keeps for the next, such as the evaluation's R W_r and
 * keys and values of the memory, is as in a long run), and that last step counted; then an
 * evaluation run at the [eval] lengths, its forwards likewise. */
#include "tests/cuda/count_step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/shard.h"
#include "src/base/error.h"
#include "src/base/zipf.h"
#include "src/config/config.h"
#include "kernels/cuda/count_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/model/gemm_of.h"
#include "src/model/model.h"
#include "src/train/step.h"
#include "src/train/tail_cap.h"
#include "src/train/trainer.h"

#ifndef TXL_CONFIG_DIR
#error "TXL_CONFIG_DIR (the repository's configs/) must be defined by the build"
#endif

/* The paper's recipes: the rank count each runs on and its vocabulary (the corpora are not
 * needed: their vocabulary sizes stand for them as data.n_token). */
typedef struct {
  const char *file;
  int ranks;
  const char *ranks_why;
  int n_token;
  const char *vocab_why;
} Recipe;

static const Recipe k_recipes[] = {
    {"wt103_base.ini", 8, "its config's mpirun -n 8", 267735, "WikiText-103's words (README)"},
    {"wt103_large.ini", 8, "one 8-GPU node; the config names none", 267735, "WikiText-103's words (README)"},
    {"enwik8_base.ini", 4, "the original's 4 GPUs (REFERENCE.md)", 204, "enwik8's bytes (the original's n_token)"},
    {"enwik8_large.ini", 8, "one 8-GPU node; the config names none", 204, "enwik8's bytes (the original's n_token)"},
};

/* run.precision = fp16 counts as bf16: its activations are 2 bytes too, its GEMMs run on the
 * tensor cores at the same H100 rate (989 TFLOP/s dense), and every op does the same work, so
 * its table would repeat bf16's line for line (not printed). */
/* bf16-fused: bf16 with run.attn_impl = fused (the attention's fused forward, rel_attn_fused.cu;
 * its backward is the gemm route's). */
static const struct {
  const char *name;
  TxlDtype act;
  int tf32;
  double tensor_peak; /* H100 SXM dense tensor-core FLOP/s of this precision */
  TxlAttnImpl attn;
} k_precisions[] = {
    {"fp32", TXL_F32, 0, 0.0, TXL_ATTN_GEMM},
    {"tf32", TXL_F32, 1, 494e12, TXL_ATTN_GEMM},
    {"bf16", TXL_BF16, 0, 989e12, TXL_ATTN_GEMM},
    {"bf16-fused", TXL_BF16, 0, 989e12, TXL_ATTN_FUSED},
};

/* H100 SXM: fp32 FLOP/s of the CUDA cores, HBM3 bytes/s */
static const double k_core_peak = 67e12, k_dram_peak = 3.35e12;

/* ---- synthetic tokens ---------------------------------------------------------------------- */

/* tok [(L + 1), B]: inputs are rows 0..L-1, targets rows 1..L */
static void zipf_tokens(const TxlZipf *z, int32_t *tok, int L, int B, int step) {
  for (int i = 0; i <= L; i++)
    for (int j = 0; j < B; j++)
      tok[(size_t)i * B + j] =
          txl_zipf_id(z, txl_philox4x32_10((uint32_t)i, (uint32_t)j, (uint32_t)step, 0x2c0fu, 0x5eedu, 0u));
}

/* The most targets of each tail cluster of the adaptive softmax in one column group of the
 * segments of steps [0, steps) (what the trainer counts in a corpus at start, TxlTailCap), so that
 * the counted run's tail slots are those a run over such tokens has. tok [(L + 1), B] scratch. */
static TxlTailCap zipf_caps(const TxlZipf *z, const TxlDims *dm, int32_t *tok, int L, int B, int group_cols, int steps) {
  TxlTailCap cap = TXL_TAIL_NOT_COUNTED;
  for (int s = 0; s < steps; s++) {
    zipf_tokens(z, tok, L, B, s);
    txl_tail_cap_add_segment(&cap, dm, tok, L, B, group_cols);
  }
  return cap;
}

/* The steps the loops below take to fill the memory of mem_len rows L at a time and count one
 * step of the full shape: at most ceil(mem_len / L) + 2. */
static int steps_to_count(int L, int mem_len) { return (mem_len + L - 1) / L + 2; }

/* ---- the table ----------------------------------------------------------------------------- */

/* Estimated seconds of family cost c on an H100 SXM: the slowest of its three limits. */
static double estimate_s(const TxlCudaCost *c, double tensor_peak) {
  double s = c->core_flops / k_core_peak;
  if (c->tensor_flops > 0.0 && c->tensor_flops / tensor_peak > s) s = c->tensor_flops / tensor_peak;
  if (c->bytes / k_dram_peak > s) s = c->bytes / k_dram_peak;
  return s;
}

/* t: the parameter table (a training step: the optimizer's line), or NULL */
static void print_counts(const char *recipe, const char *precision, double tensor_peak, const char *what,
                         const TxlParamTable *t) {
  const TxlCudaCost *f = txl_count_costs();
  TxlCudaCost tot = {0, 0, 0, 0};
  double est = 0.0;
  printf("-- %s | %s | %s --\n", recipe, precision, what);
  printf("%-16s %10s %16s %16s %14s %12s\n", "family", "launches", "tensor_GFLOP", "core_GFLOP", "GB_moved",
         "est_ms");
  for (int i = 0; i < TXL_COUNT_FAMILIES; i++) {
    const double e = estimate_s(&f[i], tensor_peak);
    printf("%-16s %10.0f %16.6f %16.6f %14.6f %12.4f\n", txl_count_family_name(i), f[i].launches,
           f[i].tensor_flops / 1e9, f[i].core_flops / 1e9, f[i].bytes / 1e9, e * 1e3);
    tot.launches += f[i].launches;
    tot.tensor_flops += f[i].tensor_flops;
    tot.core_flops += f[i].core_flops;
    tot.bytes += f[i].bytes;
    est += e;
  }
  printf("%-16s %10.0f %16.6f %16.6f %14.6f %12.4f\n", "total", tot.launches, tot.tensor_flops / 1e9,
         tot.core_flops / 1e9, tot.bytes / 1e9, est * 1e3);
  const TxlCountAlign *al = txl_count_gemm_align();
  printf("GEMM operands on 16 bytes (pointer and leading dimension): the weight in %.0f of %.0f calls with a weight; "
         "all three operands in %.0f of %.0f calls\n",
         al->weight_aligned, al->weight_calls, al->all_aligned, al->calls);
  if (t) { /* the gradient's sum of squares covers the span of the values (the CUDA backend's
             * sumsq_segments), the update passes the whole buffer */
    const TxlCudaCost *o = &f[TXL_COUNT_OPTIMIZER];
    const int64_t *r = t->runs, last = 2 * (t->n_runs - 1), span = r[last] + r[last + 1] - r[0];
    printf("optimizer: %.0f bytes and %.0f launches over the %lld floats of the parameter buffer (its values span "
           "%lld): %.4f bytes per float\n",
           o->bytes, o->launches, (long long)t->total, (long long)span, o->bytes / (double)t->total);
  }
  const TxlCudaCost *a = &f[TXL_COUNT_ATTENTION];
  const double all = tot.tensor_flops + tot.core_flops, attn = a->tensor_flops + a->core_flops;
  printf("attention: %.2f%% of the step's FLOPs; %.2f%% of the attention's FLOPs on tensor cores, %.6f GFLOP of "
         "it on CUDA cores\n",
         all > 0 ? 100.0 * attn / all : 0.0, attn > 0 ? 100.0 * a->tensor_flops / attn : 0.0, a->core_flops / 1e9);
  char tensor[64] = "";
  if (tensor_peak > 0.0) snprintf(tensor, sizeof tensor, "tensor FLOPs / %.0f TFLOP/s dense, ", tensor_peak / 1e12);
  printf("ESTIMATE (not measured): %.4f ms on an H100 SXM: per family the slowest of %score FLOPs / %.0f TFLOP/s, "
         "bytes / %.2f TB/s, summed; launch overheads not included\n",
         est * 1e3, tensor, k_core_peak / 1e12, k_dram_peak / 1e12);
}

/* ---- one recipe ---------------------------------------------------------------------------- */

/* What the gradient reduction of one training step moves per rank (src/train/embed_gather.h). */
static void print_reduction(const TxlModel *m, const TxlRun *run, const TxlConfig *c, int ranks) {
  const double mib = 1048576.0, all = (double)m->table.total * sizeof(float) / mib;
  if (ranks < 2) {
    printf("gradient reduction: none (1 rank)\n");
    return;
  }
  const int64_t last = run->cols - (int64_t)(run->n_groups - 1) * run->group_cols; /* the widest rank's last group */
  const double table = (double)(txl_model_has_embed_rows(m) ? txl_model_word_emb_end(m) : 0) * sizeof(float) / mib;
  const double block = txl_model_has_embed_rows(m) ? (double)txl_embed_gather_block_for(m, run->L_max, last) / mib : 0.0;
  const char *why = c->embed_rows == TXL_EMBED_ROWS_OFF ? "off"
                    : !txl_model_has_embed_rows(m)       ? "does not apply: untied, or adaptive input"
                    : c->embed_rows == TXL_EMBED_ROWS_AUTO && !txl_embed_gather_pays(m, run->L_max, last, ranks)
                        ? "auto: the rows would be more bytes than the table"
                        : NULL;
  if (why) {
    printf("gradient reduction: all-reduce of %.1f MiB per step, the embedding's slice last (dist.embed_rows %s", all, why);
    if (block > 0.0) printf("; rows %.2f MiB x %d ranks against the table's %.2f MiB", block, ranks, table);
    printf(")\n");
    return;
  }
  printf("gradient reduction: all-reduce of %.1f MiB per step, word_emb's %.1f MiB of it from the output layer's backward "
         "on (dist.embed_rows); its input-side rows gathered: %.2f MiB sent per rank, %.2f MiB received\n",
         all, table, block, block * ranks);
}

static void count_recipe(const char *path, const char *name, const TxlConfig *c, int ranks) {
  const int V = c->n_token, B = txl_shard_max(c->batch_size, ranks), Be = txl_shard_max(c->eval_batch_size, ranks);
  const int L = c->tgt_len, Le = c->eval_tgt_len, Me = txl_config_eval_mem_len(c);
  TxlZipf z;
  txl_zipf_make(&z, V);
  const int Lmax = L > Le ? L : Le, Bmax = B > Be ? B : Be;
  int32_t *tok = txl_malloc((size_t)(Lmax + 1) * Bmax * sizeof(int32_t), "synthetic tokens");
  printf("== %s (%s): %d rank%s, training %d of %d columns per rank, tgt_len %d, mem_len %d; evaluation %d of %d "
         "columns, tgt_len %d, mem_len %d; vocabulary %d ==\n",
         name, path, ranks, ranks > 1 ? "s" : "", B, c->batch_size, L, c->mem_len, Be, c->eval_batch_size, Le, Me, V);
  printf("tokens: synthetic, Zipf with exponent 1 over the vocabulary sorted by frequency (Philox-seeded): the "
         "adaptive softmax's tail counts, and its slots (the most of each tail cluster in the counted steps' "
         "segments), assume that distribution\n");
  for (size_t p = 0; p < sizeof k_precisions / sizeof k_precisions[0]; p++) {
    const TxlOps *o = txl_count_ops(k_precisions[p].act, k_precisions[p].tf32);
    txl_cuda_set_attn_impl(k_precisions[p].attn);
    TxlModelSpec spec;
    txl_model_spec_from_config(c, V, &spec);
    TxlModel m;
    txl_model_create(&m, o, &spec);
    txl_count_set_gemm_family(txl_model_gemm_of, &m);
    txl_count_set_gradients(m.grad_buf, (size_t)m.table.total * sizeof(float));

    /* training: steps until the memory is full, then the counted one */
    TxlRunShape ts = {L, B, 0, c->mem_len, c->clamp_len, c->same_length, 1, c->batch_chunk, TXL_TAIL_NOT_COUNTED};
    int groups, group_cols;
    txl_run_groups(&ts, &groups, &group_cols);
    ts.tail = zipf_caps(&z, &spec.dims, tok, L, B, group_cols, steps_to_count(L, c->mem_len));
    TxlRun run;
    txl_run_create(&run, &m, &ts);
    TxlAdam adam;
    txl_adam_create(&adam, o, m.table.total, (float)c->beta1, (float)c->beta2, (float)c->adam_eps, (float)c->clip);
    txl_optim_set_kind(&adam, c->optim, (float)c->momentum, (float)c->weight_decay, &m.table);
    const TxlSchedule sched = {.kind = c->scheduler, .lr = c->lr, .eta_min = c->eta_min, .warmup_step = c->warmup_step,
                               .max_step = c->max_step};
    int step = 0, full = 0; /* full: consecutive steps with the memory full */
    do {
      zipf_tokens(&z, tok, L, B, step);
      txl_count_reset();
      txl_train_grad(&m, &run, step + 1, c->batch_size, NULL, NULL, tok, tok + B, L, 1.0);
      txl_train_clip(&m, &adam, NULL, 1.0);
      txl_train_update(&m, &adam, NULL, &sched, step);
      step++;
      full = run.last_M == c->mem_len ? full + 1 : 0;
    } while (full < 2);
    char what[256];
    snprintf(what, sizeof what, "training step: %d rows, memory %d, %d columns (%d tokens), forward + backward + "
             "clipping + Adam", L, run.last_M, B, L * B);
    print_counts(name, k_precisions[p].name, k_precisions[p].tensor_peak, what, &m.table);
    print_reduction(&m, &run, c, ranks);
    txl_adam_destroy(&adam);
    txl_run_destroy(&run, &m);

    /* evaluation: forwards until the memory is full, then the counted one */
    TxlRunShape es = {Le, Be, 0, Me, txl_config_eval_clamp_len(c), c->eval_same_length, 0, 1, TXL_TAIL_NOT_COUNTED};
    es.tail = zipf_caps(&z, &spec.dims, tok, Le, Be, Be, steps_to_count(Le, Me));
    txl_run_create(&run, &m, &es);
    step = full = 0;
    do {
      zipf_tokens(&z, tok, Le, Be, step);
      txl_count_reset();
      txl_model_forward(&m, &run, tok, tok + Be, Le, 0, 0, 0.0f);
      step++;
      full = run.last_M == Me ? full + 1 : 0;
    } while (full < 2);
    snprintf(what, sizeof what, "evaluation step: %d rows, memory %d, %d columns (%d tokens), forward", Le,
             run.last_M, Be, Le * Be);
    print_counts(name, k_precisions[p].name, k_precisions[p].tensor_peak, what, NULL);
    txl_run_destroy(&run, &m);
    txl_count_set_gemm_family(NULL, NULL);
    txl_count_set_gradients(NULL, 0);
    txl_model_destroy(&m);
  }
  free(tok);
  txl_zipf_free(&z);
  fflush(stdout);
}

/* Loads and checks a config for `ranks` ranks; n_token (> 0) stands for the corpus's vocabulary
 * when the config gives none. */
static void load(const char *path, int ranks, int n_token, TxlConfig *c) {
  char err[1024];
  txl_config_defaults(c);
  if (txl_config_load_ini(c, path, err, sizeof err) != 0) txl_fatal("%s", err);
  if (c->n_token <= 0 && n_token > 0) c->n_token = n_token;
  if (c->n_token <= 0) txl_fatal("%s: no data.n_token: --count needs the vocabulary size in the config", path);
  if (txl_config_validate(c, ranks, err, sizeof err) != 0) txl_fatal("%s", err);
}

/* "configs/wt103_base.ini" -> "wt103_base" */
static void recipe_name(const char *path, char *out, size_t n) {
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  snprintf(out, n, "%s", base);
  char *dot = strrchr(out, '.');
  if (dot && !strcmp(dot, ".ini")) *dot = 0;
}

int txl_count_main(int argc, char **argv) {
  int ranks = 0, first = 0;
  if (argc >= 2 && !strcmp(argv[0], "--ranks")) {
    char *end;
    const long v = strtol(argv[1], &end, 10);
    if (*end || v < 1 || v > 1000000) {
      fprintf(stderr, "bench_cuda_kernels: --ranks takes a rank count >= 1, not '%s'\n", argv[1]);
      return 2;
    }
    ranks = (int)v;
    first = 2;
  }
  for (int i = first; i < argc; i++)
    if (argv[i][0] == '-') {
      fprintf(stderr, "bench_cuda_kernels: --count [--ranks P] [CONFIG.ini ...]: unknown option '%s'\n", argv[i]);
      return 2;
    }
  printf("counts from the launch shapes of the real model code on the counting backend (not measurements): FLOPs "
         "on tensor cores and on CUDA cores, global-memory bytes (each operand read once, each result written once: a "
         "lower bound), launches, of one rank\n");
  char name[1024];
  TxlConfig c;
  if (first == argc) {
    for (size_t i = 0; i < sizeof k_recipes / sizeof k_recipes[0]; i++) {
      const Recipe *r = &k_recipes[i];
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", TXL_CONFIG_DIR, r->file);
      const int P = ranks ? ranks : r->ranks;
      load(path, P, r->n_token, &c);
      recipe_name(path, name, sizeof name);
      printf("recipe %s: %d ranks (%s); vocabulary %d (%s)\n", name, P, ranks ? "--ranks" : r->ranks_why,
             c.n_token, r->vocab_why);
      count_recipe(path, name, &c, P);
    }
    return 0;
  }
  for (int i = first; i < argc; i++) {
    const int P = ranks ? ranks : 1;
    load(argv[i], P, 0, &c);
    recipe_name(argv[i], name, sizeof name);
    count_recipe(argv[i], name, &c, P);
  }
  return 0;
}
