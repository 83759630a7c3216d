/* The TensorBoard folder of a run (run.tensorboard = true): <work_dir>/tb, one event file
 * "events.out.tfevents.<unix seconds>.<hostname>" per start of the run (rank 0's host), the
 * records src/train/tb_events.h encodes. The files of earlier starts tell one history with it:
 * a start that continues from step s first cuts every earlier file back to the records of steps
 * <= s (as metrics.jsonl is, txl_report_keep_until: also the "test" event of step s, and any
 * damaged record), and its own file begins with file_version and a SessionLog START at step s + 1,
 * on which a TensorBoard that is already running drops what it holds of later steps. The writes
 * themselves and their failures are the report's (src/train/report.c). Rank 0 only. */
#ifndef TXL_TRAIN_TB_LOG_H
#define TXL_TRAIN_TB_LOG_H

#include <stddef.h>

#define TXL_TB_DIR "tb"                          /* in work_dir */
#define TXL_TB_PREFIX "events.out.tfevents."     /* TensorBoard's name for an event file */

typedef struct {
  int fd;         /* this start's event file, open for appending (txl_tb_start); -1 before */
  long long size; /* bytes of whole records in it */
  char dir[1100];
  char path[1400];
} TxlTbLog;

/* Creates <work_dir>/tb (or takes the folder that is there). Returns 0, or -1 with
 * "<dir>: cannot create the TensorBoard folder (run.tensorboard = true): <reason>" in err. */
int txl_tb_open(TxlTbLog *tb, const char *work_dir, char *err, size_t errlen);
void txl_tb_close(TxlTbLog *tb);

/* Cuts the folder's event files back to the records of steps <= keep (see above; the extra
 * "unigram" events after the history's first go too, uncounted), then creates this start's file
 * and writes its first records. *dropped: the records with scalars that went; *unigrams: the
 * "unigram" events kept (the history's header: 0 or 1). Files that only lose records at their end
 * are cut there (ftruncate), others rewritten atomically (txl_write_file_atomic). Returns 0, or
 * -1 with "<file>: <reason>" in err. */
int txl_tb_start(TxlTbLog *tb, int keep, int *dropped, int *unigrams, char *err, size_t errlen);

/* The wall clock in seconds since the epoch, as events carry it. */
double txl_tb_now(void);

#endif
