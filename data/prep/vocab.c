/* Vocabulary order (word mode), as the original Transformer-XL's Vocab.build_vocab with
 * Counter.most_common: "<eos>" first, then tokens by descending count, ties by first occurrence.
 * See data/FORMAT.md for <unk>, min_freq, max_size and the char-mode order. */
#include "data/prep/vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/base/hash.h"

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = txl_hash_bytes(s, n); /* FNV-1a, then a final mix */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

void tok_init(TokTable *t) {
  memset(t, 0, sizeof *t);
  t->cap = 1024;
  t->e = txl_malloc((size_t)t->cap * sizeof *t->e, "token table");
  t->mask = 2047;
  t->slots = txl_malloc((t->mask + 1) * sizeof *t->slots, "token table");
  for (uint64_t i = 0; i <= t->mask; i++) t->slots[i] = -1;
  t->arena_cap = 1 << 16;
  t->arena = txl_malloc((size_t)t->arena_cap, "token strings");
}

void tok_free(TokTable *t) {
  free(t->e);
  free(t->slots);
  free(t->arena);
  memset(t, 0, sizeof *t);
}

int64_t tok_find(const TokTable *t, const char *s, size_t len) {
  uint64_t h = hash_bytes(s, len);
  for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
    int64_t k = t->slots[i];
    if (k < 0) return -1;
    const TokEntry *e = &t->e[k];
    if (e->hash == h && e->len == len && memcmp(t->arena + e->off, s, len) == 0) return k;
  }
}

static void grow_slots(TokTable *t) {
  uint64_t size = (t->mask + 1) * 2;
  int64_t *slots = txl_malloc(size * sizeof *slots, "token table");
  for (uint64_t i = 0; i < size; i++) slots[i] = -1;
  for (int64_t k = 0; k < t->n; k++) {
    uint64_t i = t->e[k].hash & (size - 1);
    while (slots[i] >= 0) i = (i + 1) & (size - 1);
    slots[i] = k;
  }
  free(t->slots);
  t->slots = slots;
  t->mask = size - 1;
}

int64_t tok_add(TokTable *t, const char *s, size_t len) {
  uint64_t h = hash_bytes(s, len);
  uint64_t i = h & t->mask;
  for (;; i = (i + 1) & t->mask) {
    int64_t k = t->slots[i];
    if (k < 0) break;
    const TokEntry *e = &t->e[k];
    if (e->hash == h && e->len == len && memcmp(t->arena + e->off, s, len) == 0) return k;
  }
  if (len > UINT32_MAX) txl_fatal("a token of %zu bytes is too long", len);
  if (t->n == t->cap) {
    t->cap *= 2;
    t->e = realloc(t->e, (size_t)t->cap * sizeof *t->e);
    ALLOC_CHECK(t->e);
  }
  while (t->arena_len + (int64_t)len > t->arena_cap) {
    t->arena_cap *= 2;
    t->arena = realloc(t->arena, (size_t)t->arena_cap);
    ALLOC_CHECK(t->arena);
  }
  memcpy(t->arena + t->arena_len, s, len);
  int64_t k = t->n++;
  t->e[k] = (TokEntry){.count = 0, .first = -1, .id = -1, .off = t->arena_len,
                       .len = (uint32_t)len, .seen = 0, .hash = h};
  t->arena_len += (int64_t)len;
  t->slots[i] = k;
  if ((uint64_t)t->n * 2 > t->mask + 1) grow_slots(t);
  return k;
}

/* qsort context (qsort has none; the table is only ever sorted from one thread) */
static const TokTable *g_sort_table;

static int by_count_then_first(const void *a, const void *b) {
  const TokEntry *x = &g_sort_table->e[*(const int64_t *)a], *y = &g_sort_table->e[*(const int64_t *)b];
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  return x->first < y->first ? -1 : x->first > y->first;
}

