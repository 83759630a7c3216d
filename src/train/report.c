#include "src/train/report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/error.h"
#include "src/base/file.h"

void txl_report_open(TxlReport *r, const char *work_dir, int rank, int char_level, int tensorboard) {
  memset(r, 0, sizeof *r);
  r->fd = -1;
  r->tb.fd = -1;
  r->char_level = char_level;
  snprintf(r->path, sizeof r->path, "%s/metrics.jsonl", work_dir);
  char err[1400] = "";
  if (rank == 0) {
    struct stat sb;
    r->fd = open(r->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (r->fd < 0 || fstat(r->fd, &sb) != 0) snprintf(err, sizeof err, "%s: cannot open for writing: %s", r->path, strerror(errno));
    else r->good_size = (long long)sb.st_size;
    r->tensorboard = tensorboard;
    if (!err[0] && tensorboard) txl_tb_open(&r->tb, work_dir, err, sizeof err);
  }
  txl_fatal_if_any(err[0] != 0, "%s", err);
}

void txl_report_close(TxlReport *r) {
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  txl_tb_close(&r->tb);
}

int txl_report_failed(const TxlReport *r) { return r->error[0] != 0; }

static void remember_failure(TxlReport *r, const char *path, int err) {
  snprintf(r->error, sizeof r->error, "%s: cannot write: %s", path, err ? strerror(err) : "short write");
}

void txl_report_sync(TxlReport *r) {
  if (r->fd >= 0 && !r->error[0] && fsync(r->fd) != 0) remember_failure(r, r->path, errno);
  if (r->tb.fd >= 0 && !r->error[0] && fsync(r->tb.fd) != 0) remember_failure(r, r->tb.path, errno);
}

/* Appends one whole record (what: "line", "event") to fd, which holds *size bytes of whole ones;
 * after a failure it is cut back to them and nothing more is written (the run stops on it). */
static void append(TxlReport *r, int fd, long long *size, const char *path, const char *what, const void *data,
                   size_t len) {
  if (fd < 0 || r->error[0]) return;
  int cut_short;
  if (txl_append_whole(fd, data, len, size, &cut_short) == 0) return;
  remember_failure(r, path, errno);
  if (cut_short) {
    const size_t used = strlen(r->error);
    snprintf(r->error + used, sizeof r->error - used, " (and its last %s is cut short)", what);
  }
}

/* One event of this start's file, after the waiting "unigram" event. */
static void write_event(TxlReport *r, const TxlTbEvent *e) {
  if (r->tb.fd < 0 || r->error[0]) return;
  if (r->tb_header.summary) {
    const TxlTbEvent header = r->tb_header;
    r->tb_header.summary = NULL;
    write_event(r, &header);
  }
  unsigned char rec[TXL_TB_SUMMARY_MAX + 64];
  const size_t n = txl_tb_record(e, rec, sizeof rec);
  if (n == 0) txl_fatal("%s: an event of step %lld does not fit its buffer", r->tb.path, (long long)e->step);
  append(r, r->tb.fd, &r->tb.size, r->tb.path, "event", rec, n);
}

/* ---- one history ---------------------------------------------------------------------------- */

static void write_text(TxlReport *r, const char *line);

/* A metrics.jsonl line's step ("step": N, as the txl_report_* functions write it), or -1 without
 * one; *unigram = 1 for a "unigram" line, *whole = 0 for a line that is not one complete object
 * (cut short, or glued to the next by a write that stopped half-way). */
static int is_kind(const char *line, const char *kind) {
  char start[64];
  snprintf(start, sizeof start, "{\"kind\": \"%s\",", kind);
  return strncmp(line, start, strlen(start)) == 0;
}

static int line_step(const char *line, size_t len, int *unigram, int *whole) {
  *unigram = is_kind(line, "unigram");
  *whole = len >= 3 && line[0] == '{' && !strchr(line + 1, '{') && line[len - 2] == '}' && line[len - 1] == '\n';
  const char *s = strstr(line, "\"step\": ");
  if (!s) return -1;
  char *end;
  const long v = strtol(s + 8, &end, 10);
  return end == s + 8 || v < 0 || v > INT_MAX ? -1 : (int)v;
}

int txl_metrics_history(const char *path, int *last) {
  FILE *f = fopen(path, "rb");
  int n = 0;
  *last = -1;
  if (!f) return 0;
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    int unigram, whole;
    const int step = line_step(line, (size_t)len, &unigram, &whole);
    if (step >= 0) {
      n++;
      *last = step;
    }
  }
  free(line);
  fclose(f);
  return n;
}

