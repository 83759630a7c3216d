#include "src/tools/target.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"

/* The file pointer dir/name names, or a one-line error saying why it names none. */
static void pointed(const char *dir, const char *name, const char *shown, char *path, size_t n) {
  const int rc = txl_ckpt_pointer(dir, name, path, n);
  if (rc == -1 && !strcmp(name, "best"))
    txl_fatal_all("%s: no 'best' pointer (it is written with a checkpoint at a validation that improves on the best "
                  "so far: none yet)", dir);
  if (rc == -1) txl_fatal_all("%s: no such pointer", shown);
  if (rc == -2) txl_fatal_all("%s is empty: it names no checkpoint", shown);
  if (rc == -3) txl_fatal_all("%s names %s, which does not exist", shown, path);
}

static int is_pointer_name(const char *base) { return !strcmp(base, "latest") || !strcmp(base, "best"); }

void txl_tool_checkpoint(const char *target, int best, char *path, size_t n, FILE *notices) {
  struct stat sb;
  const int dir = stat(target, &sb) == 0 && S_ISDIR(sb.st_mode);
  char copy[4096], shown[4200];
  snprintf(copy, sizeof copy, "%s", target);
  const char *base = basename(copy);
  if (best && !dir) txl_fatal_all("%s: --best takes a run folder (it uses the checkpoint its 'best' pointer names)",
                                  target);
  if (best) {
    snprintf(shown, sizeof shown, "%s/best", target);
    pointed(target, "best", shown, path, n);
  } else if (dir) {
    char err[2048], notice[2048];
    const int rc = txl_ckpt_find(target, path, n, notice, sizeof notice, err, sizeof err);
    if (rc < 0) txl_fatal_all("%s", err);
    if (rc > 0) txl_fatal_all("%s: no checkpoint in this folder (%s)", target, err);
    if (notice[0] && notices) {
      fprintf(notices, "checkpoint: %s\n", notice);
      fflush(notices);
    }
  } else if (is_pointer_name(base) && stat(target, &sb) == 0 && S_ISREG(sb.st_mode)) {
    char name[64];
    snprintf(name, sizeof name, "%s", base);
    snprintf(copy, sizeof copy, "%s", target);
    pointed(dirname(copy), name, target, path, n);
  } else {
    snprintf(path, n, "%s", target);
  }
}
