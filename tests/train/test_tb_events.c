/* TensorBoard's event files as src/train/tb_events.c writes and reads them: CRC32C against its
 * standard check values, the masked CRCs and the TFRecord framing, the Event, Summary, Value and
 * SessionLog encodings byte for byte (spelled out below from the protobuf wire format), records
 * read back, damaged ones told apart; then the folder a run writes through the report
 * (src/train/report.c, tb_log.c): one file per start, the earlier one cut back to the step a
 * start continues from, and a failed write remembered with the event file's name.
 *   test_tb_events  (one process, no MPI start-up needed) */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/train/report.h"
#include "src/train/tb_events.h"

static int failures = 0;

static void check(int ok, const char *what) {
  printf("%s: %s\n", ok ? "PASS" : "FAIL", what);
  if (!ok) failures++;
}

static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void test_crc(void) {
  check(txl_crc32c("123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = 0xE3069283 (the standard check value)");
  unsigned char zeros[32] = {0}, ones[32];
  memset(ones, 0xFF, sizeof ones);
  /* RFC 3720, B.4: 32 bytes of zeros, of ones */
  check(txl_crc32c(zeros, 32) == 0x8A9136AAu && txl_crc32c(ones, 32) == 0x62A8AB43u,
        "crc32c of 32 zero bytes = 0x8A9136AA, of 32 0xFF bytes = 0x62A8AB43 (RFC 3720)");
  check(txl_crc32c("", 0) == 0, "crc32c of nothing = 0");
  /* ((0xE3069283 >> 15) | (0xE3069283 << 17)) mod 2^32 = 0x2507C60D, + 0xa282ead8 = 0xC78AB0E5 */
  check(txl_crc32c_masked("123456789", 9) == 0xC78AB0E5u, "masked crc32c(\"123456789\") = 0xC78AB0E5");
}

static void test_encoding(void) {
  TxlTbSummary s = {.len = 0};
  txl_tb_summary_add(&s, "a", 2.0);
  const TxlTbEvent e = {.wall_time = 1.5, .step = 300, .summary = &s};
  unsigned char rec[256];
  const size_t n = txl_tb_record(&e, rec, sizeof rec);
  const unsigned char want[] = {
      0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, /* field 1, 64-bit: the double 1.5 little-endian */
      0x10, 0xAC, 0x02,                   /* field 2, varint: 300 = 0b10_0101100 -> AC 02 */
      0x2A, 0x0A,                         /* field 5, 10 bytes: Summary */
      0x0A, 0x08,                         /*   field 1, 8 bytes: Value */
      0x0A, 0x01, 'a',                    /*     field 1: tag "a" */
      0x15, 0, 0, 0, 0x40};               /*     field 2, 32-bit: the float 2.0 */
  check(n == 16 + sizeof want, "one record: 8 + 4 + 23 + 4 bytes");
  check(n >= 16 && !memcmp(rec + 12, want, sizeof want), "Event {wall_time, step, summary {value {tag, simple_value}}}");
  check(le32(rec) == sizeof want && le32(rec + 4) == 0, "the length, uint64 little-endian");
  check(le32(rec + 8) == txl_crc32c_masked(rec, 8), "the masked CRC32C of the length bytes");
  check(le32(rec + 12 + sizeof want) == txl_crc32c_masked(want, sizeof want), "the masked CRC32C of the data");

  const TxlTbEvent v = {.wall_time = 0.0, .file_version = TXL_TB_FILE_VERSION};
  const TxlTbEvent st = {.wall_time = 0.0, .step = 7, .session_start = 1};
  unsigned char rv[64], rs[64];
  const size_t nv = txl_tb_record(&v, rv, sizeof rv), ns = txl_tb_record(&st, rs, sizeof rs);
  const unsigned char want_v[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x1A, 13, 'b', 'r', 'a', 'i', 'n', '.', 'E', 'v',
                                  'e', 'n', 't', ':', '2'};
  const unsigned char want_s[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 7, 0x3A, 2, 0x08, 1};
  check(nv == 16 + sizeof want_v && !memcmp(rv + 12, want_v, sizeof want_v), "Event {file_version: \"brain.Event:2\"}");
  check(ns == 16 + sizeof want_s && !memcmp(rs + 12, want_s, sizeof want_s),
        "Event {step: 7, session_log {status: START}} (field 7; SessionLog field 1 = 1)");

  /* a tag of 200 bytes: its length takes two varint bytes (200 = C8 01) */
  char tag[201];
  memset(tag, 'x', 200);
  memcpy(tag, "valid/", 6);
  tag[200] = 0;
  TxlTbSummary big = {.len = 0};
  txl_tb_summary_add(&big, tag, 0.1);
  check(big.len == 3 + 3 + 200 + 5 && big.bytes[3] == 0x0A && big.bytes[4] == 0xC8 && big.bytes[5] == 0x01,
        "a 200-byte tag's length is the varint C8 01 (its Value's, 208, D0 01)");
  float f;
  memcpy(&f, big.bytes + big.len - 4, 4);
  check(f == (float)0.1, "simple_value is the float nearest the double");

  /* read back: two records in a row, then damaged copies */
  unsigned char two[512];
  memcpy(two, rec, n);
  const TxlTbEvent e2 = {.wall_time = 2.0, .step = 9, .summary = &big};
  const size_t n2 = txl_tb_record(&e2, two + n, sizeof two - n);
  size_t pos = 0, len;
  const unsigned char *data;
  int64_t step;
  int has_version;
  char kind[16];
  int ok = txl_tb_next_record(two, n + n2, &pos, &data, &len) == 1 && pos == n && len == sizeof want &&
           txl_tb_event_parse(data, len, &step, kind, sizeof kind, &has_version) == 0 && step == 300 &&
           !strcmp(kind, "a") && !has_version;
  ok = ok && txl_tb_next_record(two, n + n2, &pos, &data, &len) == 1 &&
       txl_tb_event_parse(data, len, &step, kind, sizeof kind, &has_version) == 0 && step == 9 &&
       !strcmp(kind, "valid") && txl_tb_next_record(two, n + n2, &pos, &data, &len) == 0;
  check(ok, "records read back: step, the first tag's kind, then the end");
  pos = 0;
  check(txl_tb_next_record(rv, nv, &pos, &data, &len) == 1 &&
            txl_tb_event_parse(data, len, &step, kind, sizeof kind, &has_version) == 0 && has_version && step == 0 &&
            !kind[0],
        "the file_version event: step 0, no scalars");
  two[n + 20] ^= 1; /* in the second record's data */
  pos = 0;
  check(txl_tb_next_record(two, n + n2, &pos, &data, &len) == 1 &&
            txl_tb_next_record(two, n + n2, &pos, &data, &len) == -2 && pos == n + n2,
        "a data byte changed: its CRC fails (-2), the record is stepped over");
  two[n + 20] ^= 1;
  two[n + 1] ^= 1; /* in the second record's length */
  pos = 0;
  check(txl_tb_next_record(two, n + n2, &pos, &data, &len) == 1 &&
            txl_tb_next_record(two, n + n2, &pos, &data, &len) == -1,
        "a length byte changed: its CRC fails, nothing after it can be found (-1)");
  two[n + 1] ^= 1;
  int cut = 1;
  for (size_t k = 1; k < n2; k++) {
    pos = n;
    cut = cut && txl_tb_next_record(two, n + k, &pos, &data, &len) == -1;
  }
  check(cut, "a record cut short anywhere: -1");
  const unsigned char junk[] = {0x0F, 1, 2};
  check(txl_tb_event_parse(junk, sizeof junk, &step, kind, sizeof kind, &has_version) == -1 &&
            txl_tb_event_parse(want, sizeof want - 1, &step, kind, sizeof kind, &has_version) == -1,
        "a wire type 7, a message cut short: does not parse");

  TxlTbSummary full = {.len = 0};
  for (int k = 0; k < 20; k++) txl_tb_summary_add(&full, tag, k);
  const TxlTbEvent ef = {.step = 1, .summary = &full};
  check(full.overflow && txl_tb_record(&ef, two, sizeof two) == 0, "values past the buffer: no record at all");
}

/* ---- the folder of a run ---------------------------------------------------------------------- */

/* "step:kind" of each event of the files of dir in name order, files separated by " | " */
static void folder_events(const char *dir, char *out, size_t cap) {
  struct dirent **names;
  const int n = scandir(dir, &names, NULL, alphasort);
  out[0] = 0;
  for (int i = 0; i < n; i++) {
    if (names[i]->d_name[0] != '.') {
      char path[600];
      snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
      FILE *f = fopen(path, "rb");
      static unsigned char buf[65536];
      const size_t size = f ? fread(buf, 1, sizeof buf, f) : 0;
      if (f) fclose(f);
      size_t pos = 0, len;
      const unsigned char *data;
      if (out[0]) strncat(out, " |", cap - strlen(out) - 1);
      while (txl_tb_next_record(buf, size, &pos, &data, &len) == 1) {
        int64_t step;
        int v;
        char kind[16], item[64];
        txl_tb_event_parse(data, len, &step, kind, sizeof kind, &v);
        snprintf(item, sizeof item, " %lld:%s", (long long)step, v ? "version" : kind[0] ? kind : "start");
        strncat(out, item, cap - strlen(out) - 1);
      }
    }
    free(names[i]);
  }
  if (n >= 0) free(names);
}

static void run_start(TxlReport *r, const char *dir, int keep, int last) {
  txl_report_open(r, dir, 0, 1, 1);
  txl_report_baseline(r, "valid", 4.0);
  txl_report_keep_until(r, keep);
  for (int s = keep + 1; s <= last; s++) {
    TxlTrainFigures f = {s, 10, 1e-3, 2.0, 0.5, 1234.5, 12.0, 1.0, -1.0, 14.0, 0.0, 0};
    txl_report_train(r, &f);
  }
  txl_report_eval(r, "test", last, 2.0, 192, 0.25);
}

static void test_folder(void) {
  char dir[] = "/tmp/txl-tb.XXXXXX";
  if (!mkdtemp(dir)) {
    check(0, "mkdtemp");
    return;
  }
  char tb[300], got[4096];
  snprintf(tb, sizeof tb, "%s/tb", dir);
  TxlReport r;
  run_start(&r, dir, 0, 6);
  check(!txl_report_failed(&r), "a first start: no write failed");
  txl_report_close(&r);
  folder_events(tb, got, sizeof got);
  check(!strcmp(got, " 0:version 1:start 0:unigram 1:train 2:train 3:train 4:train 5:train 6:train 6:test"),
        "a first start: one file, file_version, START at step 1, the unigram event, one event per line");
  run_start(&r, dir, 4, 5); /* continues from step 4 */
  txl_report_close(&r);
  folder_events(tb, got, sizeof got);
  check(!strcmp(got, " 0:version 1:start 0:unigram 1:train 2:train 3:train 4:train |"
                     " 0:version 5:start 5:train 5:test"),
        "continued from step 4: the first file cut back to step 4, the second begins at START 5, no second unigram");
  if (strcmp(got, " 0:version 1:start 0:unigram 1:train 2:train 3:train 4:train | 0:version 5:start 5:train 5:test"))
    printf("  got%s\n", got);
  run_start(&r, dir, 5, 5); /* resumed at its end: tests again */
  txl_report_close(&r);
  folder_events(tb, got, sizeof got);
  check(!strcmp(got, " 0:version 1:start 0:unigram 1:train 2:train 3:train 4:train |"
                     " 0:version 5:start 5:train | 0:version 6:start 5:test"),
        "resumed at its last step: that step's test event goes, the new start tests again");

  /* a write that fails: remembered, naming the event file */
  txl_report_open(&r, dir, 0, 1, 1);
  txl_report_keep_until(&r, 5);
  close(r.tb.fd);
  r.tb.fd = open("/dev/full", O_WRONLY | O_APPEND);
  TxlTrainFigures f = {6, 10, 1e-3, 2.0, 0.5, 1234.5, 12.0, 1.0, -1.0, 14.0, 0.0, 0};
  txl_report_train(&r, &f);
  char prefix[1500];
  snprintf(prefix, sizeof prefix, "%s: cannot write: No space left on device", r.tb.path);
  check(txl_report_failed(&r) && !strncmp(r.error, prefix, strlen(prefix)),
        "a failed event write is remembered with the event file and the reason");
  printf("  (%s)\n", r.error);
  txl_report_close(&r);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("cannot remove %s\n", dir);
}

int main(void) {
  test_crc();
  test_encoding();
  test_folder();
  printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
