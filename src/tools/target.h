/* The checkpoint a tool's argument names (txl-inspect, txl-eval, txl-generate): a checkpoint
 * file, a run folder, or one of a run folder's pointers ("latest", "best"). */
#ifndef TXL_TOOLS_TARGET_H
#define TXL_TOOLS_TARGET_H

#include <stddef.h>
#include <stdio.h>

/* The checkpoint file of `target`, in path[n]:
 *   a run folder: its newest checkpoint that opens (txl_ckpt_find), or with `best` the file its
 *     'best' pointer names;
 *   a file named "latest" or "best" (a run folder's pointer, as the trainer writes them): the
 *     checkpoint it names;
 *   any other file: itself (checked by whoever opens it).
 * A notice (latest's file skipped for an older one) goes to `notices` (NULL: none). What names no
 * checkpoint (an empty folder, a pointer naming a missing file, --best without a 'best' pointer
 * or given a file) is a one-line error on every rank. collective */
void txl_tool_checkpoint(const char *target, int best, char *path, size_t n, FILE *notices);

#endif
