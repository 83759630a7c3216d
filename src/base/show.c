#include "src/base/show.h"

#include <stdio.h>
#include <unistd.h>

const char *txl_show_bytes(char *out, size_t n, const char *s, size_t len, int high) {
  size_t o = 0;
  if (n == 0) return out;
  for (size_t i = 0; i < len; i++) {
    const unsigned char ch = (unsigned char)s[i];
    const int escaped = ch < 0x20 || ch == 0x7f || (high && ch >= 0x80);
    if (o + (escaped ? 4 : 1) >= n) break; /* and the NUL */
    if (escaped)
      o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
    else
      out[o++] = (char)ch;
  }
  out[o] = 0;
  return out;
}

const char *txl_show_path_origin(char *out, size_t n, const char *path) {
  char cwd[4096];
  if (n) out[0] = 0;
  if (n && path[0] && path[0] != '/' && getcwd(cwd, sizeof cwd))
    snprintf(out, n, " (a relative path, taken from the current directory %s)", cwd);
  return out;
}
