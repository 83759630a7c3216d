/* Small files written whole or not at all, and compared with what they should hold: for the run
 * directory's files (config.ini, latest, best, metrics.jsonl, parameter dumps). No MPI. */
#ifndef TXL_BASE_FILE_H
#define TXL_BASE_FILE_H

#include <stddef.h>

/* Writes data[0, bytes) to path atomically: "<path>.tmp-<pid>", written, flushed, synced and
 * closed, then renamed over path. Returns 0, or -1 with "<path>: <reason>" in err, path untouched
 * and no temporary left. Serial: any rank may call it. */
int txl_write_file_atomic(const char *path, const void *data, size_t bytes, char *err, size_t errlen);
/* 1 when the file at path exists and holds exactly text. */
int txl_file_holds(const char *path, const char *text);

#endif
