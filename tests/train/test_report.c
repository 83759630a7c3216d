/* metrics.jsonl, line by line: NaN and the infinities are written as null (C prints nan, -nan or
 * inf, which no JSON reader accepts), finite figures exactly as before; a write that fails is
 * remembered with the file and the reason, and nothing more is written after it.
 *   test_report  (one process, no MPI start-up needed) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/train/report.h"

static int failures = 0;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) failures++;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

int main(void) {
  char dir[] = "/tmp/txl-report.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char path[256];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);

  TxlReport r;
  txl_report_open(&r, dir, 0, 1, 0);
  txl_report_baseline(&r, "valid", 4.0);
  TxlTrainFigures ok = {2, 10, 1e-3, 2.0, 0.5, 1234.5, 12.0, 1.0, 0.25, 14.0, 0.0, 0};
  txl_report_train(&r, &ok);
  TxlTrainFigures bad = {3, 10, 1e-3, NAN, INFINITY, 1234.5, 12.0, 1.0, -1.0, 15.0, 0.0, 0};
  txl_report_train(&r, &bad);
  TxlTrainFigures scaled = {4, 10, 1e-3, 2.0, 0.5, 1234.5, 12.0, 1.0, -1.0, 16.0, 32768.0, 2};
  txl_report_train(&r, &scaled);
  txl_report_eval(&r, "valid", 3, -NAN, 192, 0.25);
  txl_report_eval(&r, "test", 3, 2.0, 192, -INFINITY);
  check(!txl_report_failed(&r), "no write failed");
  txl_report_close(&r);

  const char *want =
      "{\"kind\": \"unigram\", \"split\": \"valid\", \"bits\": 4.000000, \"loss\": 2.772589}\n"
      "{\"kind\": \"train\", \"step\": 2, \"lr\": 1.000000e-03, \"loss\": 2.000000, \"bpc\": 2.885390, "
      "\"grad_norm\": 0.500000, \"tokens\": 14, \"tokens_per_s\": 1234.5, \"ms_per_step\": 12.000, \"comm_wait\": 0.2500, "
      "\"elapsed_s\": 1.000}\n"
      "{\"kind\": \"train\", \"step\": 3, \"lr\": 1.000000e-03, \"loss\": null, \"bpc\": null, \"grad_norm\": null, "
      "\"tokens\": 15, \"tokens_per_s\": 1234.5, \"ms_per_step\": 12.000, \"comm_wait\": 0.0000, \"elapsed_s\": 1.000}\n"
      "{\"kind\": \"train\", \"step\": 4, \"lr\": 1.000000e-03, \"loss\": 2.000000, \"bpc\": 2.885390, "
      "\"grad_norm\": 0.500000, \"tokens\": 16, \"tokens_per_s\": 1234.5, \"ms_per_step\": 12.000, \"comm_wait\": 0.0000, "
      "\"elapsed_s\": 1.000, \"loss_scale\": 32768, \"skipped\": 2}\n"
      "{\"kind\": \"valid\", \"step\": 3, \"loss\": null, \"bpc\": null, \"tokens\": 192, \"seconds\": 0.250}\n"
      "{\"kind\": \"test\", \"step\": 3, \"loss\": 2.000000, \"bpc\": 2.885390, \"tokens\": 192, \"seconds\": null}\n";
  const char *got = slurp(path);
  check(got && !strcmp(got, want), "finite figures as numbers, NaN and infinities as null");
  if (got && strcmp(got, want)) printf("got:\n%swanted:\n%s", got, want);
  unlink(path);

  /* a file that refuses every byte (/dev/full: ENOSPC): the failure is remembered, naming the file */
  if (symlink("/dev/full", path) == 0) {
    txl_report_open(&r, dir, 0, 1, 0);
    txl_report_train(&r, &ok);
    char prefix[400];
    snprintf(prefix, sizeof prefix, "%s: cannot write: No space left on device", path);
    check(txl_report_failed(&r) && !strncmp(r.error, prefix, strlen(prefix)),
          "a failed write is remembered with the file and the reason");
    printf("  (%s)\n", r.error);
    char first[sizeof r.error];
    snprintf(first, sizeof first, "%s", r.error);
    txl_report_eval(&r, "valid", 3, 2.0, 192, 0.25);
    check(!strcmp(r.error, first), "the first failure stays the message");
    txl_report_close(&r);
    unlink(path);
  } else {
    check(0, "symlink to /dev/full");
  }
  rmdir(dir);
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
