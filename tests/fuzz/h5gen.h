/* Described inputs of the corpus and checkpoint harnesses: the fuzz input chooses, object by
 * object, how a well-formed HDF5 file departs from a valid one (an attribute missing, of another
 * type, shape or value; a dataset missing, of another type or shape, a group in its place, ids
 * out of range), and h5gen writes it with plain HDF5 calls. Random bytes of a real file mostly
 * stop at HDF5's checksums; these reach the readers' own checks.
 *
 * An input is read a byte at a time; past its end every byte reads 0, which always means "as in
 * a valid file": an empty input describes a valid file. */
#ifndef TXL_TESTS_FUZZ_H5GEN_H
#define TXL_TESTS_FUZZ_H5GEN_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t *p;
  size_t n;
} FuzzIn;

unsigned fuzz_in_byte(FuzzIn *in);
uint64_t fuzz_in_u64(FuzzIn *in); /* 8 bytes, little-endian */

/* The value an attribute has in a valid file. */
typedef struct {
  enum { CANON_INT, CANON_FLOAT, CANON_STRING } kind;
  hid_t type; /* its file type (integers and floats) */
  int64_t i;
  double f;
  const char *s;
} Canon;

/* Writes attribute `name` of obj: as canon, or (as the input says) not at all, of another type
 * (integers of 8 to 64 bits, signed or not, a double, a fixed or variable-length string), with
 * two elements, with a value near canon's, or with any value. */
void gen_attr(hid_t obj, const char *name, const Canon *canon, FuzzIn *in);

/* Writes dataset `name` in loc: in a valid file of type `type` and shape dims[0 .. rank), its
 * elements values (of memory type mem_type, prod(dims) of them). The input may leave it out,
 * give it another element type, another shape (one more or one fewer element, a dimension more
 * or less, a scalar), put a group of that name in its place, or change one element to any value
 * (integer memory types); and it picks the storage: chunked (with or without Fletcher32, whole
 * or small chunks), contiguous or compact. Returns 0, or -1 when HDF5 refused (the description
 * cannot be written: the input is skipped). */
int gen_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, hid_t mem_type,
                const void *values, FuzzIn *in);

/* Creates `path` (truncated) for writing a described file: the file, or -1. */
hid_t gen_create(const char *path);

/* The body of a harness that reads HDF5 files: an input that starts with HDF5's signature, has
 * it after a 512-byte user block, or starts as a checkpoint's digest header does (both: the
 * checkpoints txl writes, src/checkpoint/FORMAT.md) is a file, written to `path` as it is; any other input is a description that write_described
 * turns into `path` (non-zero: it could not, and the input is skipped). Then fuzz_run(run, NULL,
 * FUZZ_EXIT_CRASH): the reader under test promises to return its errors. */
void gen_file_then_run(const char *path, const uint8_t *data, size_t size,
                       int (*write_described)(const uint8_t *data, size_t size), void (*run)(void *));

#endif