/* r->path replaced by text[0, size), and r->fd reopened on the new file. */
static int replace_file(TxlReport *r, const char *text, size_t size, char *err, size_t errlen) {
  close(r->fd);
  r->fd = -1;
  if (txl_write_file_atomic(r->path, text, size, err, errlen) != 0) return -1;
  r->fd = open(r->path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (r->fd < 0) {
    snprintf(err, errlen, "%s: cannot open for writing: %s", r->path, strerror(errno));
    return -1;
  }
  r->good_size = (long long)size;
  return 0;
}

/* Rank 0's part of txl_report_keep_until: *dropped gets the lines of steps after `keep` and the
 * damaged ones that went (the extra "unigram" lines, one per start, are not counted). */
static int keep_until(TxlReport *r, int keep, int *dropped, char *err, size_t errlen) {
  FILE *f = fopen(r->path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot read: %s", r->path, strerror(errno));
    return -1;
  }
  char *text = NULL, *line = NULL;
  size_t size = 0, cap = 0;
  FILE *out = open_memstream(&text, &size);
  if (!out) txl_fatal("out of memory reading %s", r->path);
  int unigrams = 0, changed = 0;
  long long prefix = 0; /* bytes of the file kept as they are before the first line that goes */
  ssize_t len;
  if (r->header[0]) fputs(r->header, out); /* first, unless the history has its own */
  const size_t header_len = strlen(r->header);
  while ((len = getline(&line, &cap, f)) > 0) {
    int unigram, whole;
    const int step = line_step(line, (size_t)len, &unigram, &whole);
    const int extra_header = whole && unigram && unigrams++ > 0;
    /* the test line of the resumed step: written after its checkpoint, at the end of a run that
     * stopped there; the continued run ends with its own */
    const int late = step > keep || (step == keep && is_kind(line, "test"));
    if (!whole || late) (*dropped)++;
    if (!whole || late || extra_header) {
      changed = 1;
      continue;
    }
    if (changed) changed = 2; /* a line kept after one that went: the file must be rewritten */
    else prefix += len;
    fwrite(line, 1, (size_t)len, out);
  }
  const int read_error = ferror(f);
  free(line);
  fclose(f);
  fclose(out);
  const char *keep_text = text;
  if (unigrams > 0 || prefix == 0) { /* the history's header stays, or this start's comes first */
    keep_text += header_len;
    size -= header_len;
  } else if (header_len) {
    changed = 2; /* a history without a header (not one txl-train wrote): it goes in front */
  }
  if (unigrams > 0) r->header[0] = 0;
  int rc = 0;
  if (read_error) {
    snprintf(err, errlen, "%s: cannot read: %s", r->path, strerror(errno));
    rc = -1;
  } else if (changed == 1) { /* only lines at the end go: cut there (one call, kept whole or not) */
    if (ftruncate(r->fd, (off_t)prefix) != 0) {
      snprintf(err, errlen, "%s: cannot cut back to step %d: %s", r->path, keep, strerror(errno));
      rc = -1;
    }
    r->good_size = prefix;
  } else if (changed == 2) {
    r->header[0] = 0;
    rc = replace_file(r, keep_text, size, err, errlen);
  }
  free(text);
  if (rc == 0 && r->header[0]) { /* a file without a history: this start's header begins it now */
    char header[sizeof r->header];
    snprintf(header, sizeof header, "%s", r->header);
    r->header[0] = 0;
    write_text(r, header);
  }
  return rc;
}

static void dropped_notice(const char *path, int n, const char *what, int step) {
  if (n <= 0) return;
  printf("%s: dropped %d %s%s that the run which stopped logged after the checkpoint of step %d (this run logs those "
         "steps again)\n", path, n, what, n > 1 ? "s" : "", step);
  fflush(stdout);
}

void txl_report_keep_until(TxlReport *r, int step) {
  char err[1400] = "";
  int dropped = 0, tb_dropped = 0, unigrams = 0;
  int failed = r->fd >= 0 && keep_until(r, step, &dropped, err, sizeof err) != 0;
  if (!failed && r->fd >= 0 && r->tensorboard) {
    failed = txl_tb_start(&r->tb, step, &tb_dropped, &unigrams, err, sizeof err) != 0;
    if (!failed && unigrams > 0) r->tb_header.summary = NULL; /* the history has its own */
    if (!failed && r->tb_header.summary) {                    /* this start's begins it now */
      const TxlTbEvent header = r->tb_header;
      r->tb_header.summary = NULL;
      write_event(r, &header);
    }
  }
  txl_fatal_if_any(failed, "%s", err);
  dropped_notice(r->path, dropped, "line", step);
  dropped_notice(r->tb.dir, tb_dropped, "event", step);
}

/* Appends one complete line to metrics.jsonl, after the waiting header line. */
static void write_text(TxlReport *r, const char *line) {
  if (r->fd < 0 || r->error[0]) return;
  if (r->header[0]) { /* the header line comes first */
    char header[sizeof r->header];
    snprintf(header, sizeof header, "%s", r->header);
    r->header[0] = 0;
    write_text(r, header);
  }
  append(r, r->fd, &r->good_size, r->path, "line", line, strlen(line));
}

/* One JSON line assembled piece by piece, and the same figures as one event's scalars, each
 * tagged prefix + key. */
typedef struct {
  char s[1024];
  size_t len;
  char prefix[48];
  TxlTbSummary tb;
} Line;

static void line_start(Line *l, const char *prefix) {
  l->len = 0;
  l->s[0] = 0;
  snprintf(l->prefix, sizeof l->prefix, "%s", prefix);
  l->tb.len = 0;
  l->tb.overflow = 0;
}

static void add_scalar(Line *l, const char *key, double v) {
  char tag[128];
  snprintf(tag, sizeof tag, "%s%s", l->prefix, key);
  txl_tb_summary_add(&l->tb, tag, v);
}

/* The line to metrics.jsonl and its event (of step) to the event file. */
static void write_line(TxlReport *r, const Line *l, int step) {
  write_text(r, l->s);
  const TxlTbEvent e = {.wall_time = txl_tb_now(), .step = step, .summary = &l->tb};
  write_event(r, &e);
}

static void add(Line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Line *l, const char *fmt, ...) {
  if (l->len >= sizeof l->s) return;
  va_list ap;
  va_start(ap, fmt);
  const int k = vsnprintf(l->s + l->len, sizeof l->s - l->len, fmt, ap);
  va_end(ap);
  if (k > 0) l->len += (size_t)k;
}

/* `, "key": value`, with null for NaN and the infinities: C prints them as nan, -nan or inf,
 * which no JSON reader accepts. fmt formats one double. */
static void add_number(Line *l, const char *key, const char *fmt, double v) {
  add_scalar(l, key, v);
  add(l, ", \"%s\": ", key);
  if (!isfinite(v)) {
    add(l, "null");
    return;
  }
  char num[64];
  snprintf(num, sizeof num, fmt, v);
  add(l, "%s", num);
}

void txl_format_duration(double s, char *out, size_t n) {
  if (!(s >= 0) || s > 1e9) {
    snprintf(out, n, "?");
    return;
  }
  long t = lround(s);
  if (t >= 3600) snprintf(out, n, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
  else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
  else snprintf(out, n, "%lds", t);
}

void txl_format_count(long long v, char *out, size_t n) {
  char digits[32];
  snprintf(digits, sizeof digits, "%lld", v < 0 ? -v : v);
  size_t len = strlen(digits), o = 0;
  if (v < 0 && o + 1 < n) out[o++] = '-';
  for (size_t i = 0; i < len && o + 1 < n; i++) {
    out[o++] = digits[i];
    if ((len - i - 1) % 3 == 0 && i + 1 < len && o + 1 < n) out[o++] = ',';
  }
  out[o] = 0;
}

void txl_loss_quality(int char_level, double loss, char *out, size_t n, const char **key, double *value) {
  const char *k = char_level ? "bpc" : "ppl";
  const double v = char_level ? loss / log(2.0) : exp(loss);
  snprintf(out, n, char_level ? "%s %.4f" : "%s %.2f", k, v);
  if (key) *key = k;
  if (value) *value = v;
}

void txl_report_train(TxlReport *r, const TxlTrainFigures *f) {
  if (r->fd < 0) return;
  char q[64], eta[32], tps[32];
  const char *key;
  double value;
  txl_loss_quality(r->char_level, f->loss, q, sizeof q, &key, &value);
  txl_format_duration((f->max_step - f->step) * f->ms_per_step / 1000.0, eta, sizeof eta);
  if (isfinite(f->tokens_per_s)) txl_format_count((long long)llround(f->tokens_per_s), tps, sizeof tps);
  else snprintf(tps, sizeof tps, "?");
  char comm[48] = "";
  if (f->comm_wait >= 0) snprintf(comm, sizeof comm, " | comm wait %.0f%%", 100.0 * f->comm_wait);
  char scale[64] = "";
  if (f->loss_scale > 0) snprintf(scale, sizeof scale, " | scale 2^%d, %lld skipped", ilogb(f->loss_scale), f->skipped);
  printf("step %*d/%d | lr %.3e | loss %.4f | %s | |g| %.3f%s | %s tok/s | %.1f ms/step%s | ETA %s\n",
         (int)snprintf(NULL, 0, "%d", f->max_step), f->step, f->max_step, f->lr, f->loss, q, f->grad_norm, scale, tps,
         f->ms_per_step, comm, eta);
  fflush(stdout);
  Line l;
  line_start(&l, "train/");
  add(&l, "{\"kind\": \"train\", \"step\": %d", f->step);
  add_number(&l, "lr", "%.6e", f->lr);
  add_number(&l, "loss", "%.6f", f->loss);
  add_number(&l, key, "%.6f", value);
  add_number(&l, "grad_norm", "%.6f", f->grad_norm);
  add_number(&l, "tokens", "%.0f", f->tokens);
  add_number(&l, "tokens_per_s", "%.1f", f->tokens_per_s);
  add_number(&l, "ms_per_step", "%.3f", f->ms_per_step);
  add_number(&l, "comm_wait", "%.4f", f->comm_wait < 0 ? 0.0 : f->comm_wait);
  add_number(&l, "elapsed_s", "%.3f", f->elapsed_s);
  if (f->loss_scale > 0) {
    add_number(&l, "loss_scale", "%.0f", f->loss_scale);
    add(&l, ", \"skipped\": %lld", f->skipped);
    add_scalar(&l, "skipped", (double)f->skipped);
  }
  add(&l, "}\n");
  write_line(r, &l, f->step);
}

void txl_report_eval(TxlReport *r, const char *split, int step, double loss, double tokens, double seconds) {
  if (r->fd < 0) return;
  char q[64];
  const char *key;
  double value;
  txl_loss_quality(r->char_level, loss, q, sizeof q, &key, &value);
  printf("%s at step %d | loss %.4f | %s | %.0f tokens in %.1f s\n", split, step, loss, q, tokens, seconds);
  fflush(stdout);
  Line l;
  char prefix[40];
  snprintf(prefix, sizeof prefix, "%s/", split);
  line_start(&l, prefix);
  add(&l, "{\"kind\": \"%s\", \"step\": %d", split, step);
  add_number(&l, "loss", "%.6f", loss);
  add_number(&l, key, "%.6f", value);
  add_number(&l, "tokens", "%.0f", tokens);
  add_number(&l, "seconds", "%.3f", seconds);
  add(&l, "}\n");
  write_line(r, &l, step);
}

void txl_report_baseline(TxlReport *r, const char *split, double bits) {
  if (r->fd < 0) return;
  double nats = bits * log(2.0);
  if (r->char_level)
    printf("%s unigram entropy: %.4f bits per character (the bar to beat)\n", split, bits);
  else
    printf("%s unigram entropy: %.4f bits per token = perplexity %.1f (the bar to beat)\n", split, bits, exp(nats));
  fflush(stdout);
  Line l;
  char prefix[40];
  snprintf(prefix, sizeof prefix, "unigram/%s_", split);
  line_start(&l, prefix);
  add(&l, "{\"kind\": \"unigram\", \"split\": \"%s\"", split);
  add_number(&l, "bits", "%.6f", bits);
  add_number(&l, "loss", "%.6f", nats);
  add(&l, "}\n");
  snprintf(r->header, sizeof r->header, "%s", l.s);
  r->tb_header_values = l.tb;
  r->tb_header = (TxlTbEvent){.wall_time = txl_tb_now(), .step = 0, .summary = &r->tb_header_values};
}
