/* Byte-level BPE: see bpe.h. The merges are a hash table of id pairs; a pre-token is merged as
 * Hugging Face's BPE model does it: a heap of the candidate pairs ordered by (rank, position of
 * the left symbol), stale entries skipped, so that a long pre-token costs O(n log n). */
#include "data/bpe.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/unicode_class.h"
#include "src/base/hash.h"

typedef struct {
  uint64_t key;   /* (a << 32 | b) + 1; 0 = empty slot */
  int32_t rank, merged;
} Pair;

typedef struct {
  char *bytes;
  size_t len;
  int32_t id;
} Special;

struct TxlBpe {
  int64_t vocab_size;
  int32_t byte_id[256];
  Pair *pairs;
  uint64_t pair_mask;
  Special *special;
  int64_t n_special;
  unsigned char special_first[256]; /* 1 when some added token starts with that byte */
  int prefix_space, use_regex;
};

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...) {
  if (cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static const Pair *find_pair(const TxlBpe *b, int32_t x, int32_t y) {
  const uint64_t key = ((uint64_t)(uint32_t)x << 32 | (uint32_t)y) + 1;
  for (uint64_t h = mix64(key) & b->pair_mask;; h = (h + 1) & b->pair_mask) {
    if (b->pairs[h].key == key) return &b->pairs[h];
    if (b->pairs[h].key == 0) return NULL;
  }
}

/* ---- construction -------------------------------------------------------------------------- */

typedef struct { /* the tokens by bytes, while building */
  int64_t *slot;
  uint64_t mask;
  TxlBpeToken token;
  void *ctx;
} TokHash;

static int64_t tok_lookup(const TokHash *t, const char *s, size_t len) {
  for (uint64_t h = txl_hash_bytes(s, len) & t->mask;; h = (h + 1) & t->mask) {
    const int64_t o = t->slot[h];
    if (o < 0) return -1;
    size_t ol;
    const char *os = t->token(t->ctx, o, &ol);
    if (ol == len && memcmp(os, s, len) == 0) return o;
  }
}

static int build(TxlBpe *b, const TokHash *t, const int32_t *merges, int64_t n_merges, const int64_t *special,
                 int64_t n_special, char *err, size_t cap) {
  const int64_t V = b->vocab_size;
  for (int i = 0; i < 256; i++) {
    const char c = (char)i;
    const int64_t id = tok_lookup(t, &c, 1);
    if (id < 0) return fail(err, cap, "byte 0x%02X is no token of the vocabulary (a byte-level BPE has all 256)", i);
    b->byte_id[i] = (int32_t)id;
  }
  uint64_t size = 16;
  while (size < 2 * (uint64_t)n_merges) size <<= 1;
  b->pairs = calloc(size, sizeof *b->pairs);
  if (!b->pairs) return fail(err, cap, "out of memory for %lld merges", (long long)n_merges);
  b->pair_mask = size - 1;
  char *cat = NULL;
  size_t cat_cap = 0;
  int rc = 0;
  for (int64_t r = 0; r < n_merges && rc == 0; r++) {
    const int32_t x = merges[2 * r], y = merges[2 * r + 1];
    if (x < 0 || x >= V || y < 0 || y >= V) {
      rc = fail(err, cap, "merge %lld names token id %d, outside the vocabulary [0, %lld)", (long long)r,
                x < 0 || x >= V ? x : y, (long long)V);
      break;
    }
    size_t lx, ly;
    const char *sx = t->token(t->ctx, x, &lx), *sy = t->token(t->ctx, y, &ly);
    if (lx + ly > cat_cap) {
      cat_cap = 2 * (lx + ly);
      char *p = realloc(cat, cat_cap);
      if (!p) {
        rc = fail(err, cap, "out of memory checking the merges");
        break;
      }
      cat = p;
    }
    memcpy(cat, sx, lx);
    memcpy(cat + lx, sy, ly);
    const int64_t m = tok_lookup(t, cat, lx + ly);
    if (m < 0) {
      rc = fail(err, cap, "merge %lld (tokens %d and %d) gives no token of the vocabulary", (long long)r, x, y);
      break;
    }
    const uint64_t key = ((uint64_t)(uint32_t)x << 32 | (uint32_t)y) + 1;
    uint64_t h = mix64(key) & b->pair_mask;
    while (b->pairs[h].key != 0 && b->pairs[h].key != key) h = (h + 1) & b->pair_mask;
    if (b->pairs[h].key == key) {
      rc = fail(err, cap, "merge %lld (tokens %d and %d) repeats merge %d", (long long)r, x, y, b->pairs[h].rank);
      break;
    }
    b->pairs[h] = (Pair){key, (int32_t)r, (int32_t)m};
  }
  free(cat);
  if (rc != 0) return rc;
  b->special = calloc((size_t)(n_special ? n_special : 1), sizeof *b->special);
  if (!b->special) return fail(err, cap, "out of memory for the added tokens");
  for (int64_t i = 0; i < n_special; i++) {
    const int64_t id = special[i];
    if (id < 0 || id >= V)
      return fail(err, cap, "added token %lld has id %lld, outside the vocabulary [0, %lld)", (long long)i,
                  (long long)id, (long long)V);
    for (int64_t j = 0; j < i; j++)
      if (special[j] == id) return fail(err, cap, "added token id %lld is listed twice", (long long)id);
    size_t len;
    const char *s = t->token(t->ctx, id, &len);
    Special *sp = &b->special[b->n_special];
    sp->bytes = malloc(len);
    if (!sp->bytes) return fail(err, cap, "out of memory for the added tokens");
    memcpy(sp->bytes, s, len);
    sp->len = len;
    sp->id = (int32_t)id;
    b->n_special++;
    b->special_first[(unsigned char)s[0]] = 1;
  }
  return 0;
}

TxlBpe *txl_bpe_new(int64_t vocab_size, TxlBpeToken token, void *ctx, const int32_t *merges, int64_t n_merges,
                    const int64_t *special, int64_t n_special, int prefix_space, int use_regex, char *err,
                    size_t cap) {
  if (vocab_size < 256 || vocab_size > INT32_MAX) {
    fail(err, cap, "a vocabulary of %lld tokens cannot be byte-level (256 to 2^31 - 1 tokens)", (long long)vocab_size);
    return NULL;
  }
  if (n_merges < 0 || n_special < 0 || n_merges > INT32_MAX) {
    fail(err, cap, "%lld merges, %lld added tokens: out of range", (long long)n_merges, (long long)n_special);
    return NULL;
  }
  TxlBpe *b = calloc(1, sizeof *b);
  TokHash t = {.token = token, .ctx = ctx};
  uint64_t size = 16;
  while (size < 2 * (uint64_t)vocab_size) size <<= 1;
  t.slot = b ? malloc(size * sizeof *t.slot) : NULL;
  if (!t.slot) {
    free(b);
    fail(err, cap, "out of memory for a vocabulary of %lld tokens", (long long)vocab_size);
    return NULL;
  }
  t.mask = size - 1;
  for (uint64_t i = 0; i < size; i++) t.slot[i] = -1;
  b->vocab_size = vocab_size;
  b->prefix_space = prefix_space != 0;
  b->use_regex = use_regex != 0;
  int rc = 0;
  for (int64_t i = 0; i < vocab_size && rc == 0; i++) {
    size_t len;
    const char *s = token(ctx, i, &len);
    if (len == 0) {
      rc = fail(err, cap, "token %lld is empty", (long long)i);
      break;
    }
    uint64_t h = txl_hash_bytes(s, len) & t.mask;
    for (; t.slot[h] >= 0; h = (h + 1) & t.mask) {
      size_t ol;
      const char *os = token(ctx, t.slot[h], &ol);
      if (ol == len && memcmp(os, s, len) == 0) {
        rc = fail(err, cap, "token %lld has the bytes of token %lld", (long long)i, (long long)t.slot[h]);
        break;
      }
    }
    t.slot[h] = i;
  }
  if (rc == 0) rc = build(b, &t, merges, n_merges, special, n_special, err, cap);
  free(t.slot);
  if (rc != 0) {
    txl_bpe_free(b);
    return NULL;
  }
  return b;
}

void txl_bpe_free(TxlBpe *b) {
  if (!b) return;
  for (int64_t i = 0; i < b->n_special; i++) free(b->special[i].bytes);
  free(b->special);
  free(b->pairs);
  free(b);
}

/* ---- encoding ------------------------------------------------------------------------------ */

static int push(TxlBpeIds *o, int32_t id) {
  if (o->n == o->cap) {
    const size_t cap = o->cap ? 2 * o->cap : 1024;
    int32_t *p = realloc(o->id, cap * sizeof *p);
    if (!p) return -1;
    o->id = p;
    o->cap = cap;
  }
  o->id[o->n++] = id;
  return 0;
}

/* The character at p[0 .. n), n > 0: its length and class. Lenient: a byte that starts no valid
 * UTF-8 sequence is one character of class other. */
static int char_at(const unsigned char *p, size_t n, int *cls) {
  const unsigned c = p[0];
  if (c < 0x80) {
    *cls = txl_uc_class(c);
    return 1;
  }
  int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (c > 0xF4) len = 0;
  uint32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
  if (len == 0 || (size_t)len > n) {
    *cls = TXL_UC_OTHER;
    return 1;
  }
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xC0) != 0x80) {
      *cls = TXL_UC_OTHER;
      return 1;
    }
    cp = cp << 6 | (p[i] & 0x3F);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
    *cls = TXL_UC_OTHER;
    return 1;
  }
  *cls = txl_uc_class(cp);
  return len;
}

