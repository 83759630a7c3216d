#include "src/train/tb_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "src/base/error.h"
#include "src/base/file.h"
#include "src/train/tb_events.h"

double txl_tb_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int txl_tb_open(TxlTbLog *tb, const char *work_dir, char *err, size_t errlen) {
  memset(tb, 0, sizeof *tb);
  tb->fd = -1;
  snprintf(tb->dir, sizeof tb->dir, "%s/%s", work_dir, TXL_TB_DIR);
  struct stat sb;
  if (mkdir(tb->dir, 0755) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "%s: cannot create the TensorBoard folder (run.tensorboard = true): %s", tb->dir,
             strerror(errno));
    return -1;
  }
  const int found = stat(tb->dir, &sb) == 0;
  if (!found || !S_ISDIR(sb.st_mode)) {
    snprintf(err, errlen, "%s: cannot create the TensorBoard folder (run.tensorboard = true): %s", tb->dir,
             found ? "something that is not a folder has its name" : strerror(errno));
    return -1;
  }
  if (access(tb->dir, W_OK | X_OK) != 0) {
    snprintf(err, errlen, "%s: cannot write into the TensorBoard folder (run.tensorboard = true): %s", tb->dir,
             strerror(errno));
    return -1;
  }
  return 0;
}

void txl_tb_close(TxlTbLog *tb) {
  if (tb->fd >= 0) close(tb->fd);
  tb->fd = -1;
}

/* ---- the files of earlier starts ------------------------------------------------------------ */

/* An event file's name (not a temporary of txl_write_file_atomic: "<name>.tmp-<pid>", which the
 * run folder's clean-up removes) and its seconds. */
static int event_file_seconds(const char *name, long long *seconds) {
  const size_t n = strlen(TXL_TB_PREFIX);
  if (strncmp(name, TXL_TB_PREFIX, n) != 0 || strstr(name, ".tmp-")) return 0;
  char *end;
  *seconds = strtoll(name + n, &end, 10);
  if (end == name + n) *seconds = 0;
  return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The folder's event files, sorted by name (TensorBoard reads them in that order); *newest: the
 * largest seconds among them (-1: none). NULL with *n = -1 when the folder cannot be read. */
static char **list_event_files(const char *dir, int *n, long long *newest) {
  *n = 0;
  *newest = -1;
  DIR *d = opendir(dir);
  if (!d) {
    *n = -1;
    return NULL;
  }
  char **names = NULL;
  int cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    long long s;
    if (!event_file_seconds(e->d_name, &s)) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      names = realloc(names, (size_t)cap * sizeof *names);
      if (!names) txl_fatal("out of memory listing %s", dir);
    }
    names[(*n)++] = strdup(e->d_name);
    if (s > *newest) *newest = s;
  }
  closedir(d);
  if (*n > 1) qsort(names, (size_t)*n, sizeof *names, by_name);
  return names;
}

/* The whole file at path into *buf (malloc'd), its bytes in *size; -1 with err when it cannot
 * be read. A file that is not a regular one (a device) reads as empty. */
static int read_file(const char *path, unsigned char **buf, size_t *size, char *err, size_t errlen) {
  *buf = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  struct stat sb;
  if (!f || fstat(fileno(f), &sb) != 0) {
    snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  const size_t want = S_ISREG(sb.st_mode) ? (size_t)sb.st_size : 0;
  *buf = malloc(want ? want : 1);
  if (!*buf) txl_fatal("out of memory reading %s", path);
  *size = fread(*buf, 1, want, f);
  const int bad = ferror(f) || *size != want;
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: cannot read: %s", path, errno ? strerror(errno) : "it shrank while read");
    free(*buf);
    *buf = NULL;
    return -1;
  }
  return 0;
}

