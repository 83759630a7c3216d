/* What the fuzz harnesses of tests/fuzz share (support.c): running the code under test once per
 * input with its exit paths caught, the resources such a path leaves behind given back, and the
 * input written to a file of this process.
 *
 * The project's error calls (txl_fatal, txl_fatal_all, txl_fatal_if_any, txl_malloc,
 * txl_calloc of src/base/error.h) are defined here instead of by src/base/error.c: where the
 * program would print its one line and exit, the harness's run ends (a longjmp back into
 * fuzz_run, out of plain C frames that own no locks: HDF5 is never inside a call when the
 * project's code calls txl_fatal). What the process would have given back at its exit is then
 * given back here: the memory and FILE streams the code under test took during the run (its
 * objects are linked with malloc, fopen, ... renamed to the fuzz_ functions below, see
 * CMakeLists.txt) and every open HDF5 object (H5close). So an error exit is no crash and
 * leaves nothing behind from one input to the next.
 *
 * On a normal return fuzz_run checks that the run gave back everything it took (tracked memory
 * and streams; HDF5 files, datasets, groups, datatypes and attributes, which HDF5 still holds,
 * so LeakSanitizer cannot see them): anything left is a leak and ends the process with abort(),
 * which libFuzzer reports as a crash, like a sanitizer's. */
#ifndef TXL_TESTS_FUZZ_FUZZ_H
#define TXL_TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How fuzz_run treats an exit through txl_fatal & co. */
enum {
  FUZZ_EXIT_OK = 0,    /* an error the code under test may report by exiting (corrupt input) */
  FUZZ_EXIT_CRASH = 1, /* the code under test promises to return its errors: an exit is a defect */
};

/* Runs fn(arg) once. Returns 0 when it returned, 1 when it ended through the project's error
 * exit (TXL_FUZZ_VERBOSE=1 in the environment prints its message: for looking at one input).
 * Either way nothing it took is left afterwards. With FUZZ_EXIT_CRASH an error exit aborts the
 * process instead. */
int fuzz_run(void (*fn)(void *), void *arg, int on_exit);

/* Prints a line to stderr when TXL_FUZZ_VERBOSE is set (an error a reader returned, ...). */
void fuzz_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Ends the process with a message naming a broken promise of the code under test (a wrong
 * result, not an error exit): libFuzzer reports it as a crash and keeps the input. */
void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* A file name in this process's scratch folder (made on first use under $TXL_FUZZ_TMP, or
 * /dev/shm, or /tmp; removed at exit). The string is static per name: call it once. */
const char *fuzz_path(const char *name);
/* Writes data[0, size) to path (created or truncated). */
void fuzz_write_file(const char *path, const uint8_t *data, size_t size);

/* The renamed allocation and stream functions of the code under test (CMakeLists.txt renames
 * its references with objcopy --redefine-syms=track.syms). Outside fuzz_run they only pass
 * through. */
void *fuzz_malloc(size_t n);
void *fuzz_calloc(size_t n, size_t size);
void *fuzz_realloc(void *p, size_t n);
char *fuzz_strdup(const char *s);
void fuzz_free(void *p);
FILE *fuzz_fopen(const char *path, const char *mode);
FILE *fuzz_fmemopen(void *buf, size_t size, const char *mode);
int fuzz_fclose(FILE *f);
/* A program's main registers its exit handler on every run: registered once. */
int fuzz_atexit(void (*fn)(void));
/* A program's main installs signal handlers: libFuzzer's own stay (nothing is installed). */
typedef void (*fuzz_sighandler)(int);
fuzz_sighandler fuzz_signal(int sig, fuzz_sighandler fn);

#endif
