/* The corpus reader: one instance per rank, each opening the HDF5 corpus file written by
 * txl-prep independently and read-only (plain H5Fopen, no collective calls). The layout is
 * described in data/FORMAT.md.
 *
 * Every problem with the file (a missing or foreign file, a damaged dataset, a read beyond a
 * split, a token id outside the vocabulary) is returned: NULL or -1, with one line in the caller's
 * `err` buffer (cap bytes) naming the file and the problem. The reader never ends the program
 * for them, so that the ranks can agree on a failure that only some of them saw (the callers in
 * src/train do, with txl_fatal_if_any). Only a caller's own mistake ends the program through
 * txl_fatal: an unknown split name passed to txl_corpus_split_length, or a token id outside the
 * vocabulary passed to the token accessors. Not thread-safe (neither is the HDF5 library): use an
 * instance from one thread. */
#ifndef TXL_DATA_CORPUS_H
#define TXL_DATA_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#define TXL_CORPUS_FORMAT "txl-corpus"
#define TXL_CORPUS_FORMAT_VERSION 1

typedef struct TxlCorpus TxlCorpus;

/* Opens and validates (format attribute, version, mode, datasets present with rank 1 and an
 * unsigned 8/16/32-bit id type, each holding the bytes its length needs, vocab_size in
 * [1, 2^31 - 1] (an int, like every id) and consistent with the vocabulary datasets, eos_id and
 * unk_id in range). Returns NULL with the message in err (naming the path and the problem). */
TxlCorpus *txl_corpus_open(const char *path, char *err, size_t cap);
void txl_corpus_close(TxlCorpus *c);

/* split: "train" | "valid" | "test"; any other name is the caller's error (txl_fatal). */
int64_t txl_corpus_split_length(const TxlCorpus *c, const char *split);
int64_t txl_corpus_vocab_size(const TxlCorpus *c);
const char *txl_corpus_mode(const TxlCorpus *c); /* "word" | "char" | "byte" | "spm" | "bpe" */
/* 1 when a token is a character or a byte (char and byte mode: losses in bits per character),
 * 0 when it is a word or a subword (word, spm and bpe mode: perplexity). */
int txl_corpus_char_level(const TxlCorpus *c);
const char *txl_corpus_path(const TxlCorpus *c);
int64_t txl_corpus_eos_id(const TxlCorpus *c);   /* -1 when the corpus has no <eos> */
int64_t txl_corpus_unk_id(const TxlCorpus *c);   /* -1 when the vocabulary has no <unk> */

/* Reads a [n_rows, n_cols] time-major block of one split:
 *   out[i * n_cols + j] = split[(col_first + j) * col_len + offset + i]   (i < n_rows, j < n_cols)
 * as ONE hyperslab selection (start = col_first * col_len + offset, stride = col_len,
 * count = n_cols, block = n_rows) into a [n_cols, n_rows] buffer, transposed into out.
 * Requires col_len >= 1, n_cols >= 1, n_rows >= 1, offset >= 0, col_first >= 0,
 * offset + n_rows <= col_len (a read stays inside its columns) and
 * (col_first + n_cols) * col_len <= split length, and a split named train, valid or test. Every
 * id read is checked to be < vocab_size (the message names the file, split and position).
 * scratch: NULL (then a buffer is allocated and freed here) or n_rows * n_cols int32 of the
 * caller's. The chunk cache of the split is sized for n_cols columns on the first such read,
 * so that walking down the columns reads each stored chunk once.
 * Returns 0, or -1 with the message in err (a damaged chunk, an id >= vocab_size, a read out of
 * range). */
int txl_corpus_read_block(TxlCorpus *c, const char *split, int64_t col_len, int64_t col_first,
                          int n_cols, int64_t offset, int n_rows, int32_t *out, int32_t *scratch,
                          char *err, size_t cap);

/* Contiguous read: out[i] = split[start + i] for i < n (same checks and errors as read_block). */
int txl_corpus_read_range(TxlCorpus *c, const char *split, int64_t start, int64_t n, int32_t *out,
                          char *err, size_t cap);

