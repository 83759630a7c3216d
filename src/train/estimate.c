#include "src/train/estimate.h"

#include <stdlib.h>
#include <string.h>

#include "dist/shard.h"
#include "kernels/common/workspace.h"
#include "src/base/error.h"
#include "src/model/model.h"
#include "src/optim/shard.h"
#include "src/train/config_map.h"
#include "data/varlen.h"

TxlRunShape txl_train_run_shape(const TxlConfig *c, int B_local, int col0) {
  const TxlRunShape s = {txl_varlen_max_rows(c->tgt_len, c->varlen), B_local, col0, c->mem_len, c->clamp_len,
                         c->same_length, 1, c->batch_chunk, TXL_TAIL_NOT_COUNTED};
  return s;
}

TxlRunShape txl_eval_run_shape(const TxlConfig *c, int B_local, int col0) {
  const TxlRunShape s = {c->eval_tgt_len, B_local, col0, txl_config_eval_mem_len(c), txl_config_eval_clamp_len(c),
                         c->eval_same_length, 0, 1, TXL_TAIL_NOT_COUNTED};
  return s;
}

void txl_groups_print(const TxlConfig *c, int B_local, FILE *out) {
  const TxlRunShape s = txl_train_run_shape(c, B_local, 0);
  int groups, group_cols;
  txl_run_groups(&s, &groups, &group_cols);
  if (groups > 1)
    fprintf(out, "gradient accumulation: a rank of %d columns takes them in %d groups of at most %d, one after the "
            "other, per step (train.batch_chunk = %d; the activations are sized for one group)\n", B_local, groups,
            group_cols, c->batch_chunk);
}

void txl_memory_estimate(const TxlConfig *c, int n_token, const TxlOps *ops, int world, const TxlTailCap *train_tail,
                         const TxlTailCap *eval_tail, TxlMemEstimate *e) {
  memset(e, 0, sizeof *e);
  /* a model with its parameter table but no buffers: what txl_run_bytes and the FLOP count read */
  TxlModel shell;
  memset(&shell, 0, sizeof shell);
  shell.ops = ops;
  txl_model_spec_from_config(c, n_token, &shell.spec);
  txl_param_table_build(&shell.table, &shell.spec.dims, txl_model_row_align(ops, &shell.spec));
  const double P = (double)shell.table.total;
  e->n_params = shell.table.packed; /* P (the buffers' size) counts the padding too */
  e->n_params_ne = txl_param_count_non_embedding(&shell.table);
  e->flops_per_token = txl_model_flops_per_token(&shell, c->tgt_len, c->mem_len);
  e->on_gpu = c->device != TXL_DEVICE_CPU;

  const int B = txl_shard_max(c->batch_size, world), Be = txl_shard_max(c->eval_batch_size, world);
  /* col0 plays no part in the sizes */
  TxlRunShape train = txl_train_run_shape(c, B, 0), eval = txl_eval_run_shape(c, Be, 0);
  e->tail_worst = (double)txl_run_tail_bytes(&shell, &train) + (double)txl_run_tail_bytes(&shell, &eval);
  if (train_tail) train.tail = *train_tail;
  if (eval_tail) eval.tail = *eval_tail;
  e->tail_counted = train.tail.known && eval.tail.known;
  e->tail_fixed = !ops->host_memory;
  e->tail = (double)txl_run_tail_bytes(&shell, &train) + (double)txl_run_tail_bytes(&shell, &eval);
  e->copy = ops->act == TXL_F32 ? 0.0 : P * (double)txl_dtype_size(ops->act);
  /* the moments: this rank's slice alone when sharded (the largest slice: src/optim/shard.h) */
  double moments = P;
  e->sharded = c->shard_optimizer && world > 1 && c->optim != TXL_OPTIM_LAMB;
  if (e->sharded) {
    TxlShardPlan plan; /* the table's runs are made by txl_param_table_build */
    txl_shard_plan_make(&plan, ops, &shell.table, world);
    moments = (double)txl_shard_plan_max_slice(&plan);
    txl_shard_plan_free(&plan);
  }
  e->state = 2.0 * sizeof(float) * P + 2.0 * sizeof(float) * moments + e->copy;
  e->train_run = (double)txl_run_bytes(&shell, &train);
  e->eval_run = (double)txl_run_bytes(&shell, &eval);
  /* a checkpoint is staged on the host: parameters, both moments and this rank's memory in fp32
   * (src/train/checkpointing.c); the initial parameters are staged the same way, one copy */
  const double mems = (double)c->n_layer * c->mem_len * B * c->d_model * sizeof(float);
  e->staging = 3.0 * sizeof(float) * P + mems;
  e->workspace = e->on_gpu ? (double)TXL_CUDA_GEMM_WORKSPACE_BYTES : 0.0;
  const double device = e->state + e->train_run + e->eval_run + e->workspace;
  if (e->on_gpu) {
    e->device = device;
    e->host = e->staging;
  } else {
    /* validation and checkpoints come one after the other: the larger of the two at once */
    const double evaluation = e->eval_run > e->staging ? e->eval_run : e->staging;
    e->host = e->state + e->train_run + evaluation;
  }
  txl_param_table_free(&shell.table);
}

