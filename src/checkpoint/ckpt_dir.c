/* A run folder's checkpoints: the "latest" pointer, the ckpt-<step>.h5 files, and the choice of
 * the newest readable one to resume from (txl_ckpt_find). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

/* What pointer dir/name ("latest", "best") says: LATEST_NAMES with the full path of the file it
 * names in `path` (which may not exist), or why it names none. Serial. */
typedef enum { LATEST_NAMES, LATEST_MISSING, LATEST_EMPTY } LatestKind;

static LatestKind read_pointer(const char *dir, const char *pointer, char *path, size_t n) {
  path[0] = '\0';
  char lp[4096];
  if ((size_t)snprintf(lp, sizeof lp, "%s/%s", dir, pointer) >= sizeof lp) return LATEST_MISSING;
  FILE *f = fopen(lp, "r");
  if (!f) return LATEST_MISSING;
  char line[4096];
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  if (!got) return LATEST_EMPTY;
  size_t len = strlen(line);
  while (len > 0 && isspace((unsigned char)line[len - 1])) line[--len] = '\0';
  char *name = line;
  while (*name && isspace((unsigned char)*name)) name++;
  if (!*name) return LATEST_EMPTY;
  int w = name[0] == '/' ? snprintf(path, n, "%s", name) : snprintf(path, n, "%s/%s", dir, name);
  if (w < 0 || (size_t)w >= n) { /* a path this long names nothing that could be opened */
    snprintf(path, n, "%.100s...", name);
    return LATEST_NAMES;
  }
  return LATEST_NAMES;
}

static LatestKind read_latest(const char *dir, char *path, size_t n) { return read_pointer(dir, "latest", path, n); }

static int is_regular_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int txl_ckpt_latest(const char *dir, char *path_out, size_t n) {
  if (!dir || !path_out || n == 0) return -1;
  if (read_latest(dir, path_out, n) != LATEST_NAMES || !is_regular_file(path_out)) return -1;
  return 0;
}

int txl_ckpt_pointer(const char *dir, const char *pointer, char *path_out, size_t n) {
  const LatestKind kind = read_pointer(dir, pointer, path_out, n);
  if (kind != LATEST_NAMES) return kind == LATEST_MISSING ? -1 : -2;
  return is_regular_file(path_out) ? 0 : -3;
}

/* The step of a file named as the trainer names checkpoints, "ckpt-<step>.h5", or -1. */
static long ckpt_name_step(const char *name) {
  long step = -1;
  int len = 0;
  if (strncmp(name, "ckpt-", 5) != 0 || !isdigit((unsigned char)name[5])) return -1;
  if (sscanf(name + 5, "%ld.h5%n", &step, &len) == 1 && len > 0 && name[5 + len] == '\0') return step;
  return -1;
}

static int newest_first(const void *a, const void *b) {
  long x = ((const TxlCkptFile *)a)->step, y = ((const TxlCkptFile *)b)->step;
  return x < y ? 1 : x > y ? -1 : 0;
}

TxlCkptFile *txl_ckpt_list_dir(const char *dir, int *count) {
  TxlCkptFile *files = NULL;
  int n = 0, cap = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    const long step = ckpt_name_step(e->d_name);
    if (step < 0 || strlen(e->d_name) >= sizeof files->name) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      files = realloc(files, sizeof *files * (size_t)cap);
      ALLOC_CHECK(files);
    }
    files[n].step = step;
    snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
    n++;
  }
  if (d) closedir(d);
  if (n) qsort(files, (size_t)n, sizeof *files, newest_first);
  *count = n;
  return files;
}

/* Rank 0's view of the folder, for txl_ckpt_find: the candidates in the order they are tried
 * (the file latest names when it exists, then every ckpt-<step>.h5 newest first), packed as
 * NUL-terminated paths; `latest_says` what is wrong with latest ("" when it names a file that
 * exists: candidate 0). Returns the number of candidates. Serial. */
