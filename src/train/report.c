#include "src/train/report.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "src/base/error.h"

static void make_dirs(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) txl_fatal("%s: cannot create directory: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) txl_fatal("%s: cannot create directory: %s", buf, strerror(errno));
}

void txl_report_open(TxlReport *r, const char *work_dir, int rank, int char_level) {
  r->metrics = NULL;
  r->char_level = char_level;
  if (rank != 0) return;
  make_dirs(work_dir);
  char path[1100];
  snprintf(path, sizeof path, "%s/metrics.jsonl", work_dir);
  r->metrics = fopen(path, "a");
  if (!r->metrics) txl_fatal("%s: cannot open for writing: %s", path, strerror(errno));
}

void txl_report_close(TxlReport *r) {
  if (r->metrics) fclose(r->metrics);
  r->metrics = NULL;
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
  if (!r->metrics) return;
  char q[64], eta[32], tps[32];
  const char *key;
  double value;
  txl_loss_quality(r->char_level, f->loss, q, sizeof q, &key, &value);
  txl_format_duration((f->max_step - f->step) * f->ms_per_step / 1000.0, eta, sizeof eta);
  txl_format_count((long long)llround(f->tokens_per_s), tps, sizeof tps);
  char comm[48] = "";
  if (f->comm_wait >= 0) snprintf(comm, sizeof comm, " | comm wait %.0f%%", 100.0 * f->comm_wait);
  printf("step %*d/%d | lr %.3e | loss %.4f | %s | |g| %.3f | %s tok/s | %.1f ms/step%s | ETA %s\n",
         (int)snprintf(NULL, 0, "%d", f->max_step), f->step, f->max_step, f->lr, f->loss, q, f->grad_norm, tps,
         f->ms_per_step, comm, eta);
  fflush(stdout);
  fprintf(r->metrics,
          "{\"kind\": \"train\", \"step\": %d, \"lr\": %.6e, \"loss\": %.6f, \"%s\": %.6f, \"grad_norm\": %.6f, "
          "\"tokens_per_s\": %.1f, \"ms_per_step\": %.3f, \"comm_wait\": %.4f, \"elapsed_s\": %.3f}\n",
          f->step, f->lr, f->loss, key, value, f->grad_norm, f->tokens_per_s, f->ms_per_step,
          f->comm_wait < 0 ? 0.0 : f->comm_wait, f->elapsed_s);
  fflush(r->metrics);
}

void txl_report_eval(TxlReport *r, const char *split, int step, double loss, double tokens, double seconds) {
  if (!r->metrics) return;
  char q[64];
  const char *key;
  double value;
  txl_loss_quality(r->char_level, loss, q, sizeof q, &key, &value);
  printf("%s at step %d | loss %.4f | %s | %.0f tokens in %.1f s\n", split, step, loss, q, tokens, seconds);
  fflush(stdout);
  fprintf(r->metrics, "{\"kind\": \"%s\", \"step\": %d, \"loss\": %.6f, \"%s\": %.6f, \"tokens\": %.0f, \"seconds\": %.3f}\n",
          split, step, loss, key, value, tokens, seconds);
  fflush(r->metrics);
}

void txl_report_baseline(TxlReport *r, const char *split, double bits) {
  if (!r->metrics) return;
  double nats = bits * log(2.0);
  if (r->char_level)
    printf("%s unigram entropy: %.4f bits per character (the bar to beat)\n", split, bits);
  else
    printf("%s unigram entropy: %.4f bits per token = perplexity %.1f (the bar to beat)\n", split, bits, exp(nats));
  fflush(stdout);
  fprintf(r->metrics, "{\"kind\": \"unigram\", \"split\": \"%s\", \"bits\": %.6f, \"loss\": %.6f}\n", split, bits, nats);
  fflush(r->metrics);
}
