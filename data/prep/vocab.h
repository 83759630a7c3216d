/* The token table of txl-prep: every distinct token (a word, or the UTF-8 bytes of one
 * character) with its count and first occurrence in the splits the vocabulary is built from,
 * and the ordering rules that turn it into a vocabulary. */
#ifndef TXL_DATA_PREP_VOCAB_H
#define TXL_DATA_PREP_VOCAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int64_t count;  /* occurrences in the vocabulary splits (--vocab-from) */
  int64_t first;  /* rank of the first occurrence in those splits, -1 when not counted */
  int64_t id;     /* the token id after vocab_build, -1 = maps to <unk> */
  int64_t off;    /* the token's bytes: arena[off .. off + len) */
  uint32_t len;
  uint32_t seen;  /* occurs in some split (vocabulary split or not) */
  uint64_t hash;
} TokEntry;

typedef struct {
  TokEntry *e;
  int64_t n, cap;
  int64_t *slots; /* open addressing, indices into e, -1 = empty */
  uint64_t mask;
  char *arena;
  int64_t arena_len, arena_cap;
  int64_t next_first;
} TokTable;

void tok_init(TokTable *t);
void tok_free(TokTable *t);
/* Index of the entry for the token (len bytes at s), -1 when absent. */
int64_t tok_find(const TokTable *t, const char *s, size_t len);
/* Index of the entry for the token, added (count 0, first -1, not seen) when absent. */
int64_t tok_add(TokTable *t, const char *s, size_t len);
static inline const char *tok_bytes(const TokTable *t, int64_t i) { return t->arena + t->e[i].off; }
/* Records one occurrence; `counted` when it is in a split the vocabulary is built from. */
static inline void tok_occur(TokTable *t, int64_t i, int counted) {
  TokEntry *e = &t->e[i];
  e->seen = 1;
  if (counted) {
    if (e->first < 0) e->first = t->next_first++;
    e->count++;
  }
}

typedef struct {
  int64_t min_freq;   /* tokens counted fewer times are left out (0 or 1: none) */
  int64_t max_size;   /* at most this many tokens in all, specials included; 0 = no limit */
  int sorted_by_bytes; /* char mode: the kept tokens are ordered by code point (= by UTF-8 bytes) */
  int64_t eos_entry;  /* entry of "<eos>" to place first (word mode), -1 for none */
} VocabRules;

typedef struct {
  int64_t size;     /* vocabulary size */
  int64_t *entry;   /* [size]: the table entry of each id, -1 for an added <unk> */
  int64_t eos_id, unk_id; /* -1 when absent */
  int64_t added_unk;      /* 1 when <unk> was added because some token is out of vocabulary */
} Vocab;

/* Builds the vocabulary and sets every entry's id (-1 = <unk>). On a problem (max_size too small
 * for the tokens that must be in it) returns a message in err (non-empty) instead. */
void vocab_build(TokTable *t, const VocabRules *r, Vocab *v, char *err, size_t err_cap);
void vocab_free(Vocab *v);

#endif