/* Checks this part's share of the whole file, so that a damage is found before any work: the
 * vocabulary (every part: offsets spanning '/vocab' and increasing, no token twice), and of the
 * chunks of train, valid and test taken as one sequence, part `part` of `parts` contiguous
 * shares, each read once (their Fletcher32 checksums) with every id checked to be < vocab_size.
 * The parts together read every chunk exactly once. Returns 0 and sets *tokens to the ids this
 * part checked, or -1 with the message in err. */
int txl_corpus_check(TxlCorpus *c, int part, int parts, int64_t *tokens, char *err, size_t cap);

/* Loads and checks the vocabulary (offsets spanning '/vocab' and increasing, no token twice);
 * nothing is done when it is loaded already. Returns 0, or -1 with the message in err. */
int txl_corpus_load_vocab(TxlCorpus *c, char *err, size_t cap);

/* The vocabulary (owned by the corpus). These load it on their first call when
 * txl_corpus_load_vocab has not (a failure then ends the program through txl_fatal: call
 * txl_corpus_load_vocab first where several ranks must agree on it).
 * token_string: the token's bytes followed by a NUL (UTF-8 for word and char corpora; for a byte
 * corpus the single byte, so byte 0 and the char "\0" read as ""; use token_bytes for those).
 * An id outside [0, vocab_size) is the caller's error (txl_fatal). */
const char *txl_corpus_token_string(TxlCorpus *c, int64_t id);
const char *txl_corpus_token_bytes(TxlCorpus *c, int64_t id, size_t *len);
/* Token id of a string, -1 if absent (in char mode a one-character string: the id of that
 * character; in byte mode a one-byte string). token_id_n takes a length (strings with NULs). */
int64_t txl_corpus_token_id(TxlCorpus *c, const char *s);
int64_t txl_corpus_token_id_n(TxlCorpus *c, const char *s, size_t len);

/* Subword corpora (mode "spm", FORMAT.md): text <-> token ids through the corpus's SentencePiece
 * model. encode_line: one line of text (without its line end) -> the corpus's ids (*ids malloc'ed,
 * free it; no end-of-line id: the caller appends eos_id); characters the model does not know
 * become its unknown piece. decode_line: the ids of one line (eos_id is no part of it) -> the
 * text (*text malloc'ed and NUL-terminated, *len bytes). Both load the vocabulary (as the
 * accessors do). Return 0, or -1 with the message in err. Another mode, or an id outside the
 * vocabulary, is the caller's error (txl_fatal). */
int txl_corpus_spm_encode_line(TxlCorpus *c, const char *text, size_t len, int32_t **ids, int64_t *n,
                               char *err, size_t cap);
int txl_corpus_spm_decode_line(TxlCorpus *c, const int32_t *ids, int64_t n, char **text, size_t *len,
                               char *err, size_t cap);

/* Byte-level BPE corpora (mode "bpe", FORMAT.md): text -> the corpus's ids with the stored merges
 * and added tokens (data/bpe.h: exactly as txl-prep encoded each file; *ids malloc'ed, free it).
 * Decoding is concatenating the tokens' bytes (txl_corpus_token_bytes). Loads the vocabulary.
 * Returns 0, or -1 with the message in err. Another mode is the caller's error (txl_fatal). */
int txl_corpus_bpe_encode(TxlCorpus *c, const char *text, size_t len, int32_t **ids, int64_t *n, char *err,
                          size_t cap);

/* SHA-256 (lower-case hex) of the vocabulary: the mode, then every token in id order as its byte
 * length (8 bytes, little-endian) and its bytes. Two corpora share it exactly when their ids mean
 * the same tokens; checkpoints store it. Owned by the corpus (computed on the first call). */
const char *txl_corpus_vocab_digest(TxlCorpus *c);

/* Entropy in bits per token of the unigram distribution of a split (streams through it) into
 * *bits. Returns 0, or -1 with the message in err (the errors of read_range). */
int txl_corpus_unigram_entropy_bits(TxlCorpus *c, const char *split, double *bits, char *err,
                                    size_t cap);

#endif