/* The merge heap of one pre-token. */
typedef struct {
  int32_t rank, pos, left, right; /* the pair's rank, left symbol's position, both ids when pushed */
} Cand;

typedef struct {
  int32_t *id, *prev, *next;
  Cand *heap;
  size_t cap, heap_n, heap_cap;
} Work;

static int cand_less(const Cand *a, const Cand *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(Work *w, Cand c) {
  if (w->heap_n == w->heap_cap) {
    const size_t cap = w->heap_cap ? 2 * w->heap_cap : 64;
    Cand *p = realloc(w->heap, cap * sizeof *p);
    if (!p) return -1;
    w->heap = p;
    w->heap_cap = cap;
  }
  size_t i = w->heap_n++;
  while (i > 0 && cand_less(&c, &w->heap[(i - 1) / 2])) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = c;
  return 0;
}

static Cand heap_pop(Work *w) {
  const Cand top = w->heap[0], last = w->heap[--w->heap_n];
  size_t i = 0;
  for (;;) {
    size_t k = 2 * i + 1;
    if (k >= w->heap_n) break;
    if (k + 1 < w->heap_n && cand_less(&w->heap[k + 1], &w->heap[k])) k++;
    if (!cand_less(&w->heap[k], &last)) break;
    w->heap[i] = w->heap[k];
    i = k;
  }
  if (w->heap_n > 0) w->heap[i] = last;
  return top;
}

static int push_pair(const TxlBpe *b, Work *w, int32_t pos) {
  const int32_t nx = w->next[pos];
  if (nx < 0) return 0;
  const Pair *p = find_pair(b, w->id[pos], w->id[nx]);
  return p ? heap_push(w, (Cand){p->rank, pos, w->id[pos], w->id[nx]}) : 0;
}

/* One pre-token s[0 .. n): its ids appended to out. */
static int bpe_word(const TxlBpe *b, Work *w, const unsigned char *s, size_t n, TxlBpeIds *out) {
  if (n == 1) return push(out, b->byte_id[s[0]]);
  if (n > INT32_MAX) return -1;
  if (n > w->cap) {
    int32_t *id = realloc(w->id, n * sizeof *id);
    if (id) w->id = id;
    int32_t *pv = id ? realloc(w->prev, n * sizeof *pv) : NULL;
    if (pv) w->prev = pv;
    int32_t *nx = pv ? realloc(w->next, n * sizeof *nx) : NULL;
    if (!nx) return -1;
    w->next = nx;
    w->cap = n;
  }
  for (size_t i = 0; i < n; i++) {
    w->id[i] = b->byte_id[s[i]];
    w->prev[i] = (int32_t)i - 1;
    w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
  }
  w->heap_n = 0;
  for (size_t i = 0; i + 1 < n; i++)
    if (push_pair(b, w, (int32_t)i) != 0) return -1;
  while (w->heap_n > 0) {
    const Cand c = heap_pop(w);
    /* stale when either symbol was merged since (a merged token is longer: another id) */
    if (w->id[c.pos] != c.left) continue;
    const int32_t r = w->next[c.pos];
    if (r < 0 || w->id[r] != c.right) continue;
    w->id[c.pos] = find_pair(b, c.left, c.right)->merged;
    w->id[r] = -1;
    w->next[c.pos] = w->next[r];
    if (w->next[r] >= 0) w->prev[w->next[r]] = c.pos;
    if (w->prev[c.pos] >= 0 && push_pair(b, w, w->prev[c.pos]) != 0) return -1;
    if (push_pair(b, w, c.pos) != 0) return -1;
  }
  for (int32_t i = 0; i >= 0; i = w->next[i])
    if (push(out, w->id[i]) != 0) return -1;
  return 0;
}

/* The length of the pre-token at s[i .. n) (GPT-2's pattern, see bpe.h). */
static size_t pre_token(const unsigned char *s, size_t n, size_t i) {
  if (s[i] == '\'' && i + 1 < n) {
    const unsigned char c = s[i + 1];
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
    if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') || (c == 'l' && s[i + 2] == 'l')))
      return 3;
  }
  int cls;
  size_t j = i + (size_t)char_at(s + i, n - i, &cls);
  if (s[i] == ' ' && j < n) { /* " ?" before a letter, number or other */
    int next;
    const int l = char_at(s + j, n - j, &next);
    if (next != TXL_UC_SPACE) {
      cls = next;
      j += (size_t)l;
    }
  }
  if (cls != TXL_UC_SPACE) {
    while (j < n) {
      int c;
      const int l = char_at(s + j, n - j, &c);
      if (c != cls) break;
      j += (size_t)l;
    }
    return j - i;
  }
  /* whitespace: \s+(?!\S) leaves the run's last character to the pre-token after it when one
   * follows, \s+ takes a run of one */
  size_t last = i;
  while (j < n) {
    int c;
    const int l = char_at(s + j, n - j, &c);
    if (c != TXL_UC_SPACE) break;
    last = j;
    j += (size_t)l;
  }
  if (j < n && last > i) return last - i;
  return j - i;
}

static int encode_stretch(const TxlBpe *b, Work *w, const unsigned char *s, size_t n, TxlBpeIds *out) {
  if (n == 0) return 0;
  unsigned char *buf = NULL;
  if (b->prefix_space && s[0] != ' ') {
    buf = malloc(n + 1);
    if (!buf) return -1;
    buf[0] = ' ';
    memcpy(buf + 1, s, n);
    s = buf;
    n++;
  }
  int rc = 0;
  if (!b->use_regex) {
    rc = bpe_word(b, w, s, n, out);
  } else {
    for (size_t i = 0; i < n && rc == 0;) {
      const size_t l = pre_token(s, n, i);
      rc = bpe_word(b, w, s + i, l, out);
      i += l;
    }
  }
  free(buf);
  return rc;
}

int txl_bpe_encode(const TxlBpe *b, const char *text, size_t len, TxlBpeIds *out) {
  const unsigned char *s = (const unsigned char *)text;
  Work w = {0};
  int rc = 0;
  size_t from = 0;
  for (size_t i = 0; i < len && rc == 0; i++) {
    if (!b->special_first[s[i]]) continue;
    const Special *best = NULL;
    for (int64_t k = 0; k < b->n_special; k++) {
      const Special *sp = &b->special[k];
      if (sp->len <= len - i && (!best || sp->len > best->len) && memcmp(sp->bytes, s + i, sp->len) == 0) best = sp;
    }
    if (!best) continue;
    rc = encode_stretch(b, &w, s + from, i - from, out);
    if (rc == 0) rc = push(out, best->id);
    from = i + best->len;
    i = from - 1;
  }
  if (rc == 0) rc = encode_stretch(b, &w, s + from, len - from, out);
  free(w.id);
  free(w.prev);
  free(w.next);
  free(w.heap);
  return rc;
}
