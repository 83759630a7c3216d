/* txl-prep's command line: the options, their table (--help) and their checks. */
#ifndef TXL_DATA_PREP_OPTIONS_H
#define TXL_DATA_PREP_OPTIONS_H

#include <stdint.h>

enum { MODE_WORD, MODE_CHAR, MODE_BYTE, MODE_SPM, MODE_BPE };
enum { N_SPLITS = 3 };
extern const char *const PREP_SPLIT[N_SPLITS]; /* "train", "valid", "test" */

#define MAX_VOCAB ((int64_t)INT32_MAX) /* ids and the vocabulary size are ints in the trainer */

typedef struct {
  int mode;
  const char *mode_name;
  const char *path[N_SPLITS];
  const char *out;
  int lower;
  int64_t min_freq, max_size;
  int vocab_train_only;
  int vocab_from_given; /* --vocab-from was on the command line */
  const char *dtype; /* auto | uint8 | uint16 | uint32 */
  const char *spm_type;  /* NULL: not given (unigram when training) */
  int64_t spm_vocab;     /* 0: not given */
  const char *spm_model; /* NULL: train a model */
  const char *bpe_tokenizer, *bpe_vocab, *bpe_merges; /* --mode bpe: tokenizer.json or vocab.json + merges.txt */
  int bpe_prefix_space;
  int quiet;
} PrepOptions;

/* Fills o from the command line; --help prints the options and exits 0; a bad option or
 * combination is one line (txl_fatal). */
void txl_prep_parse_args(int argc, char **argv, PrepOptions *o);

#endif