/* ---- what the machine can give ------------------------------------------------------------ */

/* One number from a file (a cgroup's limit or usage); -1 when absent or not a number ("max"). */
static double read_number(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1.0;
  char buf[64];
  const int ok = fgets(buf, sizeof buf, f) != NULL;
  fclose(f);
  char *end;
  const double v = ok ? strtod(buf, &end) : -1.0;
  return ok && end != buf ? v : -1.0;
}

/* The room under the memory limits of the cgroup `path` (relative to the hierarchy mounted at
 * `root`) and of each of its ancestors; -1 when none is set. v2 names the files memory.max /
 * memory.current, v1 memory.limit_in_bytes / memory.usage_in_bytes ("no limit" is a value near
 * 2^63 there). */
static double cgroup_room(const char *root, const char *path, const char *limit_file, const char *usage_file) {
  char dir[1024], file[1200];
  snprintf(dir, sizeof dir, "%s", path);
  double room = -1.0;
  for (;;) {
    snprintf(file, sizeof file, "%s%s/%s", root, dir, limit_file);
    const double limit = read_number(file);
    if (limit > 0 && limit < 1e18) {
      snprintf(file, sizeof file, "%s%s/%s", root, dir, usage_file);
      const double used = read_number(file);
      const double r = used >= 0 ? limit - used : limit;
      if (room < 0 || r < room) room = r < 0 ? 0 : r;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || !dir[0]) break;
    *slash = 0; /* the parent; "" is the hierarchy's root */
  }
  return room;
}

double txl_memory_available(const char **source) {
  double best = -1.0;
  const char *what = "unknown";
  FILE *f = fopen("/proc/meminfo", "r");
  if (f) {
    char line[256];
    long long kb;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
        best = (double)kb * 1024.0;
        what = "MemAvailable";
      }
    fclose(f);
  }
  f = fopen("/proc/self/cgroup", "r");
  if (f) {
    char line[1200];
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = 0;
      char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
      if (!path) continue;
      *path++ = 0;
      ctrl++;
      double room = -1.0;
      if (!*ctrl) /* v2: "0::/path" */
        room = cgroup_room("/sys/fs/cgroup", strcmp(path, "/") ? path : "", "memory.max", "memory.current");
      else if (strstr(ctrl, "memory")) /* v1: "N:memory:/path" */
        room = cgroup_room("/sys/fs/cgroup/memory", strcmp(path, "/") ? path : "", "memory.limit_in_bytes",
                           "memory.usage_in_bytes");
      if (room >= 0 && (best < 0 || room < best)) {
        best = room;
        what = "the cgroup's memory limit";
      }
    }
    fclose(f);
  }
  if (source) *source = what;
  return best;
}

void txl_format_bytes(double bytes, char *out, size_t n) {
  if (bytes >= 1024.0 * 1048576.0) snprintf(out, n, "%.2f GiB", bytes / (1024.0 * 1048576.0));
  else snprintf(out, n, "%.1f MiB", bytes / 1048576.0);
}

void txl_memory_print(const TxlMemEstimate *e, FILE *f) {
  char state[32], train[32], eval[32], stage[32], total[32], host[32];
  txl_format_bytes(e->state, state, sizeof state);
  txl_format_bytes(e->train_run, train, sizeof train);
  txl_format_bytes(e->eval_run, eval, sizeof eval);
  txl_format_bytes(e->staging, stage, sizeof stage);
  txl_format_bytes(e->on_gpu ? e->device : e->host, total, sizeof total);
  txl_format_bytes(e->host, host, sizeof host);
  fprintf(f,
          "memory per rank (estimate): %s on the %s: %s parameters, gradients and Adam moments%s, %s training "
          "activations and memory, %s evaluation run",
          total, e->on_gpu ? "GPU" : "host", state,
          e->sharded ? (e->copy > 0 ? " (this rank's slice of the moments; with the 16-bit weight copy)"
                                    : " (this rank's slice of the moments)")
                     : (e->copy > 0 ? " (with the 16-bit weight copy)" : ""),
          train, eval);
  if (e->on_gpu) {
    char work[32];
    txl_format_bytes(e->workspace, work, sizeof work);
    fprintf(f, ", %s GEMM workspace; host: %s (checkpoint staging)\n", work, host);
  } else {
    fprintf(f, "; %s host copies for checkpoints\n", stage);
  }
  if (e->tail_worst > 0) {
    char tail[32], worst[32];
    txl_format_bytes(e->tail, tail, sizeof tail);
    txl_format_bytes(e->tail_worst, worst, sizeof worst);
    const char *worst_is = e->tail_fixed ? "every tail cluster took a whole segment" : "every target fell in the "
                                                                                       "widest cluster";
    if (e->tail_counted)
      fprintf(f, "adaptive softmax tail logits (in the above): %s, sized by the most tail targets any segment of %s "
              "holds (%s if %s)\n", tail, e->tail_synthetic ? "--bench's synthetic tokens" : "the corpus", worst,
              worst_is);
    else
      fprintf(f, "adaptive softmax tail logits (in the above): %s, sized as if %s (not counted in a corpus)\n", tail,
              worst_is);
  }
}
