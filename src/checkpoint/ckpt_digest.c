/* The digest of a whole checkpoint file (FORMAT.md, "The digest"): written by rank 0 into the
 * file's HDF5 user block once HDF5 has closed the file, and checked before HDF5 opens a file.
 *
 * Why before HDF5: HDF5 1.10 does not survive every damaged byte of its metadata (some single-bit
 * flips of a checkpoint crash it inside its group iteration, H5G__dense_iterate -> H5MM_xfree),
 * so a file must be known intact before HDF5 parses it. Why in the user block: it travels with
 * the file (a copy, a rename, rotation's unlink need nothing more), it is part of the file that
 * the writer's rename publishes (the file appears complete with its digest or not at all), and
 * HDF5 and every HDF5 tool skip the user block (h5py, h5ls, older txl read the file unchanged). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/sha256.h"
#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

static const char MAGIC[] = "txl-checkpoint digest 1\n";
static const unsigned char HDF5_SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
#define READ_BLOCK ((size_t)4 << 20) /* the file is streamed through SHA-256 in blocks of this */

/* The header in `ub` (CKPT_USERBLOCK bytes): the magic line, "size N", "sha256 <64 digits>",
 * "run_id <id>", NULs to the end. The digits are '0' when hex is NULL. Returns the offset of
 * the digits (-1 when the run id does not fit). */
static int header_make(unsigned char ub[CKPT_USERBLOCK], unsigned long long size, const char *hex,
                       const char *run_id) {
  memset(ub, 0, CKPT_USERBLOCK);
  const char *zeros = "0000000000000000000000000000000000000000000000000000000000000000";
  int w = snprintf((char *)ub, CKPT_USERBLOCK, "%ssize %llu\nsha256 ", MAGIC, size);
  const int at = w;
  w += snprintf((char *)ub + w, CKPT_USERBLOCK - (size_t)w, "%s\nrun_id %s\n", hex ? hex : zeros, run_id);
  return w < CKPT_USERBLOCK ? at : -1;
}

/* What header_make wrote, parsed strictly (every byte accounted for: the magic, decimal digits,
 * 64 lower-case hex digits, a run id of hex digits, then only NULs). Returns 0 with the stored
 * size, digest, its offset and the run id, or -1. */
static int header_parse(const unsigned char ub[CKPT_USERBLOCK], unsigned long long *size, char hex[65],
                        int *hex_at, char run_id[TXL_CKPT_ID_LEN]) {
  const char *p = (const char *)ub, *end = p + CKPT_USERBLOCK;
  if (memcmp(p, MAGIC, sizeof MAGIC - 1) != 0) return -1;
  p += sizeof MAGIC - 1;
  if (strncmp(p, "size ", 5) != 0) return -1;
  p += 5;
  *size = 0;
  int digits = 0;
  for (; p < end && *p >= '0' && *p <= '9' && digits < 19; p++, digits++) *size = *size * 10 + (unsigned)(*p - '0');
  if (!digits || p + 8 + 64 + 1 > end || strncmp(p, "\nsha256 ", 8) != 0) return -1;
  p += 8;
  *hex_at = (int)(p - (const char *)ub);
  for (int i = 0; i < 64; i++, p++) {
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return -1;
    hex[i] = *p;
  }
  hex[64] = '\0';
  if (p + 8 > end || strncmp(p, "\nrun_id ", 8) != 0) return -1;
  p += 8;
  int n = 0;
  for (; p < end && n < TXL_CKPT_ID_LEN - 1 && ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')); p++)
    run_id[n++] = *p;
  run_id[n] = '\0';
  if (p >= end || *p++ != '\n') return -1;
  for (; p < end; p++)
    if (*p) return -1;
  return 0;
}

/* SHA-256 of the header `ub` (the digits as '0') and of the file's bytes after it, streamed.
 * Returns 0, or -1 with errno set when the file cannot be read to the end. */
static int hash_file(int fd, const unsigned char ub[CKPT_USERBLOCK], int hex_at, char hex[65]) {
  unsigned char head[CKPT_USERBLOCK], digest[32];
  memcpy(head, ub, CKPT_USERBLOCK);
  memset(head + hex_at, '0', 64);
  TxlSha256 s;
  txl_sha256_init(&s);
  txl_sha256_update(&s, head, CKPT_USERBLOCK);
  unsigned char *buf = txl_malloc(READ_BLOCK, "checkpoint digest buffer");
  off_t at = CKPT_USERBLOCK;
  int rc = 0;
  for (;;) {
    const ssize_t got = pread(fd, buf, READ_BLOCK, at);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      rc = -1;
      break;
    }
    if (got == 0) break;
    txl_sha256_update(&s, buf, (size_t)got);
    at += got;
  }
  free(buf);
  txl_sha256_final(&s, digest, hex);
  return rc;
}

