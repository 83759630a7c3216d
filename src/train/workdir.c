#include "src/train/workdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/train/report.h"
#include "src/train/tb_log.h"

#define MSG_LEN 1600

/* The lock's descriptor: never closed, so that the lock lasts exactly as long as the process. */
static int g_lock_fd = -1;

static int make_dirs(const char *path, char *err, size_t n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1;; p++) {
    const int end = *p == 0;
    if (!end && *p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
      snprintf(err, n, "%s: cannot create directory: %s", buf, strerror(errno));
      return -1;
    }
    if (end) return 0;
    *p = '/';
  }
}

/* "pid 123 on node7" from the lock file's contents, or "" when it holds none yet. */
static void lock_holder(int fd, char *out, size_t n) {
  char buf[128], host[64];
  long pid = 0;
  ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
  out[0] = 0;
  if (k <= 0) return;
  buf[k] = 0;
  if (sscanf(buf, "%ld %63s", &pid, host) == 2) snprintf(out, n, "pid %ld on %s, ", pid, host);
}

static int take_lock(const char *dir, const char *host, char *err, size_t n) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, TXL_WORKDIR_LOCK);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    snprintf(err, n, "%s: cannot open the lock file: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EWOULDBLOCK) {
      char who[128];
      lock_holder(fd, who, sizeof who);
      close(fd);
      snprintf(err, n, "%s is in use by another txl-train (%sholding %s): wait for it to end or give this run another "
               "run.work_dir", dir, who, path);
      return -1;
    }
    /* a file system without flock (some network file systems): run, but say what is not checked */
    fprintf(stderr, "txl: warning: %s: cannot lock (%s): a second txl-train on this work_dir would not be noticed\n",
            path, strerror(e));
    close(fd);
    return 0;
  }
  char line[128];
  const int len = snprintf(line, sizeof line, "%ld %s\n", (long)getpid(), host);
  errno = 0;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len) {
    snprintf(err, n, "%s: cannot write: %s", path, errno ? strerror(errno) : "short write");
    close(fd);
    return -1;
  }
  g_lock_fd = fd;
  return 0;
}

/* A temporary that no running process will finish: "ckpt-<step>.h5.tmp" (the checkpoint writer
 * names it without a pid; holding the lock proves that no other txl-train writes into this
 * folder), or "<latest|best|config.ini|events.out.tfevents.*>.tmp-<pid>" of a process that no
 * longer runs. */
static int is_stale_temporary(const char *name) {
  int step = -1, len = 0;
  if (sscanf(name, "ckpt-%d.h5.tmp%n", &step, &len) == 1 && len > 0 && name[len] == 0) return 1;
  static const char *const bases[] = {"latest", "best", "config.ini"};
  const char *tmp = NULL;
  for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
    const size_t b = strlen(bases[i]);
    if (strncmp(name, bases[i], b) == 0 && strncmp(name + b, ".tmp-", 5) == 0) tmp = name + b;
  }
  if (!strncmp(name, TXL_TB_PREFIX, strlen(TXL_TB_PREFIX))) tmp = strstr(name, ".tmp-"); /* in tb/ */
  if (!tmp) return 0;
  char *end;
  const long pid = strtol(tmp + 5, &end, 10);
  if (*end || end == tmp + 5 || pid <= 0) return 0;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static void remove_stale_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char removed[1024] = "";
  int count = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!is_stale_temporary(e->d_name)) continue;
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (unlink(path) != 0) {
      fprintf(stderr, "txl: warning: %s: cannot remove this temporary of a killed run: %s\n", path, strerror(errno));
      continue;
    }
    const size_t used = strlen(removed);
    snprintf(removed + used, sizeof removed - used, "%s%s", count ? ", " : "", e->d_name);
    count++;
  }
  closedir(d);
  if (count) {
    printf("work_dir %s: removed %d temporar%s left by a run killed while writing: %s\n", dir, count,
           count > 1 ? "ies" : "y", removed);
    fflush(stdout);
  }
}

void txl_workdir_open(const char *work_dir, const TxlDist *dist) {
  char err[MSG_LEN] = "";
  int failed = 0;
  if (dist->rank == 0) {
    failed = make_dirs(work_dir, err, sizeof err) != 0 || take_lock(work_dir, dist->host, err, sizeof err) != 0;
    if (!failed) {
      char tb[1200];
      snprintf(tb, sizeof tb, "%s/%s", work_dir, TXL_TB_DIR);
      remove_stale_temporaries(work_dir);
      remove_stale_temporaries(tb); /* the event files' (run.tensorboard), which TensorBoard would read */
    }
  }
  txl_fatal_if_any(failed, "%s", err);
}

void txl_workdir_refuse_checkpoints(const char *work_dir, const TxlDist *dist) {
  char msg[MSG_LEN] = "";
  int failed = 0;
  if (dist->rank == 0) {
    int count = 0;
    TxlCkptFile *files = txl_ckpt_list_dir(work_dir, &count);
    if (count > 0) {
      failed = 1;
      snprintf(msg, sizeof msg,
               "%s holds %d checkpoint%s of an earlier run (the newest %s), which a new run would overwrite: continue "
               "that run with --resume %s (or run.resume = auto), or give this one another run.work_dir",
               work_dir, count, count > 1 ? "s" : "", files[0].name, work_dir);
    } else { /* a run that died before its first checkpoint: its lines are a history too */
      char path[1200];
      int last = -1;
      snprintf(path, sizeof path, "%s/metrics.jsonl", work_dir);
      const int lines = txl_metrics_history(path, &last);
      if (lines > 0) {
        failed = 1;
        snprintf(msg, sizeof msg,
                 "%s holds %d line%s of an earlier run that wrote no checkpoint (the last of step %d), which a new "
                 "run would append to: give this one another run.work_dir, or start over in it with "
                 "--set run.resume=auto (its lines are dropped), or remove the file",
                 path, lines, lines > 1 ? "s" : "", last);
      }
    }
    free(files);
  }
  txl_fatal_if_any(failed, "%s", msg);
}
