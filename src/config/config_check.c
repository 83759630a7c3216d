/* The checks of combinations of keys that no single key's range can make (txl_config_validate,
 * txl_config_validate_eval), and the values derived from the keys: config.c reads, sets and writes
 * them one key at a time. */
#include "src/config/config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "data/varlen.h"
#include "dist/shard.h"
#include "src/config/config_internal.h"
#include "src/model/attn_type.h"

int txl_config_eval_mem_len(const TxlConfig *c) { return c->eval_mem_len < 0 ? c->mem_len : c->eval_mem_len; }
int txl_config_eval_clamp_len(const TxlConfig *c) { return c->eval_clamp_len == -2 ? c->clamp_len : c->eval_clamp_len; }

int txl_config_cutoffs(const TxlConfig *c, int n_token, int *cutoffs, char *err, size_t errlen) {
  int n = 0;
  const char *p = c->cutoffs;
  while (*p == ' ') p++;
  while (*p) {
    char *end;
    errno = 0;
    const long v = strtol(p, &end, 10);
    if (end == p || errno) {
      txl_cfg_fail(err, errlen, "model.cutoffs = '%s': expected increasing token ids separated by commas", c->cutoffs);
      return -1;
    }
    if (n == TXL_CFG_MAX_CUTOFFS) {
      txl_cfg_fail(err, errlen, "model.cutoffs = '%s': at most %d cutoffs", c->cutoffs, TXL_CFG_MAX_CUTOFFS);
      return -1;
    }
    if (n > 0 && v <= cutoffs[n - 1]) {
      txl_cfg_fail(err, errlen, "model.cutoffs = '%s': %ld does not follow %d (cutoffs increase)", c->cutoffs, v,
           cutoffs[n - 1]);
      return -1;
    }
    if (v < 1 || v > INT_MAX || (n_token > 0 && v >= n_token)) {
      if (n_token > 0)
        txl_cfg_fail(err, errlen, "model.cutoffs = '%s': %ld is outside the vocabulary's (0, %d)", c->cutoffs, v, n_token);
      else
        txl_cfg_fail(err, errlen, "model.cutoffs = '%s': %ld is not a token id in [1, %d]", c->cutoffs, v, INT_MAX);
      return -1;
    }
    cutoffs[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') {
      p++;
      while (*p == ' ') p++;
      if (!*p) { /* "20000,": a cutoff was meant to follow */
        txl_cfg_fail(err, errlen, "model.cutoffs = '%s': a comma with no token id after it", c->cutoffs);
        return -1;
      }
    }
  }
  const int d_embed = c->d_embed > 0 ? c->d_embed : c->d_model;
  long width = d_embed;
  for (int i = 0; i < n; i++) width /= c->div_val;
  if (width < 1) {
    txl_cfg_fail(err, errlen, "model.d_embed = %d with div_val = %d leaves the last of %d clusters no features", d_embed,
         c->div_val, n + 1);
    return -1;
  }
  if (c->div_val != 1 && n == 0) {
    txl_cfg_fail(err, errlen, "model.div_val = %d needs model.cutoffs (clusters to divide the width among)", c->div_val);
    return -1;
  }
  return n;
}

/* ---- combinations ---------------------------------------------------------------------------- */

/* The keys a combination's message is about (up to 3, the rest -1). */
typedef struct {
  int k[5];
} KeySet;
#define ON(...) ((KeySet){{__VA_ARGS__, -1, -1}})

/* A bad combination is blamed on the setting that completed it: the last-set of its keys (a
 * --set after the file, a later line), or the config's source when all hold their defaults. */
static const char *blame(const TxlConfig *c, KeySet keys) {
  const TxlCfgOrigin *last = NULL;
  for (int i = 0; i < 5 && keys.k[i] >= 0; i++) {
    const TxlCfgOrigin *o = &c->set_by.key[keys.k[i]];
    if (o->seq > 0 && (!last || o->seq > last->seq)) last = o;
  }
  return last ? last->where : c->set_by.source;
}