/* One earlier file cut back to step keep (see txl_tb_start). */
static int keep_file(const char *path, int keep, int *dropped, int *unigrams, char *err, size_t errlen) {
  unsigned char *buf, *out;
  size_t size;
  if (read_file(path, &buf, &size, err, errlen) != 0) return -1;
  out = malloc(size ? size : 1);
  if (!out) txl_fatal("out of memory reading %s", path);
  size_t pos = 0, kept = 0, prefix = 0; /* prefix: bytes kept as they are before the first that goes */
  int changed = 0, rc;
  const unsigned char *data;
  size_t len;
  while ((rc = txl_tb_next_record(buf, size, &pos, &data, &len)) != 0) {
    if (rc == -1) { /* cut short or a damaged length: the rest cannot be read */
      (*dropped)++;
      changed = changed ? changed : 1;
      break;
    }
    const size_t at = (size_t)(data - buf) - 12;
    int64_t step = 0;
    int has_version = 0, go = 0;
    char kind[16] = "";
    if (rc == -2 || txl_tb_event_parse(data, len, &step, kind, sizeof kind, &has_version) != 0) {
      (*dropped)++;
      go = 1;
    } else if (!strcmp(kind, "unigram")) {
      go = (*unigrams)++ > 0 || step > keep; /* the history's first stays */
    } else if (step > keep || (step == keep && !strcmp(kind, "test"))) {
      /* the test event of the resumed step ended the run that stopped there: the continued run
       * ends with its own */
      if (kind[0]) (*dropped)++;
      go = 1;
    }
    if (go) {
      changed = changed ? changed : 1;
      continue;
    }
    if (changed) changed = 2; /* a record kept after one that went: the file is rewritten */
    else prefix = pos;
    memcpy(out + kept, buf + at, pos - at);
    kept += pos - at;
  }
  free(buf);
  int result = 0;
  if (changed == 1) { /* only records at the end go: cut there (one call; a link stays one) */
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)prefix) != 0) {
      snprintf(err, errlen, "%s: cannot cut back to step %d: %s", path, keep, strerror(errno));
      result = -1;
    }
    if (fd >= 0) close(fd);
  } else if (changed == 2) {
    result = txl_write_file_atomic(path, out, kept, err, errlen);
  }
  free(out);
  return result;
}

/* ---- this start's file ---------------------------------------------------------------------- */

static int create_file(TxlTbLog *tb, long long newest, int keep, char *err, size_t errlen) {
  char host[256] = "localhost";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = 0;
  for (char *c = host; *c; c++)
    if (*c == '/') *c = '_';
  /* later than every earlier file's seconds (two starts within one second): TensorBoard reads the
   * files in the order of their names, and a running one only ever moves on to a later name */
  const double now = txl_tb_now();
  long long seconds = (long long)now;
  if (seconds <= newest) seconds = newest + 1;
  snprintf(tb->path, sizeof tb->path, "%s/%s%lld.%s", tb->dir, TXL_TB_PREFIX, seconds, host);
  tb->fd = open(tb->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (tb->fd < 0) {
    snprintf(err, errlen, "%s: cannot create: %s", tb->path, strerror(errno));
    return -1;
  }
  tb->size = 0;
  unsigned char rec[256];
  const TxlTbEvent version = {.wall_time = now, .file_version = TXL_TB_FILE_VERSION};
  const TxlTbEvent start = {.wall_time = now, .step = (int64_t)keep + 1, .session_start = 1};
  size_t n = txl_tb_record(&version, rec, sizeof rec);
  n += txl_tb_record(&start, rec + n, sizeof rec - n);
  int cut_short;
  if (txl_append_whole(tb->fd, rec, n, &tb->size, &cut_short) != 0) {
    snprintf(err, errlen, "%s: cannot write: %s", tb->path, errno ? strerror(errno) : "short write");
    return -1;
  }
  return 0;
}

int txl_tb_start(TxlTbLog *tb, int keep, int *dropped, int *unigrams, char *err, size_t errlen) {
  *dropped = 0;
  *unigrams = 0;
  int n;
  long long newest;
  char **names = list_event_files(tb->dir, &n, &newest);
  if (n < 0) {
    snprintf(err, errlen, "%s: cannot read the folder: %s", tb->dir, strerror(errno));
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", tb->dir, names[i]);
    rc = keep_file(path, keep, dropped, unigrams, err, errlen);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  return rc == 0 ? create_file(tb, newest, keep, err, errlen) : rc;
}
