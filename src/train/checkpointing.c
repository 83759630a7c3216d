/* The trainer's side of checkpoints: when to write them, which to keep, where "latest" points,
 * and how a run continues from one (src/checkpoint holds the file format). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/timer.h"
#include "src/checkpoint/checkpoint.h"
#include "src/train/trainer.h"
#include "src/base/file.h"

/* ---- files in the run directory -------------------------------------------------------------- */

/* Points dir/name at target (a file name in dir), atomically. Returns 0, or -1 with the reason. */
static int write_pointer(const char *dir, const char *name, const char *target, char *err, size_t errlen) {
  char path[1200], text[300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(text, sizeof text, "%s\n", target);
  return txl_write_file_atomic(path, text, strlen(text), err, errlen);
}

static int read_pointer(const char *dir, const char *name, char *out, size_t n) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ok = fgets(out, (int)n, f) != NULL;
  fclose(f);
  if (!ok) return -1;
  out[strcspn(out, "\r\n")] = 0;
  return 0;
}

/* The file name a pointer holds ("latest" may hold an absolute path), or "" without one. */
static void pointer_target(const char *dir, const char *name, char *out, size_t n) {
  char target[1200];
  out[0] = 0;
  if (read_pointer(dir, name, target, sizeof target) != 0) return;
  const char *slash = strrchr(target, '/');
  snprintf(out, n, "%s", slash ? slash + 1 : target);
}

/* 1 when path is a checkpoint of the lineage run_id; 0 for another run's and for a file whose
 * lineage cannot be read (never ours to delete). */
static int same_lineage(const char *path, const char *run_id) {
  char id[TXL_CKPT_ID_LEN], err[1024];
  return txl_ckpt_read_run_id(path, id, err, sizeof err) == 0 && !strcmp(id, run_id);
}

/* Keeps the newest `keep` checkpoints of this run's lineage (run_id). Deletes only checkpoints of
 * that lineage, and never the file "latest" or "best" names nor the one just written: a folder
 * may also hold another run's checkpoints (resumed from elsewhere into it), and those are not
 * this run's to delete. Rank 0. */
static void rotate(const char *dir, int keep, const char *run_id, const char *written) {
  char latest[1200], best[1200];
  pointer_target(dir, "latest", latest, sizeof latest);
  pointer_target(dir, "best", best, sizeof best);
  int n = 0;
  TxlCkptFile *files = txl_ckpt_list_dir(dir, &n);
  int kept = 0;
  for (int i = 0; i < n; i++) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
    if (!same_lineage(path, run_id)) continue;
    if (kept < keep) {
      kept++;
      continue;
    }
    const char *f = files[i].name;
    if (!strcmp(f, written) || !strcmp(f, latest) || !strcmp(f, best)) continue;
    if (unlink(path) != 0) fprintf(stderr, "txl: warning: %s: cannot remove this old checkpoint: %s\n", path, strerror(errno));
  }
  free(files);
}

/* ---- writing ------------------------------------------------------------------------------- */

static void host_buffers(TxlTrainer *t, TxlCkptBuffers *b) {
  const TxlConfig *c = &t->cfg;
  const size_t pbytes = (size_t)t->model.table.total * sizeof(float);
  const size_t mfloats = (size_t)c->n_layer * c->mem_len * t->B_local * c->d_model;
  memset(b, 0, sizeof *b);
  b->table = &t->model.table;
  /* zeroed: a checkpoint read fills the tensors, the padding between them stays zero */
  b->params = txl_calloc(pbytes, 1, "checkpoint parameters");
  b->adam_m = txl_calloc(pbytes, 1, "checkpoint Adam m");
  b->adam_v = txl_calloc(pbytes, 1, "checkpoint Adam v");
  b->mems = txl_malloc(mfloats * sizeof(float) + sizeof(float), "checkpoint memory");
  b->n_layer = c->n_layer;
  b->mem_len = c->mem_len;
  b->d_model = c->d_model;
  b->B_global = c->batch_size;
  b->B_local = t->B_local;
  b->col0 = t->col0;
}

static void free_buffers(TxlCkptBuffers *b) {
  free(b->params);
  free(b->adam_m);
  free(b->adam_v);
  free(b->mems);
}

/* Both moments whole into b, on every rank: this rank's slice, then (sharded) every other rank's
 * from its owner; the file is the same as an unsharded run's. collective: all ranks, when sharded */
