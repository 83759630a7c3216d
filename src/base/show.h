/* Text from input (a config value, a prompt, a path) shown in a one-line message. */
#ifndef TXL_BASE_SHOW_H
#define TXL_BASE_SHOW_H

#include <stddef.h>

/* len bytes of s as they can stand in a one-line message: control bytes (and with `high`, bytes
 * >= 0x80 too: a byte corpus's, not UTF-8) as \xHH, so that none acts on the terminal; cut to
 * what out[n] holds (4 * len + 1 bytes hold any). Returns out. */
const char *txl_show_bytes(char *out, size_t n, const char *s, size_t len, int high);

/* What a message about a file that is not there adds to its path: " (a relative path, taken from
 * the current directory D)" for a relative one (a config's paths are not taken from the config's
 * folder), "" for an absolute one or when the directory cannot be read. Returns out. */
const char *txl_show_path_origin(char *out, size_t n, const char *path);

#endif
