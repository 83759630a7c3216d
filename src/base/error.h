/* Errors: one line to stderr naming the rank, the place and the problem, then a non-zero exit
 * on every rank. Never use assert() for input validation: these are always compiled in. */
#ifndef TXL_BASE_ERROR_H
#define TXL_BASE_ERROR_H

#include <stddef.h>

/* Called once by dist/ after MPI_Init so that messages carry the rank and host. */
void txl_error_set_rank(int rank, int world_size, const char *host);
/* How an error ends the job, installed once by dist/ after MPI_Init (base knows no MPI). Without
 * it (a tool or test that never starts MPI) an error just exits. Each hook may be NULL. */
typedef struct {
  void (*abort_all)(void);         /* ends every rank at once (MPI_Abort), when world_size > 1 */
  void (*finalize)(void);          /* before exit(1): MPI_Finalize when MPI is running          */
  int (*min_over_ranks)(int value); /* the smallest of a value over the ranks (a collective under
                                     * dist.timeout_s): txl_fatal_if_any's agreement */
} TxlErrorJob;
void txl_error_set_job(const TxlErrorJob *job);

/* Print "txl: error: <message>" (prefixed with "[rank R@host]" when world_size > 1) and end the
 * whole job with exit status 1: MPI_Abort when several ranks run, exit(1) otherwise. Use it for
 * a problem that only this rank may have seen (a file it could not read, a library failure). */
void txl_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* For a problem every rank detects identically (a bad config value): rank 0 prints the line,
 * every rank finalizes MPI and exits with status 1, so mpirun reports no abort noise.
 * collective: all ranks (each must reach it, or use txl_fatal). */
void txl_fatal_all(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* For a problem some ranks may see and others not (a node with too few GPUs): when `failed` on
 * any rank, the lowest failing rank prints its message (with its rank), every rank finalizes MPI
 * and exits with status 1; returns when no rank failed. collective: all ranks (agreed under
 * dist.timeout_s, see dist/dist.h) */
void txl_fatal_if_any(int failed, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "txl: error: <message>" as txl_fatal does and returns: for a rank that must tell the
 * others before it ends the job (dist/'s collective timeout). */
void txl_error_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Flushes every stream and exits with status 1 at once, without MPI_Finalize or MPI_Abort (both
 * wait for ranks that no longer answer): for the ranks of a job that dist/'s collective timeout
 * ends; mpirun then ends the ranks that are stopped or gone. */
void txl_exit_unfinalized(void) __attribute__((noreturn));

/* Library-call checks: each a do { } while (0) that reports file:line and the failed call. */
#define TXL_FAIL_AT(what, call) txl_fatal("%s:%d: %s failed: %s", __FILE__, __LINE__, what, call)

#define H5_CHECK(call) do { if ((call) < 0) TXL_FAIL_AT("HDF5", #call); } while (0)
#define ALLOC_CHECK(ptr) do { if ((ptr) == NULL) \
    txl_fatal("%s:%d: out of memory allocating %s", __FILE__, __LINE__, #ptr); } while (0)
/* MPI_CHECK lives in dist/dist.h (it needs the MPI error string). */

/* malloc/calloc that never return NULL (they end the job with a message instead). */
void *txl_malloc(size_t bytes, const char *what);
void *txl_calloc(size_t count, size_t size, const char *what);

#endif