static int list_candidates(const char *dir, char **packed, size_t *packed_len, char *latest_says,
                           size_t n) {
  char latest[4096];
  LatestKind kind = read_latest(dir, latest, sizeof latest);
  int latest_exists = kind == LATEST_NAMES && is_regular_file(latest);
  latest_says[0] = '\0';
  if (kind == LATEST_MISSING) snprintf(latest_says, n, "there is no 'latest' pointer");
  else if (kind == LATEST_EMPTY) snprintf(latest_says, n, "'latest' is empty");
  else if (!latest_exists) snprintf(latest_says, n, "'latest' names %.900s, which does not exist", latest);

  int count = 0;
  TxlCkptFile *files = txl_ckpt_list_dir(dir, &count);
  size_t len = latest_exists ? strlen(latest) + 1 : 0;
  for (int i = 0; i < count; i++) len += strlen(dir) + 1 + strlen(files[i].name) + 1;
  char *buf = txl_malloc(len + 1, "checkpoint names"), *at = buf;
  int total = 0;
  if (latest_exists) {
    at += sprintf(at, "%s", latest) + 1;
    total++;
  }
  for (int i = 0; i < count; i++) {
    const int w = sprintf(at, "%s/%s", dir, files[i].name);
    if (latest_exists && strcmp(at, latest) == 0) continue; /* latest's file is tried first */
    at += w + 1;
    total++;
  }
  free(files);
  *packed = buf;
  *packed_len = (size_t)(at - buf);
  return total;
}

int txl_ckpt_find(const char *dir, char *path_out, size_t n, char *notice, size_t notice_len,
                  char *err, size_t errlen) {
  const int rank = txl_dist_rank();
  path_out[0] = '\0';
  if (notice && notice_len) notice[0] = '\0';
  if (err && errlen) err[0] = '\0';

  /* rank 0 reads the folder; every rank then tries the same files in the same order */
  char latest_says[CKPT_MSG_LEN] = "";
  char *packed = NULL;
  size_t packed_len = 0;
  int total = 0;
  if (rank == 0) total = list_candidates(dir, &packed, &packed_len, latest_says, sizeof latest_says);
  long long len = (long long)packed_len;
  txl_dist_bcast_blocking(&total, (int)sizeof total, 0);
  txl_dist_bcast_blocking(&len, (int)sizeof len, 0);
  txl_dist_bcast_blocking(latest_says, (int)sizeof latest_says, 0);
  if (rank != 0) packed = txl_malloc((size_t)len + 1, "checkpoint names");
  if (len > 0) txl_dist_bcast_blocking(packed, (int)len, 0);
  latest_says[CKPT_MSG_LEN - 1] = '\0';

  if (total == 0) {
    if (err && errlen)
      snprintf(err, errlen, "%s, and no ckpt-<step>.h5 file", latest_says[0] ? latest_says : "no checkpoint");
    free(packed);
    return 1;
  }
  /* the first that is whole, txl_ckpt_verify (collective: every rank gets the same verdict) */
  char first_problem[CKPT_MSG_LEN] = "", problem[CKPT_MSG_LEN];
  const char *p = packed, *chosen = NULL, *first_skipped = NULL;
  int skipped = 0;
  for (int i = 0; i < total && !chosen; i++, p += strlen(p) + 1) {
    if (txl_ckpt_verify(p, problem, sizeof problem) == 0) {
      chosen = p;
    } else {
      if (!skipped) { /* the problem without the path in front (it is named beside it) */
        const size_t k = strlen(p);
        const int named = strncmp(problem, p, k) == 0 && problem[k] == ':';
        first_skipped = p;
        snprintf(first_problem, sizeof first_problem, "%s", named ? problem + k + 2 : problem);
      }
      skipped++;
    }
  }
  char why[2 * CKPT_MSG_LEN], more[64] = "";
  if (skipped > 1) snprintf(more, sizeof more, "; %d more cannot be used either", skipped - 1);
  if (!latest_says[0] && skipped > 0) /* candidate 0 was latest's file */
    snprintf(why, sizeof why, "'latest' names %.600s, which cannot be used (%.600s)%s", first_skipped,
             first_problem, more);
  else if (skipped > 0) /* (the precisions keep the line within `why`, whatever the paths) */
    snprintf(why, sizeof why, "%.600s; %.600s cannot be used (%.600s)%s", latest_says, first_skipped,
             first_problem, more);
  else
    snprintf(why, sizeof why, "%s", latest_says);
  int rc = 0;
  if (!chosen) {
    if (err && errlen) snprintf(err, errlen, "%s: no usable checkpoint: %s", dir, why);
    rc = -1;
  } else {
    if ((size_t)snprintf(path_out, n, "%s", chosen) >= n) {
      if (err && errlen) snprintf(err, errlen, "%s: the checkpoint's path is too long", dir);
      path_out[0] = '\0';
      rc = -1;
    } else if (why[0] && notice && notice_len) {
      snprintf(notice, notice_len, "%s: %s; using %s, the newest checkpoint there that opens", dir,
               why, chosen);
    }
  }
  free(packed);
  return rc;
}

