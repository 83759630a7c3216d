/* Small files written whole or not at all: see file.h. */
#include "src/base/file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int txl_write_file_atomic(const char *path, const void *data, size_t bytes, char *err, size_t errlen) {
  char tmp[1300];
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    return -1;
  }
  errno = 0;
  int ok = fwrite(data, 1, bytes, f) == bytes && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int e = errno;
  if (fclose(f) != 0 && ok) { /* a write the buffer held back can fail only here */
    ok = 0;
    e = errno;
  }
  if (ok && rename(tmp, path) != 0) {
    ok = 0;
    e = errno;
  }
  if (!ok) {
    remove(tmp);
    snprintf(err, errlen, "%s: cannot write: %s", path, e ? strerror(e) : "short write");
    return -1;
  }
  return 0;
}

int txl_append_whole(int fd, const void *data, size_t bytes, long long *size, int *cut_short) {
  const char *p = (const char *)data;
  size_t done = 0;
  *cut_short = 0;
  while (done < bytes) {
    const ssize_t k = write(fd, p + done, bytes - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      const int e = k < 0 ? errno : 0;
      if (done > 0 && ftruncate(fd, (off_t)*size) != 0) *cut_short = 1; /* cut off the part written */
      errno = e;
      return -1;
    }
    done += (size_t)k;
  }
  *size += (long long)bytes;
  return 0;
}

int txl_file_holds(const char *path, const char *text) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  const size_t n = strlen(text);
  int same = 1;
  size_t at = 0;
  char buf[4096];
  for (size_t got; same && (got = fread(buf, 1, sizeof buf, f)) > 0; at += got)
    same = at + got <= n && memcmp(buf, text + at, got) == 0;
  same = same && !ferror(f) && at == n;
  fclose(f);
  return same;
}