static int refuse(const TxlConfig *c, KeySet keys, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int refuse(const TxlConfig *c, KeySet keys, char *err, size_t errlen, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *where = blame(c, keys);
  txl_cfg_fail(err, errlen, "%s%s%s", where, *where ? ": " : "", msg);
  return -1;
}

/* Rows of the model's matrix products: (segment + memory) rows x columns on a rank, passed to the
 * GEMMs as an int. */
static int64_t product_rows(int tgt_len, int mem_len, int batch, int world) {
  return ((int64_t)tgt_len + (mem_len > 0 ? mem_len : 0)) * txl_shard_max(batch, world);
}

#define K(key) TXL_CFG_KEY_##key

int txl_config_validate_eval(const TxlConfig *c, int world, char *err, size_t errlen) {
  int cut[TXL_CFG_MAX_CUTOFFS];
  char msg[1024];
  if (txl_config_cutoffs(c, c->n_token, cut, msg, sizeof msg) < 0)
    return refuse(c, ON(K(cutoffs), K(div_val), K(d_embed)), err, errlen, "%s", msg);
  if (c->d_model % 2)
    return refuse(c, ON(K(d_model)), err, errlen,
                  "model.d_model = %d must be even (relative positions use sin/cos halves)", c->d_model);
  if (c->d_embed == 0)
    return refuse(c, ON(K(d_embed)), err, errlen, "model.d_embed = 0: an embedding needs a width (-1: d_model)");
  /* every rank holds at least one column (dist/shard.h: floor or ceil of B / P each) */
  if (c->eval_batch_size < world)
    return refuse(c, ON(K(eval_batch_size)), err, errlen,
                  "eval.eval_batch_size = %d is fewer columns than the %d ranks (each rank needs one)",
                  c->eval_batch_size, world);
  if (c->eval_same_length && txl_config_eval_mem_len(c) == 0)
    return refuse(c, ON(K(eval_same_length), K(eval_mem_len), K(mem_len)), err, errlen,
                  "eval.eval_same_length needs an evaluation memory (eval.eval_mem_len > 0)");
  if (c->max_eval_steps == 0)
    return refuse(c, ON(K(max_eval_steps)), err, errlen,
                  "eval.max_eval_steps = 0 evaluates no tokens (no loss, never a best checkpoint); -1: the whole "
                  "split, or >= 1 segments");
  const int64_t rows = product_rows(c->eval_tgt_len, txl_config_eval_mem_len(c), c->eval_batch_size, world);
  if (rows > INT_MAX)
    return refuse(c, ON(K(eval_tgt_len), K(eval_mem_len), K(eval_batch_size)), err, errlen,
                  "eval.eval_tgt_len %d + %d memory rows x %d columns on a rank = %lld rows of a matrix "
                  "product, more than %d (a 32-bit int)",
                  c->eval_tgt_len, txl_config_eval_mem_len(c), txl_shard_max(c->eval_batch_size, world),
                  (long long)rows, INT_MAX);
  return 0;
}

int txl_config_validate(const TxlConfig *c, int world, char *err, size_t errlen) {
  if (txl_config_validate_eval(c, world, err, errlen) != 0) return -1;
  if (c->batch_size < world)
    return refuse(c, ON(K(batch_size)), err, errlen,
                  "train.batch_size = %d is fewer columns than the %d ranks (each rank needs one)", c->batch_size,
                  world);
  const int train_rows = txl_varlen_max_rows(c->tgt_len, c->varlen); /* tgt_len + 15 with varlen */
  const int64_t rows = product_rows(train_rows, c->mem_len, c->batch_size, world);
  if (rows > INT_MAX)
    return refuse(c, ON(K(tgt_len), K(mem_len), K(batch_size)), err, errlen,
                  "train.tgt_len %d%s + train.mem_len %d rows x %d columns on a rank = %lld rows of a matrix "
                  "product, more than %d (a 32-bit int)",
                  c->tgt_len, c->varlen ? " (+ 15 with train.varlen)" : "", c->mem_len,
                  txl_shard_max(c->batch_size, world), (long long)rows, INT_MAX);
  if (c->warmup_step > c->max_step)
    return refuse(c, ON(K(warmup_step), K(max_step)), err, errlen, "train.warmup_step = %d exceeds train.max_step = %d",
                  c->warmup_step, c->max_step);
  if (!c->work_dir[0]) /* "" names no folder: mkdir("") failed, and a checkpoint would be "/ckpt-..." */
    return refuse(c, ON(K(work_dir)), err, errlen,
                  "run.work_dir is empty (the run's files need a folder; '.' is this one)");
  if (txl_attn_key_bias(c->attn_type) && c->device == TXL_DEVICE_CUDA &&
      (c->precision == TXL_PRECISION_BF16 || c->precision == TXL_PRECISION_FP16))
    return refuse(c, ON(K(attn_type), K(precision)), err, errlen,
                  "model.attn_type = %s (%d in the original) keeps its per-key bias r_bias in fp32 through the "
                  "attention: run.precision = %s is not supported with it (use fp32 or tf32)",
                  txl_attn_name(c->attn_type), c->attn_type, c->precision == TXL_PRECISION_BF16 ? "bf16" : "fp16");
  if (txl_attn_adds_every_layer(c->attn_type)) { /* the original adds r_emb[-qlen:]: a segment longer than its table fails there */
    const int max_klen = c->tgt_len + c->mem_len;
    if (train_rows > max_klen || c->eval_tgt_len > max_klen)
      return refuse(c, ON(K(attn_type), K(tgt_len), K(eval_tgt_len)), err, errlen,
                    "model.attn_type = %s (%d in the original) learns one position per row of train.tgt_len + "
                    "train.mem_len = %d, but segments of %d rows%s would need more", txl_attn_name(c->attn_type),
                    c->attn_type, max_klen,
                    train_rows > c->eval_tgt_len ? train_rows : c->eval_tgt_len,
                    train_rows > max_klen ? " (train.tgt_len with train.varlen)" : " (eval.eval_tgt_len)");
  }
  if (c->same_length && c->mem_len == 0)
    return refuse(c, ON(K(same_length), K(mem_len)), err, errlen,
                  "model.same_length needs train.mem_len > 0 (with no memory every key would be masked)");
  char a[32], b[32];
  txl_cfg_format_double(c->lr, a, sizeof a);
  if ((float)c->lr == 0.0f) /* Adam takes lr in single precision */
    return refuse(c, ON(K(lr)), err, errlen, "train.lr = %s would train nothing (%s)", a,
                  c->lr == 0.0 ? "the parameters never change"
                               : "it is 0 in single precision, as the optimizer uses it");
  if (c->eta_min > c->lr) {
    txl_cfg_format_double(c->eta_min, b, sizeof b);
    return refuse(c, ON(K(eta_min), K(lr)), err, errlen, "train.eta_min = %s exceeds train.lr = %s", b, a);
  }
  if (c->shard_optimizer && c->optim == TXL_OPTIM_LAMB)
    return refuse(c, ON(K(shard_optimizer), K(optim)), err, errlen,
                  "dist.shard_optimizer cannot shard train.optim = lamb (its trust ratios take norms of whole "
                  "tensors, which the slices cut): use adam or sgd, or dist.shard_optimizer = false");
  if (c->scheduler == TXL_SCHEDULER_DEV_PERF && c->eval_interval == 0)
    return refuse(c, ON(K(scheduler), K(eval_interval)), err, errlen,
                  "train.scheduler = dev_perf lowers the rate on validation losses, but train.eval_interval = 0 "
                  "validates only at the end: set train.eval_interval > 0");
  if (c->decay_rate <= 0.0 || c->decay_rate >= 1.0) {
    txl_cfg_format_double(c->decay_rate, b, sizeof b);
    return refuse(c, ON(K(decay_rate)), err, errlen, "train.decay_rate = %s must lie in (0, 1)", b);
  }
  int exponent = 0;
  if (frexp(c->loss_scale_init, &exponent) != 0.5) { /* a power of two: x = 0.5 * 2^e exactly */
    return refuse(c, ON(K(loss_scale_init)), err, errlen,
                  "train.loss_scale_init = %.17g is not a power of two (scaling by one is exact in binary floating "
                  "point)",
                  c->loss_scale_init);
  }
  return 0;
}
