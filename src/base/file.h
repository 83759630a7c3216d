/* Small files written whole or not at all, and compared with what they should hold: for the run
 * directory's files (config.ini, latest, best, metrics.jsonl, parameter dumps). No MPI. */
#ifndef TXL_BASE_FILE_H
#define TXL_BASE_FILE_H

#include <stddef.h>

/* Writes data[0, bytes) to path atomically: "<path>.tmp-<pid>", written, flushed, synced and
 * closed, then renamed over path. Returns 0, or -1 with "<path>: <reason>" in err, path untouched
 * and no temporary left. Serial: any rank may call it. */
int txl_write_file_atomic(const char *path, const void *data, size_t bytes, char *err, size_t errlen);
/* Appends data[0, bytes) to fd (a file open for appending that grows by whole records: lines,
 * TensorBoard events) whole or not at all: a write that stops part-way (a full disk) is cut back
 * to *size, the bytes of the whole records before it. Returns 0 with *size grown by bytes, or -1
 * with errno the reason (0: a write that stored nothing and gave none) and *cut_short = 1 when
 * cutting back failed too (the file ends in part of the record). Serial. */
int txl_append_whole(int fd, const void *data, size_t bytes, long long *size, int *cut_short);
/* 1 when the file at path exists and holds exactly text. */
int txl_file_holds(const char *path, const char *text);

#endif