static int read_exactly(int fd, void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd, (char *)buf + done, n - done, (off_t)done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

int ckpt_digest_write(const char *tmp, const char *run_id, char *why, size_t n) {
  int fd = open(tmp, O_RDWR);
  struct stat sb;
  unsigned char ub[CKPT_USERBLOCK];
  char hex[65];
  int rc = -1, at;
  if (fd < 0 || fstat(fd, &sb) != 0)
    snprintf(why, n, "cannot open %s to write its digest: %s", tmp, strerror(errno));
  else if ((at = header_make(ub, (unsigned long long)sb.st_size, NULL, run_id)) < 0)
    snprintf(why, n, "internal error: the run id does not fit the digest header");
  else if (hash_file(fd, ub, at, hex) != 0)
    snprintf(why, n, "cannot read %s back for its digest: %s", tmp, strerror(errno));
  else if (header_make(ub, (unsigned long long)sb.st_size, hex, run_id) != at ||
           pwrite(fd, ub, CKPT_USERBLOCK, 0) != CKPT_USERBLOCK || fsync(fd) != 0)
    snprintf(why, n, "writing the digest of %s failed: %s", tmp, strerror(errno ? errno : EIO));
  else
    rc = 0;
  if (fd >= 0) close(fd);
  return rc;
}

/* The serial check of `path`: 0 when its digest matches (*sealed = 1) or it has none, being an
 * HDF5 file from its first byte as older txl wrote them (*sealed = 0); -1 with the problem in
 * msg (without the path). run_id: the header's (NULL: not wanted); hash 0: the header alone. */
static int check_local(const char *path, int hash, int *sealed, char run_id[TXL_CKPT_ID_LEN], char *msg,
                       size_t n) {
  *sealed = 0;
  int fd = open(path, O_RDONLY);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    snprintf(msg, n, "cannot open checkpoint: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  unsigned char ub[CKPT_USERBLOCK + 8] = {0};
  const size_t have = sb.st_size < (off_t)sizeof ub ? (size_t)sb.st_size : sizeof ub;
  int rc = -1, hex_at = 0;
  unsigned long long size = 0;
  char stored[65], got[65], id[TXL_CKPT_ID_LEN];
  if (read_exactly(fd, ub, have) != 0) {
    snprintf(msg, n, "cannot read checkpoint: %s", strerror(errno ? errno : EIO));
  } else if (have >= 8 && memcmp(ub, HDF5_SIGNATURE, 8) == 0) {
    rc = 0; /* an HDF5 file from byte 0: written before the digest */
  } else if (have < CKPT_USERBLOCK || header_parse(ub, &size, stored, &hex_at, id) != 0) {
    /* a txl checkpoint's HDF5 part starts right after the user block */
    if (have >= CKPT_USERBLOCK + 8 && memcmp(ub + CKPT_USERBLOCK, HDF5_SIGNATURE, 8) == 0)
      snprintf(msg, n, "the checkpoint is damaged: its digest header (the file's first %d bytes) is "
               "not as txl writes it", CKPT_USERBLOCK);
    else
      snprintf(msg, n, "not a txl checkpoint (not an HDF5 file)");
  } else if ((unsigned long long)sb.st_size < size) {
    snprintf(msg, n, "the checkpoint is truncated: the file has %llu bytes, it should have %llu",
             (unsigned long long)sb.st_size, size);
  } else if ((unsigned long long)sb.st_size > size) {
    snprintf(msg, n, "the checkpoint is damaged: the file has %llu bytes, %llu more than were written",
             (unsigned long long)sb.st_size, (unsigned long long)sb.st_size - size);
  } else if (hash && hash_file(fd, ub, hex_at, got) != 0) {
    snprintf(msg, n, "cannot read checkpoint: %s", strerror(errno ? errno : EIO));
  } else if (hash && strcmp(got, stored) != 0) {
    snprintf(msg, n, "the checkpoint is damaged: its SHA-256 digest does not match (the file's is "
             "%.12s..., written %.12s...)", got, stored);
  } else {
    *sealed = 1;
    if (run_id) snprintf(run_id, TXL_CKPT_ID_LEN, "%s", id);
    rc = 0;
  }
  close(fd);
  return rc;
}

/* "txl: notice: ..." once per file and process (rank 0): such a file is read as before. */
static void notice_unsealed(const char *path) {
  static char last[4096];
  if (strcmp(last, path) == 0) return;
  snprintf(last, sizeof last, "%s", path);
  fprintf(stderr, "txl: notice: %s has no digest (written by an older txl): only HDF5's own "
          "checksums guard it\n", path);
  fflush(stderr);
}

/* The last file whose digest this process verified, so that the readers one use makes of a file
 * (txl_ckpt_find, txl_ckpt_peek, then txl_ckpt_read: three opens for a resume) hash it once. It
 * counts only while the file's identity, size and change time (ctime, which no call can set
 * back) are what they were, and only for a file whose last change came more than MEMO_SETTLED
 * seconds before it was hashed: a change after the hash then gives another ctime, even with a
 * file system's coarse timestamps (a tick of a few milliseconds). A file written just before it
 * is read (the fuzz harness, the bit-flip tests) is hashed every time. */
#define MEMO_SETTLED 0.05
static struct {
  int valid;
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec ctime, mtime;
} g_memo;

static double seconds(struct timespec t) { return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec; }

static int same_time(struct timespec a, struct timespec b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

static int memo_holds(const struct stat *sb) {
  return g_memo.valid && g_memo.dev == sb->st_dev && g_memo.ino == sb->st_ino && g_memo.size == sb->st_size &&
         same_time(g_memo.ctime, sb->st_ctim) && same_time(g_memo.mtime, sb->st_mtim);
}

/* Records path as verified when it was settled before the hash began at `began`. */
static void memo_record(const struct stat *sb, struct timespec began) {
  g_memo.valid = seconds(began) - seconds(sb->st_ctim) > MEMO_SETTLED;
  g_memo.dev = sb->st_dev;
  g_memo.ino = sb->st_ino;
  g_memo.size = sb->st_size;
  g_memo.ctime = sb->st_ctim;
  g_memo.mtime = sb->st_mtim;
}

/* check_local with the memo above (sealed files only). */
static int check_memo(const char *path, int *sealed, char *msg, size_t n) {
  struct stat before, after;
  struct timespec began;
  clock_gettime(CLOCK_REALTIME, &began);
  const int known = stat(path, &before) == 0;
  if (known && memo_holds(&before)) {
    *sealed = 1;
    return 0;
  }
  g_memo.valid = 0;
  const int rc = check_local(path, 1, sealed, NULL, msg, n);
  /* the file as it was before the hash and after it: one changed in between is not recorded */
  if (rc == 0 && *sealed && known && stat(path, &after) == 0 && before.st_ino == after.st_ino &&
      same_time(before.st_ctim, after.st_ctim))
    memo_record(&after, began);
  return rc;
}

void ckpt_digest_verify(CkptCtx *c) {
  int sealed = 0;
  if (c->ok && c->rank == 0) {
    char msg[CKPT_MSG_LEN];
    if (check_memo(c->path, &sealed, msg, sizeof msg) != 0) ckpt_fail(c, "%s", msg);
    else if (!sealed) notice_unsealed(c->path);
  }
  txl_dist_bcast_blocking(&sealed, (int)sizeof sealed, 0);
  c->sealed = sealed;
  ckpt_agree(c);
}

int ckpt_digest_run_id(const char *path, int *sealed, char run_id[TXL_CKPT_ID_LEN], char *msg, size_t n) {
  return check_local(path, 0, sealed, run_id, msg, n);
}

int txl_ckpt_seal(const char *path, char *err, size_t errlen) {
  /* the header as it is, whatever the file's size and digest now: only its run id is kept */
  unsigned char ub[CKPT_USERBLOCK];
  unsigned long long size;
  char hex[65], id[TXL_CKPT_ID_LEN], msg[CKPT_MSG_LEN];
  int at, fd = open(path, O_RDONLY);
  int ok = fd >= 0 && read_exactly(fd, ub, sizeof ub) == 0 && header_parse(ub, &size, hex, &at, id) == 0;
  if (fd >= 0) close(fd);
  if (!ok) {
    snprintf(err, errlen, "%s: no digest header to renew (not a checkpoint, or written by an older txl)", path);
    return -1;
  }
  if (ckpt_digest_write(path, id, msg, sizeof msg) != 0) {
    snprintf(err, errlen, "%s: %s", path, msg);
    return -1;
  }
  return 0;
}