static int by_bytes(const void *a, const void *b) {
  const TokEntry *x = &g_sort_table->e[*(const int64_t *)a], *y = &g_sort_table->e[*(const int64_t *)b];
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(g_sort_table->arena + x->off, g_sort_table->arena + y->off, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

void vocab_build(TokTable *t, const VocabRules *r, Vocab *v, char *err, size_t err_cap) {
  memset(v, 0, sizeof *v);
  v->eos_id = v->unk_id = -1;
  err[0] = '\0';
  const int64_t unk_entry = tok_find(t, "<unk>", 5);

  /* candidates: counted tokens (count >= min_freq), specials excluded, most frequent first */
  int64_t n_cand = 0;
  int64_t *cand = txl_malloc((size_t)(t->n + 1) * sizeof *cand, "vocabulary");
  for (int64_t k = 0; k < t->n; k++)
    if (k != r->eos_entry && t->e[k].count > 0 && t->e[k].count >= r->min_freq) cand[n_cand++] = k;
  g_sort_table = t;
  qsort(cand, (size_t)n_cand, sizeof *cand, by_count_then_first);

  int64_t n_fixed = r->eos_entry >= 0 ? 1 : 0;
  int64_t limit = r->max_size > 0 ? r->max_size : INT64_MAX;
  if (limit < n_fixed) {
    snprintf(err, err_cap, "--max-size %lld is smaller than the %lld special token(s)",
             (long long)r->max_size, (long long)n_fixed);
    free(cand);
    return;
  }
  int64_t take = n_cand < limit - n_fixed ? n_cand : limit - n_fixed;

  /* is every token of every split in the vocabulary (then no <unk> is needed)? */
  for (int64_t k = 0; k < t->n; k++) t->e[k].id = -1;
  if (r->eos_entry >= 0) t->e[r->eos_entry].id = 0;
  for (int64_t i = 0; i < take; i++) t->e[cand[i]].id = 1;
  int need_unk = 0;
  for (int64_t k = 0; k < t->n && !need_unk; k++) need_unk = t->e[k].seen && t->e[k].id < 0;
  int add_unk = need_unk && !(unk_entry >= 0 && t->e[unk_entry].id >= 0);
  if (add_unk) {
    if (limit < n_fixed + 1) {
      snprintf(err, err_cap, "some tokens are out of the vocabulary, but --max-size %lld leaves "
               "no room for <unk>", (long long)r->max_size);
      free(cand);
      return;
    }
    /* <unk> takes one place: drop it from the candidates (it may be a counted word that was cut
     * by min_freq or max_size) and keep one candidate less */
    int64_t m = 0;
    for (int64_t i = 0; i < n_cand; i++)
      if (cand[i] != unk_entry) cand[m++] = cand[i];
    n_cand = m;
    take = n_cand < limit - n_fixed - 1 ? n_cand : limit - n_fixed - 1;
  }
  if (r->sorted_by_bytes) qsort(cand, (size_t)take, sizeof *cand, by_bytes);

  v->size = n_fixed + add_unk + take;
  v->entry = txl_malloc((size_t)v->size * sizeof *v->entry, "vocabulary");
  int64_t id = 0;
  if (r->eos_entry >= 0) { v->eos_id = id; v->entry[id++] = r->eos_entry; }
  if (add_unk && !r->sorted_by_bytes) { v->unk_id = id; v->entry[id++] = unk_entry; }
  for (int64_t i = 0; i < take; i++) v->entry[id++] = cand[i];
  if (add_unk && r->sorted_by_bytes) { v->unk_id = id; v->entry[id++] = unk_entry; }
  v->added_unk = add_unk;

  for (int64_t k = 0; k < t->n; k++) t->e[k].id = -1;
  for (int64_t i = 0; i < v->size; i++)
    if (v->entry[i] >= 0) t->e[v->entry[i]].id = i;
  if (!add_unk && unk_entry >= 0 && t->e[unk_entry].id >= 0) v->unk_id = t->e[unk_entry].id;
  free(cand);
}

void vocab_free(Vocab *v) {
  free(v->entry);
  memset(v, 0, sizeof *v);
}
