/* The run directory (run.work_dir) belongs to one run at a time: rank 0 holds a lock on it for
 * the whole run, removes the temporaries that killed runs left behind, and a new run refuses to
 * start over another run's checkpoints. Small files in it are written whole or not at all
 * (src/base/file.h). */
#ifndef TXL_TRAIN_WORKDIR_H
#define TXL_TRAIN_WORKDIR_H

#include <stddef.h>

#include "dist/dist.h"

/* The lock file in work_dir: rank 0 of a running txl-train holds an exclusive flock on it and
 * writes "<pid> <host>" into it, so that a second txl-train on the folder can name the holder. */
#define TXL_WORKDIR_LOCK "txl-train.lock"

/* Creates work_dir (and its parents), takes its lock (a second txl-train on the same folder is
 * refused with one line naming the holder), then removes the temporaries of runs that were
 * killed while writing (latest / best / config.ini .tmp-<pid> of processes that no longer run,
 * and those of the event files in tb/; ckpt-*.h5.tmp: the lock proves that no other run writes
 * them), with a notice. The lock lasts
 * until the process exits. Rank 0 does the work; every rank gets the verdict.
 * collective: all ranks */
void txl_workdir_open(const char *work_dir, const TxlDist *dist);

/* For a run that starts fresh: refuses (one line on every rank: how many checkpoints, the
 * newest, the ways out) when work_dir holds checkpoints, which belong to another run and which
 * the new run's checkpoints would overwrite and rotate away, and likewise when it holds none but
 * a metrics.jsonl with lines of steps (a run that died before its first checkpoint), which the new
 * run would append to. collective: all ranks */
void txl_workdir_refuse_checkpoints(const char *work_dir, const TxlDist *dist);

#endif
