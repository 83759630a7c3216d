/* What a run tells its user: progress lines on stdout (rank 0) and the same figures as JSON
 * lines in <work_dir>/metrics.jsonl. */
#ifndef TXL_TRAIN_REPORT_H
#define TXL_TRAIN_REPORT_H

#include <stdio.h>

typedef struct {
  FILE *metrics;   /* NULL on ranks other than 0 */
  int char_level;  /* 1: report bits per character, 0: perplexity */
} TxlReport;

/* Opens <work_dir>/metrics.jsonl for appending on rank 0 (creating work_dir). */
void txl_report_open(TxlReport *r, const char *work_dir, int rank, int char_level);
void txl_report_close(TxlReport *r);

typedef struct {
  int step, max_step;
  double lr, loss, grad_norm, tokens_per_s, ms_per_step, elapsed_s;
  double comm_wait; /* share of the time blocked on the gradient all-reduce; < 0: one rank */
} TxlTrainFigures;

void txl_report_train(TxlReport *r, const TxlTrainFigures *f);
/* split: "valid" or "test"; tokens: how many were scored. */
void txl_report_eval(TxlReport *r, const char *split, int step, double loss, double tokens, double seconds);

/* The unigram entropy of a split (bits per token): a model that learned anything beats it. */
void txl_report_baseline(TxlReport *r, const char *split, double bits);

/* "1h02m03s", "3m54s", "12s" */
/* "bpc 1.2345" (character and byte corpora) or "ppl 123.45" (words) for a mean loss in nats;
 * *key and *value (may be NULL) get the name and the number. */
void txl_loss_quality(int char_level, double loss, char *out, size_t n, const char **key, double *value);
void txl_format_duration(double seconds, char *out, size_t n);
/* 12345678 -> "12,345,678" */
void txl_format_count(long long v, char *out, size_t n);

#endif
