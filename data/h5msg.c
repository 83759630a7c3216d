#include "data/h5msg.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *buf;
  size_t cap;
  int have_errno; /* the buffer holds a system message */
} Reason;

/* Called from the innermost entry outwards: keeps the innermost description, replaced by the
 * first system message found. */
static herr_t reason_cb(unsigned n, const H5E_error2_t *err, void *data) {
  Reason *r = data;
  if (r->have_errno || !err->desc) return 0;
  const char *e = strstr(err->desc, "errno = ");
  if (e) {
    const long code = strtol(e + 8, NULL, 10);
    if (code > 0) {
      snprintf(r->buf, r->cap, "%s", strerror((int)code));
      r->have_errno = 1;
      return 0;
    }
  }
  if (n == 0) snprintf(r->buf, r->cap, "%s", err->desc);
  return 0;
}

int txl_h5_reason(char *buf, size_t cap) {
  if (cap == 0) return 0;
  buf[0] = '\0';
  Reason r = {buf, cap, 0};
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, reason_cb, &r);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  return r.have_errno;
}
