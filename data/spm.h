/* A SentencePiece model (the C++ library libsentencepiece) behind a C interface, for txl-prep and
 * the corpus reader (mode "spm", data/FORMAT.md). Ids here are SentencePiece's own; the corpus
 * numbers the pieces its own way (by frequency) and translates (data/corpus_spm.c).
 *
 * Nothing here ends the program and no C++ exception leaves it: a failure returns NULL or -1 with
 * one line in the caller's err buffer (cap bytes) saying what went wrong, without a file name (the
 * caller knows which file it read the model from and prefixes it). Not thread-safe per model. */
#ifndef TXL_DATA_SPM_H
#define TXL_DATA_SPM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TxlSpm TxlSpm;

/* Loads a serialized model (the bytes of a .model file). NULL with the reason in err when the
 * bytes are no SentencePiece model. */
TxlSpm *txl_spm_load(const void *bytes, size_t n, char *err, size_t cap);
void txl_spm_free(TxlSpm *s);

/* Number of pieces (ids 0 .. size - 1). */
int txl_spm_size(const TxlSpm *s);
/* The id of the unknown piece, and of the end-of-sentence piece (-1 when the model has none). */
int txl_spm_unk_id(const TxlSpm *s);
int txl_spm_eos_id(const TxlSpm *s);
/* The bytes of piece `id` (0 <= id < size; owned by the model, not NUL-terminated), *len set. */
const char *txl_spm_piece(const TxlSpm *s, int id, size_t *len);
/* The id of the piece whose bytes are s[0 .. len), -1 when no piece has them. */
int txl_spm_piece_id(const TxlSpm *s, const char *piece, size_t len);

/* Encodes text[0 .. len) into *ids (a malloc'ed buffer of *cap ints, grown with realloc as needed;
 * both may start as NULL and 0) and sets *n. Returns 0, or -1 with the reason in err. */
int txl_spm_encode(const TxlSpm *s, const char *text, size_t len, int **ids, size_t *cap, size_t *n,
                   char *err, size_t errcap);
/* Decodes ids[0 .. n) (each in [0, size)) into a malloc'ed text *text of *len bytes (followed by a
 * NUL not counted in *len). Returns 0, or -1 with the reason in err. */
int txl_spm_decode(const TxlSpm *s, const int *ids, size_t n, char **text, size_t *len, char *err,
                   size_t errcap);

#ifdef __cplusplus
}
#endif

#endif
