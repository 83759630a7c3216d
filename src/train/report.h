/* What a run tells its user: progress lines on stdout (rank 0) and the same figures as JSON
 * lines in <work_dir>/metrics.jsonl, and with run.tensorboard as TensorBoard scalars in
 * <work_dir>/tb (src/train/tb_log.h: one event per line, tagged "<kind>/<key>" of the line, the
 * "unigram" line's keys "unigram/<split>_<key>" at step 0). A line or an event is written whole or
 * not at all: a write that fails (a full disk) is cut back to the last complete one and
 * remembered, and the training loop stops the run on it (txl_report_failed) rather than train on
 * without a record. */
#ifndef TXL_TRAIN_REPORT_H
#define TXL_TRAIN_REPORT_H

#include <stdio.h>

#include "src/checkpoint/checkpoint.h"
#include "src/train/tb_events.h"
#include "src/train/tb_log.h"

typedef struct {
  int fd;              /* metrics.jsonl, open for appending on rank 0; -1 on the other ranks */
  int char_level;      /* 1: report bits per character, 0: perplexity */
  long long good_size; /* bytes of complete lines in metrics.jsonl */
  char path[1100];
  char error[1700];    /* the first failed write, "<path>: cannot write: <reason>"; "" while none */
  char header[1024];   /* the "unigram" line (txl_report_baseline), waiting to be written: by
                          txl_report_keep_until, or before the first other line */
  int tensorboard;     /* run.tensorboard, on rank 0 */
  TxlTbLog tb;         /* its folder; tb.fd: this start's event file, from txl_report_keep_until */
  TxlTbEvent tb_header; /* the "unigram" event, waiting as header does (tb_header.summary: NULL
                           when none waits) */
  TxlTbSummary tb_header_values;
} TxlReport;

/* Opens <work_dir>/metrics.jsonl (work_dir exists: txl_workdir_open) for appending on rank 0,
 * and with tensorboard creates <work_dir>/tb there; a file or folder that cannot be opened is one
 * error on every rank. collective: all ranks */
void txl_report_open(TxlReport *r, const char *work_dir, int rank, int char_level, int tensorboard);
void txl_report_close(TxlReport *r);
/* 1 when a write to metrics.jsonl or the event file failed (only ever on rank 0); the reason is
 * in r->error. */
int txl_report_failed(const TxlReport *r);
/* Makes the lines and events written so far durable (fsync); a failure is remembered as a failed
 * write. */
void txl_report_sync(TxlReport *r);

/* metrics.jsonl tells one history: a run that continues from step `step` (0: a fresh start, or
 * starting over as run.resume = auto does in a folder without a checkpoint) drops the lines of
 * later steps, which the run that stopped logged after its checkpoint and which this run logs
 * again (and the "test" line of that step, which ended the run that stopped there: the continued
 * run ends with its own), and a line that is not whole (cut short). The "unigram" line waiting
 * in r->header is written now when the file holds none (there is one per history, not one per
 * start). Lines that go only at the end are cut off in place (ftruncate: one call, and a
 * metrics.jsonl that is a link stays one); otherwise the file is rewritten atomically
 * (txl_write_file_atomic). With run.tensorboard the event files are cut back alike and this
 * start's is created (txl_tb_start; the "unigram" event is written when the files hold none): the
 * events are written from here on. A notice says how many lines and events went; a failure is one
 * error on every rank. collective: all ranks */
void txl_report_keep_until(TxlReport *r, int step);

/* The number of lines with a step (train, valid, test: a history, not only the "unigram" header)
 * in the metrics.jsonl at path, and the last one's step in *last; 0 when there is none or no
 * file. Serial. */
int txl_metrics_history(const char *path, int *last);

/* The sums over the steps since the last progress line. Each step is timed once, from fetching
 * its data to its update, so that evaluations, checkpoints and the logging itself never count as
 * training time and every step counts exactly once in the time, the tokens and the waits.
 * Checkpoints carry them (progress_* root attributes), so that the first line after a resume
 * averages the same steps as the uninterrupted run's. */
typedef TxlCkptProgress TxlProgress;

typedef struct {
  int step, max_step;
  double lr, loss, grad_norm, tokens_per_s, ms_per_step, elapsed_s;
  double comm_wait; /* share of the time blocked on the gradient all-reduce; < 0: one rank */
  double tokens;    /* tokens trained (all ranks) since the previous progress line */
  double loss_scale; /* the loss scale S now (train.loss_scale); <= 0: no loss scaling */
  long long skipped; /* steps skipped for a non-finite gradient since the previous line */
} TxlTrainFigures;

/* A figure that is NaN or infinite is written as null in metrics.jsonl (JSON has no spelling
 * for them). */
void txl_report_train(TxlReport *r, const TxlTrainFigures *f);
/* split: "valid" or "test"; tokens: how many were scored. */
void txl_report_eval(TxlReport *r, const char *split, int step, double loss, double tokens, double seconds);

/* The unigram entropy of a split (bits per token): a model that learned anything beats it.
 * Printed now; its line waits in r->header (see txl_report_keep_until), so that a run refused
 * before it trains writes nothing. */
void txl_report_baseline(TxlReport *r, const char *split, double bits);

/* "bpc 1.2345" (character and byte corpora) or "ppl 123.45" (words) for a mean loss in nats;
 * *key and *value (may be NULL) get the name and the number. */
void txl_loss_quality(int char_level, double loss, char *out, size_t n, const char **key, double *value);
/* "1h02m03s", "3m54s", "12s" */
void txl_format_duration(double seconds, char *out, size_t n);
/* 12345678 -> "12,345,678" */
void txl_format_count(long long v, char *out, size_t n);

#endif