static void moments_to_host(TxlTrainer *t, TxlCkptBuffers *b) {
  const size_t off = (size_t)t->adam.lo, bytes = (size_t)(t->adam.hi - t->adam.lo) * sizeof(float);
  t->ops->to_host(b->adam_m + off, t->adam.m, bytes);
  t->ops->to_host(b->adam_v + off, t->adam.v, bytes);
  if (!t->shard.lo) return;
  txl_dist_share(b->adam_m, t->shard.lo, sizeof(float), "the gather of the optimizer's moments for a checkpoint");
  txl_dist_share(b->adam_v, t->shard.lo, sizeof(float), "the gather of the optimizer's moments for a checkpoint");
}

char *txl_trainer_config_text(const TxlConfig *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) txl_fatal("out of memory writing the config text");
  txl_config_write_ini(c, f, 0);
  fclose(f);
  return buf;
}

/* 1 when rank 0 finds path to be a checkpoint of another lineage, which a new file of that name
 * would replace (a run resumed from elsewhere into a folder holding another run's checkpoints).
 * collective: all ranks */
static int another_runs_file(const TxlTrainer *t, const char *path, char *err, size_t errlen) {
  int foreign = 0;
  char id[TXL_CKPT_ID_LEN], e[1024];
  if (t->dist.rank == 0 && access(path, F_OK) == 0 && txl_ckpt_read_run_id(path, id, e, sizeof e) == 0 &&
      strcmp(id, t->st.run_id) != 0) {
    foreign = 1;
    snprintf(err, errlen, "%s belongs to another run (run_id %s; this run's is %s): not overwritten; give this run "
             "another run.work_dir", path, id, t->st.run_id);
  }
  if (t->dist.world > 1) txl_dist_allreduce_max_i32(&foreign, 1);
  return foreign;
}

int txl_trainer_try_save(TxlTrainer *t, int is_best, char *err, size_t errlen) {
  const TxlConfig *c = &t->cfg;
  char name[64], path[1200], why[1024];
  snprintf(name, sizeof name, "ckpt-%08lld.h5", (long long)t->st.step);
  snprintf(path, sizeof path, "%s/%s", c->work_dir, name);
  snprintf(err, errlen, "rank 0 could not write the checkpoint %s", path); /* the others' message */
  if (another_runs_file(t, path, err, errlen)) return -1;
  const size_t pbytes = (size_t)t->model.table.total * sizeof(float);
  TxlCkptBuffers b;
  host_buffers(t, &b);
  t->ops->to_host(b.params, t->model.param_buf, pbytes);
  moments_to_host(t, &b);
  txl_run_mems_to_host(&t->model, &t->run, b.mems);
  TxlCkptState st = t->st; /* the loop's own state; that of the parts that own the rest: */
  st.mem_rows = t->run.mem_rows;
  st.adam_t = t->adam.t;
  st.seed = (uint32_t)c->seed;
  st.lr = t->st.step > 0 ? txl_schedule_lr(&t->sched, t->st.step - 1) : 0.0;
  st.plateau_rate = t->sched.plateau.rate;
  st.plateau_best = t->sched.plateau.best;
  st.plateau_bad = t->sched.plateau.bad;
  st.loss_scale = t->scaler.scale;
  st.loss_scale_good = t->scaler.good;
  st.loss_scale_skipped = t->scaler.skipped;
  snprintf(st.optim, sizeof st.optim, "%s", txl_config_choice_name(TXL_CFG_KEY_optim, c->optim));
  snprintf(st.vocab_digest, sizeof st.vocab_digest, "%s", t->corpus ? txl_corpus_vocab_digest(t->corpus) : "");
  char *text = txl_trainer_config_text(c);
  double t0 = txl_now_s();
  int rc = txl_ckpt_write(path, text, &st, &b, why, sizeof why);
  free(text);
  free_buffers(&b);
  if (rc != 0) { /* every rank has the same verdict and message */
    snprintf(err, errlen, "checkpoint not written (%s): %s",
             t->last_save_step >= 0 ? "the previous one is intact" : "this run has written none yet", why);
    return -1;
  }
  int failed = 0;
  if (t->dist.rank == 0) {
    /* the pointers move only after the file is complete and renamed */
    failed = write_pointer(c->work_dir, "latest", name, why, sizeof why) != 0 ||
             (is_best && write_pointer(c->work_dir, "best", name, why, sizeof why) != 0);
    if (failed) {
      snprintf(err, errlen, "%s (%s is written, but the pointer still names the checkpoint before it)", why, path);
    } else {
      rotate(c->work_dir, c->keep_checkpoints, t->st.run_id, name);
      struct stat sb;
      double mb = stat(path, &sb) == 0 ? (double)sb.st_size / 1048576.0 : 0.0;
      double dt = txl_now_s() - t0;
      printf("checkpoint %s: %.1f MiB in %.2f s (%.0f MiB/s)%s\n", path, mb, dt, dt > 0 ? mb / dt : 0.0,
             is_best ? ", best on validation so far" : "");
      fflush(stdout);
    }
  }
  if (t->dist.world > 1) txl_dist_allreduce_max_i32(&failed, 1); /* also keeps the ranks together */
  if (failed) return -1;
  t->last_save_step = t->st.step;
  return 0;
}

