/* Byte-level BPE (GPT-2, Hugging Face tokenizers' ByteLevel pre-tokenizer + BPE model): text ->
 * token ids, one implementation for txl-prep --mode bpe and for the corpus reader (prompts of
 * txl-generate). The same algorithm is python/txl/bpe.py. See docs/bpe.md and data/FORMAT.md.
 *
 * Encoding a text: the added tokens (`special`) are matched literally first, leftmost-longest, and
 * become their ids; every stretch of text between them is, when prefix_space is set and it does
 * not start with a space, given a leading space; it is cut into pre-tokens by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (use_regex; else the stretch is one pre-token), and each pre-token's bytes, starting from the
 * single-byte tokens, are merged by rank: the adjacent pair of lowest rank first, ties leftmost,
 * until no adjacent pair is a merge. */
#ifndef TXL_DATA_BPE_H
#define TXL_DATA_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct TxlBpe TxlBpe;

/* The bytes of token id (0 <= id < vocab_size), *len > 0 of them. */
typedef const char *(*TxlBpeToken)(void *ctx, int64_t id, size_t *len);

/* Builds the encoder from the vocabulary (vocab_size tokens, their bytes through `token`), the
 * merges (n_merges pairs of ids (a, b) in rank order, merges[2r], merges[2r + 1]: the merged token
 * is the one whose bytes are a's followed by b's) and the ids of the added tokens matched
 * literally. Checks that every id lies in [0, vocab_size), that each of the 256 bytes is a token,
 * that each merge's concatenation is a token, and that no merge or added token comes twice.
 * Returns NULL with one line in err (starting with the problem, without a file name) when not. */
TxlBpe *txl_bpe_new(int64_t vocab_size, TxlBpeToken token, void *ctx, const int32_t *merges, int64_t n_merges,
                    const int64_t *special, int64_t n_special, int prefix_space, int use_regex, char *err,
                    size_t cap);
void txl_bpe_free(TxlBpe *b);

/* A growing list of ids. */
typedef struct {
  int32_t *id;
  size_t n, cap;
} TxlBpeIds;

/* Appends the ids of text[0 .. len) to out (the text should be UTF-8: a byte that starts no valid
 * character is a character of the class "other" on its own). Returns 0, or -1 when out of memory. */
int txl_bpe_encode(const TxlBpe *b, const char *text, size_t len, TxlBpeIds *out);

#endif
