/* Hand-made corpus files for the reader tests, written with plain HDF5 calls (not txl-prep), so
 * that the reader is checked against values computed independently: id(split, i) below. */
#ifndef TXL_TESTS_DATA_HANDMADE_H
#define TXL_TESTS_DATA_HANDMADE_H

#include <stdint.h>

/* The id stored at position i of split k (0 train, 1 valid, 2 test). */
static inline int64_t handmade_id(int k, int64_t i, int64_t vocab) {
  return (i * 7 + k * 5 + 3 + (i * i) % 11) % vocab;
}

/* Writes a corpus in txl's layout: splits of len[k] ids of the given byte size (1, 2 or 4),
 * chunks of `chunk` elements with Fletcher32, vocabulary "t0", "t1", ... ("<eos>" at id 0).
 * With bad_pos >= 0, train[bad_pos] is set to vocab (out of range). Returns 0 or -1. */
int handmade_corpus(const char *path, const int64_t len[3], int64_t vocab, int id_bytes,
                    int64_t chunk, int64_t bad_pos);
/* The same with the ids of Zipf's law (exponent 1) over the vocabulary: id i drawn with weight
 * 1 / (i + 1), as txl-prep's ids by frequency of a natural text; position i of split k from a
 * Philox word keyed by (i, k, seed). Ids of 4 bytes when vocab > 65535, else 2. */
int handmade_zipf_corpus(const char *path, const int64_t len[3], int64_t vocab, uint32_t seed);
/* An HDF5 file that is not a corpus: one dataset "x", no attributes. Returns 0 or -1. */
int handmade_foreign(const char *path);

#endif
