#include "data/prep/text.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/error.h"

#define READ_BUF_BYTES ((size_t)4 << 20)

void lr_open(LineReader *r, const char *path, const char *what) {
  memset(r, 0, sizeof *r);
  r->path = path;
  r->what = what;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    txl_fatal("%s: cannot read the %s: it is a directory", path, what);
  r->f = fopen(path, "rb");
  if (!r->f) txl_fatal("%s: cannot open the %s: %s", path, what, strerror(errno));
  r->buf = txl_malloc(READ_BUF_BYTES, "read buffer");
  r->line_cap = 4096;
  r->line = txl_malloc(r->line_cap, "line buffer");
  txl_sha256_init(&r->sha);
}

/* Refills buf; returns the number of bytes now available (0 at the end of the file). */
static size_t refill(LineReader *r) {
  r->n = fread(r->buf, 1, READ_BUF_BYTES, r->f);
  r->pos = 0;
  if (r->n == 0 && ferror(r->f)) txl_fatal("%s: error reading the %s: %s", r->path, r->what, strerror(errno));
  if (r->n > 0) {
    txl_sha256_update(&r->sha, r->buf, r->n);
    r->bytes += (int64_t)r->n;
    if (r->on_read) r->on_read(r->ctx, r->n);
  }
  return r->n;
}

static void append(LineReader *r, const unsigned char *p, size_t n) {
  if (r->line_len + n > r->line_cap) {
    size_t cap = r->line_cap;
    while (cap < r->line_len + n) cap *= 2;
    unsigned char *l = realloc(r->line, cap);
    if (!l) txl_fatal("%s: out of memory for a line of %zu bytes", r->path, r->line_len + n);
    r->line = l;
    r->line_cap = cap;
  }
  memcpy(r->line + r->line_len, p, n);
  r->line_len += n;
}

int lr_next(LineReader *r, unsigned char **line, size_t *content_len, size_t *total_len) {
  r->line_len = 0;
  for (;;) {
    if (r->pos == r->n && refill(r) == 0) break;
    const unsigned char *p = r->buf + r->pos, *end = r->buf + r->n, *q = p;
    while (q < end && *q != '\n' && *q != '\r') q++;
    append(r, p, (size_t)(q - p));
    r->pos += (size_t)(q - p);
    if (q == end) continue;
    size_t content = r->line_len;
    unsigned char t = *q;
    append(r, &t, 1);
    r->pos++;
    if (t == '\r') { /* "\r\n" is one terminator; look at the next byte, refilling if needed */
      if (r->pos == r->n) refill(r);
      if (r->pos < r->n && r->buf[r->pos] == '\n') {
        append(r, r->buf + r->pos, 1);
        r->pos++;
      }
    }
    r->line_no++;
    *line = r->line;
    *content_len = content;
    *total_len = r->line_len;
    return 1;
  }
  if (r->line_len == 0) return 0;
  r->line_no++; /* a last line without a terminator */
  *line = r->line;
  *content_len = *total_len = r->line_len;
  return 1;
}

int lr_next_raw(LineReader *r, unsigned char **data, size_t *len) {
  if (r->pos == r->n && refill(r) == 0) return 0;
  *data = r->buf + r->pos;
  *len = r->n - r->pos;
  r->pos = r->n;
  return 1;
}

void lr_close(LineReader *r, char sha_hex[65]) {
  unsigned char d[32];
  txl_sha256_final(&r->sha, d, sha_hex);
  fclose(r->f);
  free(r->buf);
  free(r->line);
  r->f = NULL;
  r->buf = r->line = NULL;
}

void lr_bad_utf8(const LineReader *r, size_t col, unsigned char b) {
  txl_fatal("%s:%lld: invalid UTF-8 (byte 0x%02X at byte %zu of the line)", r->path,
            (long long)r->line_no, b, col + 1);
}

void lr_check_utf8(const LineReader *r, const unsigned char *line, size_t len) {
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    int l = 1;
    if (line[i] >= 0x80 && (l = utf8_decode(line + i, len - i, &cp)) == 0) lr_bad_utf8(r, i, line[i]);
    i += (size_t)l;
  }
}

void lower_ascii(unsigned char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (s[i] >= 'A' && s[i] <= 'Z') s[i] = (unsigned char)(s[i] - 'A' + 'a');
}

int utf8_decode(const unsigned char *p, size_t n, uint32_t *cp) {
  unsigned char b = p[0];
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  int len;
  uint32_t v, min;
  if (b >= 0xC2 && b <= 0xDF) { len = 2; v = b & 0x1F; min = 0x80; }
  else if (b >= 0xE0 && b <= 0xEF) { len = 3; v = b & 0x0F; min = 0x800; }
  else if (b >= 0xF0 && b <= 0xF4) { len = 4; v = b & 0x07; min = 0x10000; }
  else return 0;
  if ((size_t)len > n) return 0;
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (p[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

int py_isspace(uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return 1;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}