void txl_trainer_save(TxlTrainer *t, int is_best) {
  char err[2048];
  const int failed = txl_trainer_try_save(t, is_best, err, sizeof err) != 0;
  txl_fatal_if_any(failed && t->dist.rank == 0, "%s", err); /* rank 0 holds the reason of every failure */
}

/* ---- resuming ------------------------------------------------------------------------------ */

static int is_dir(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The checkpoint to continue from, or "" to start fresh. Every rank computes the same. A run
 * folder (--resume DIR, run.resume = auto) gives its newest checkpoint that opens
 * (txl_ckpt_find: `latest`'s, or with a notice an older one when latest is damaged). */
static void find_checkpoint(const TxlTrainer *t, char *out, size_t n) {
  const TxlConfig *c = &t->cfg;
  out[0] = 0;
  const char *r = c->resume;
  if (!*r) return;
  const int is_auto = !strcmp(r, "auto");
  if (is_auto || is_dir(r)) {
    char notice[2048], err[2048];
    int rc = txl_ckpt_find(is_auto ? c->work_dir : r, out, n, notice, sizeof notice, err, sizeof err);
    if (rc < 0) txl_fatal_all("%s", err);
    if (rc > 0 && !is_auto) txl_fatal_all("%s: no checkpoint to resume from (%s)", r, err);
    if (rc == 0 && notice[0] && t->dist.rank == 0) {
      printf("resume: %s\n", notice);
      fflush(stdout);
    }
    return;
  }
  if (access(r, R_OK) != 0) txl_fatal_all("%s: cannot read the checkpoint: %s", r, strerror(errno));
  snprintf(out, n, "%s", r);
}

/* The checkpoint must have been trained on the corpus's vocabulary, not only on one of its size. */
static void check_vocabulary(const TxlTrainer *t, const char *path, const TxlCkptState *st) {
  if (!t->corpus) return;
  char msg[2048];
  int rc = txl_ckpt_check_vocab(path, st, t->cfg.corpus, txl_corpus_vocab_digest(t->corpus), msg, sizeof msg);
  if (rc < 0) txl_fatal_all("%s", msg);
  if (rc > 0 && t->dist.rank == 0) {
    printf("resume: %s\n", msg);
    fflush(stdout);
  }
}

/* A fresh lineage: 128 random bits as hex (rank 0's is the one checkpoints record). */
static void new_run_id(char out[TXL_CKPT_ID_LEN]) {
  unsigned char r[16];
  FILE *f = fopen("/dev/urandom", "rb");
  size_t got = f ? fread(r, 1, sizeof r, f) : 0;
  if (f) fclose(f);
  if (got != sizeof r) { /* no /dev/urandom: the clock and the process are unique enough */
    uint64_t x = (uint64_t)(txl_now_s() * 1e9) ^ ((uint64_t)getpid() << 32);
    for (size_t i = 0; i < sizeof r; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      r[i] = (unsigned char)(x >> 56);
    }
  }
  for (size_t i = 0; i < sizeof r; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
}

/* dev_perf's state (rate, best validation loss, bad validations) continues from a checkpoint of a
 * dev_perf run. Any other checkpoint starts it fresh (txl_trainer_setup's: rate = train.lr, no
 * validation seen), as a run switched to dev_perf on resume: a file written before these
 * attributes existed is always such a one (dev_perf came with them), and reads the same as a new
 * file of its run, which holds that fresh state. A dev_perf run's file without them cannot be
 * continued exactly and is refused. */
static void resume_plateau(TxlTrainer *t, const char *path, const TxlConfig *saved, const TxlCkptState *st) {
  if (t->cfg.scheduler != TXL_SCHEDULER_DEV_PERF || saved->scheduler != TXL_SCHEDULER_DEV_PERF) return;
  if (!st->has_plateau)
    txl_fatal_all("%s: its config says train.scheduler = dev_perf, but it holds no schedule state (root attributes "
                  "plateau_rate, plateau_best, plateau_bad): the rate cannot continue exactly", path);
  if (!isfinite(st->plateau_rate) || st->plateau_rate <= 0.0 || isnan(st->plateau_best))
    txl_fatal_all("%s: not a valid txl checkpoint: dev_perf's state is rate %g, best validation loss %g", path,
                  st->plateau_rate, st->plateau_best);
  t->sched.plateau.rate = st->plateau_rate;
  t->sched.plateau.best = st->plateau_best;
  t->sched.plateau.bad = st->plateau_bad;
}

/* The loss scaler's state continues from a checkpoint of a run that scaled the same way; a run
 * that turns scaling on (or changes static / dynamic) on resume starts it fresh from its config.
 * A file of a scaling run without the state (it came with the feature: not one txl wrote) cannot
 * continue exactly and is refused. */
static void resume_loss_scale(TxlTrainer *t, const char *path, const TxlConfig *saved, const TxlCkptState *st) {
  if (t->scaler.mode == TXL_LOSS_SCALE_OFF || txl_trainer_loss_scale_mode(saved) != t->scaler.mode) return;
  if (!st->has_loss_scale)
    txl_fatal_all("%s: its config scales the loss, but it holds no loss-scale state (root attributes loss_scale, "
                  "loss_scale_good, loss_scale_skipped): the run cannot continue exactly", path);
  if (!txl_loss_scale_valid(st->loss_scale))
    txl_fatal_all("%s: not a valid txl checkpoint: loss_scale %g is not a power of two in [1, 2^100]", path,
                  st->loss_scale);
  t->scaler.skipped = st->loss_scale_skipped;
  if (t->scaler.mode == TXL_LOSS_SCALE_DYNAMIC) { /* static: S is the config's */
    t->scaler.scale = st->loss_scale;
    t->scaler.good = st->loss_scale_good;
  }
}

/* The loop's state becomes the file's (t->st = *st), with two exceptions. The sums since the last
 * progress line continue, so that the first line after the resume averages the same steps as the
 * uninterrupted run's, and so does the step of the latest validation: a file written before them
 * leaves the fresh run's (sums from zero, no validation). A version 1 checkpoint has no lineage:
 * the run takes a new one, so rotation never counts the older files (which it cannot tell apart
 * from another run's) as its own. */
static void resume_state(TxlTrainer *t, const TxlCkptState *st) {
  const TxlCkptState fresh = t->st;
  t->st = *st;
  if (!st->has_progress) {
    t->st.progress = fresh.progress;
    t->st.last_eval_step = fresh.last_eval_step;
  }
  if (!st->run_id[0]) new_run_id(t->st.run_id);
}

/* ---- going back: the run's newer checkpoints ---------------------------------------------- */

/* After the run's checkpoints newer than the resumed one are discarded: a pointer that named one
 * of them names `target` instead (a file in dir), or is removed when target is "". Rank 0. */
static int repoint(const char *dir, const char *name, const char *target, char *said, size_t n, char *err,
                   size_t errlen) {
  const size_t used = strlen(said);
  if (target[0]) {
    snprintf(said + used, n - used, "; %s now names %s", name, target);
    return write_pointer(dir, name, target, err, errlen);
  }
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(said + used, n - used, "; %s removed (no checkpoint of it is left)", name);
  if (unlink(path) == 0 || errno == ENOENT) return 0;
  snprintf(err, errlen, "%s: cannot remove: %s", path, strerror(errno));
  return -1;
}

/* "ckpt-<step>.h5" when work_dir holds that checkpoint of this run's lineage, else "". */
static void own_checkpoint(const TxlTrainer *t, int64_t step, char *out, size_t n) {
  char p[1300];
  snprintf(out, n, "ckpt-%08lld.h5", (long long)step);
  snprintf(p, sizeof p, "%s/%s", t->cfg.work_dir, out);
  if (step < 0 || !same_lineage(p, t->st.run_id)) out[0] = 0;
}

/* run.discard_newer: deletes the n files (the run's checkpoints after the resumed step), then
 * moves "latest" to the resumed step's checkpoint and "best" to the resumed state's best step's,
 * each only when it named a deleted file, and each removed when work_dir holds no such file of
 * the run. Rank 0; returns 0, or -1 with the reason in err. */
static int discard_newer(const TxlTrainer *t, const TxlCkptFile *newer, int n, char *err, size_t errlen) {
  const char *dir = t->cfg.work_dir;
  char latest[1200], best[1200], said[2048] = "";
  pointer_target(dir, "latest", latest, sizeof latest);
  pointer_target(dir, "best", best, sizeof best);
  int latest_gone = 0, best_gone = 0;
  for (int i = 0; i < n; i++) {
    char p[1300];
    snprintf(p, sizeof p, "%s/%s", dir, newer[i].name);
    if (unlink(p) != 0) {
      snprintf(err, errlen, "%s: cannot remove (run.discard_newer): %s", p, strerror(errno));
      return -1;
    }
    latest_gone |= !strcmp(latest, newer[i].name);
    best_gone |= !strcmp(best, newer[i].name);
  }
  char to_latest[64], to_best[64];
  own_checkpoint(t, t->st.step, to_latest, sizeof to_latest);
  own_checkpoint(t, t->st.best_step, to_best, sizeof to_best);
  if ((latest_gone && repoint(dir, "latest", to_latest, said, sizeof said, err, errlen) != 0) ||
      (best_gone && repoint(dir, "best", to_best, said, sizeof said, err, errlen) != 0))
    return -1;
  printf("resume: run.discard_newer: removed %d checkpoint%s of this run after step %lld from %s (the newest %s)%s\n",
         n, n > 1 ? "s" : "", (long long)t->st.step, dir, newer[0].name, said);
  fflush(stdout);
  return 0;
}

/* The error of a resume from step t->st.step of checkpoint `path` while work_dir holds the n newer
 * checkpoints `newer` of its run (newest first): them, the pointers that name one, both ways out. */
static void refusal(const TxlTrainer *t, const char *path, const TxlCkptFile *newer, int n, char *msg, size_t len) {
  const char *dir = t->cfg.work_dir;
  char named[700] = ""; /* "; best names ckpt-...": the pointers that name one of them */
  static const char *const pointers[] = {"best", "latest"};
  for (int k = 0; k < 2; k++) {
    char target[600];
    pointer_target(dir, pointers[k], target, sizeof target);
    for (int i = 0; i < n; i++)
      if (!strcmp(target, newer[i].name))
        snprintf(named + strlen(named), sizeof named - strlen(named), "; %s names %s", pointers[k], target);
  }
  const int w = snprintf(msg, len,
           "%s is step %lld of a run that went on: %s holds %d newer checkpoint%s of it (the newest %s%s), which "
           "continuing from step %lld would overwrite: branch off into another run.work_dir, or discard them with "
           "--set run.discard_newer=true", path, (long long)t->st.step, dir, n, n > 1 ? "s" : "", newer[0].name, named,
           (long long)t->st.step);
  if (w >= 0 && (size_t)w >= len && len >= 4) memcpy(msg + len - 4, "...", 4); /* cut: say so */
}

/* Going back to an older checkpoint never destroys the run's future: the checkpoints of its
 * lineage in work_dir after the resumed step, which the resumed run would overwrite and rotate
 * away ("best" may name one), make the resume of a checkpoint file an error naming them and both
 * ways out, unless run.discard_newer says to discard them. A run folder's resume (run.resume =
 * auto, --resume DIR) continues from "latest", and newer files of the run there are those of a
 * run killed between writing a checkpoint and moving "latest" to it, whose steps the run computes
 * again: a notice, no error, so that a requeue always goes on. Other runs' checkpoints are never
 * this run's to overwrite (another_runs_file) and do not count. collective: all ranks */
static void check_newer(TxlTrainer *t, const char *path) {
  char msg[2048] = "";
  int failed = 0;
  if (t->dist.rank == 0) {
    const char *dir = t->cfg.work_dir;
    int count = 0, n = 0;
    TxlCkptFile *files = txl_ckpt_list_dir(dir, &count); /* newest first */
    for (int i = 0; i < count && files[i].step > t->st.step; i++) {
      char p[1300];
      snprintf(p, sizeof p, "%s/%s", dir, files[i].name);
      if (same_lineage(p, t->st.run_id)) files[n++] = files[i];
    }
    const char *r = t->cfg.resume;
    if (n > 0 && (!strcmp(r, "auto") || is_dir(r))) {
      printf("resume: %s holds %d checkpoint%s of this run after step %lld (the newest %s), left by a run stopped "
             "before it moved 'latest': continuing from %s, as 'latest' says\n", dir, n, n > 1 ? "s" : "",
             (long long)t->st.step,
             files[0].name, path);
      fflush(stdout);
    } else if (n > 0 && t->cfg.discard_newer) {
      failed = discard_newer(t, files, n, msg, sizeof msg) != 0;
    } else if (n > 0) {
      failed = 1;
      refusal(t, path, files, n, msg, sizeof msg);
    }
    free(files);
  }
  txl_fatal_if_any(failed, "%s", msg);
}

int txl_trainer_resume(TxlTrainer *t) {
  char path[1200], err[1024];
  find_checkpoint(t, path, sizeof path);
  if (!path[0]) {
    new_run_id(t->st.run_id);
    if (!strcmp(t->cfg.resume, "auto") && t->dist.rank == 0)
      printf("resume = auto: no checkpoint in %s, starting fresh\n", t->cfg.work_dir);
    txl_report_keep_until(&t->report, 0);
    return 0;
  }
  char *text = NULL;
  TxlCkptState st;
  if (txl_ckpt_peek(path, &text, &st, err, sizeof err) != 0) txl_fatal_all("%s", err);
  TxlConfig saved;
  txl_config_defaults(&saved);
  if (txl_config_load_ini_text(&saved, text, path, err, sizeof err) != 0)
    txl_fatal_all("%s: its config does not parse: %s", path, err);
  free(text);
  const char *optim = txl_config_choice_name(TXL_CFG_KEY_optim, t->cfg.optim);
  if (strcmp(st.optim, optim) != 0)
    txl_fatal_all("%s holds the state of train.optim = %s, this run asks for train.optim = %s: the optimizer is "
                  "fixed on resume", path, st.optim, optim);
  char diff[4096];
  if (txl_config_diff(&saved, &t->cfg, 1, diff, sizeof diff) > 0)
    txl_fatal_all("%s was made by a model of another shape; differing keys (checkpoint -> now): %s", path, diff);
  if (txl_config_diff(&saved, &t->cfg, 0, diff, sizeof diff) > 0 && t->dist.rank == 0)
    printf("resume: these keys differ from the checkpoint's and take their new values: %s\n", diff);
  check_vocabulary(t, path, &st);

  TxlCkptBuffers b;
  host_buffers(t, &b);
  if (txl_ckpt_read(path, &st, &b, err, sizeof err) != 0) txl_fatal_all("%s", err);
  txl_model_set_params(&t->model, b.params);
  { /* this rank's slice of the moments (all of them unless dist.shard_optimizer) */
    const size_t off = (size_t)t->adam.lo, bytes = (size_t)(t->adam.hi - t->adam.lo) * sizeof(float);
    t->ops->to_device(t->adam.m, b.adam_m + off, bytes);
    t->ops->to_device(t->adam.v, b.adam_v + off, bytes);
  }
  txl_run_mems_to_device(&t->model, &t->run, b.mems);
  free_buffers(&b);
  t->run.mem_rows = st.mem_rows;
  t->adam.t = st.adam_t;
  resume_state(t, &st);
  t->last_save_step = t->st.step;
  resume_plateau(t, path, &saved, &st);
  resume_loss_scale(t, path, &saved, &st);
  check_newer(t, path);
  txl_report_keep_until(&t->report, t->st.step);
  if (t->dist.rank == 0) {
    printf("resumed from %s: step %lld, %lld tokens seen, epoch %lld, written by %d rank%s\n", path,
           (long long)t->st.step,
           (long long)st.tokens_seen, (long long)st.epoch, st.world_size, st.world_size > 1 ? "s" : "");
    fflush(stdout);
  }
  return 1;
}
