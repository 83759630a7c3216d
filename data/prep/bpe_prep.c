/* txl-prep --mode bpe: see bpe_prep.h. */
#include "data/prep/bpe_prep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/prep/json.h"
#include "src/base/error.h"
#include "src/base/hash.h"

#define EOS_TOKEN "<|endoftext|>"

/* ---- files ----------------------------------------------------------------------------------- */

static char *read_whole(const char *path, const char *what, size_t *len) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) txl_fatal("%s: cannot read the %s: it is a directory", path, what);
  FILE *f = fopen(path, "rb");
  if (!f) txl_fatal("%s: cannot open the %s: %s", path, what, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = txl_malloc(cap + 1, what);
  for (size_t got; (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      cap *= 2;
      buf = realloc(buf, cap + 1);
      ALLOC_CHECK(buf);
    }
  }
  const int bad = ferror(f);
  fclose(f);
  if (bad) txl_fatal("%s: error reading the %s", path, what);
  if (n == 0) txl_fatal("%s: the %s is empty", path, what);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static void parse_json_file(const char *path, const char *what, JsonValue *root) {
  size_t len;
  char *text = read_whole(path, what, &len);
  char err[512];
  if (json_parse(text, len, root, err, sizeof err) != 0) txl_fatal("%s: not valid JSON: %s", path, err);
  free(text);
  if (root->type != JSON_OBJECT)
    txl_fatal("%s: the %s must be a JSON object, not %s", path, what, json_type_name(root->type));
}

/* A string shown in a message: at most 40 bytes, control bytes as '?'. */
static const char *shown(const char *s, size_t len, char buf[48]) {
  size_t n = len < 40 ? len : 40, o = 0;
  for (size_t i = 0; i < n; i++) buf[o++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
  if (len > 40) buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
  buf[o] = '\0';
  return buf;
}

/* ---- the model's vocabulary: strings by id, ids by string ------------------------------------ */

typedef struct {
  const char *path;
  int64_t size;          /* ids 0 .. size - 1 */
  const char **str;      /* [size] model vocabulary string of each id, NULL: none (an added token only) */
  size_t *len;
  int64_t *slot;         /* hash of the strings */
  uint64_t mask;
  const char **add;      /* [size] the added token's content of each id, NULL: none */
  size_t *add_len;
} Model;

static int64_t model_id(const Model *m, const char *s, size_t len) {
  for (uint64_t h = txl_hash_bytes(s, len) & m->mask;; h = (h + 1) & m->mask) {
    const int64_t o = m->slot[h];
    if (o < 0) return -1;
    if (m->len[o] == len && memcmp(m->str[o], s, len) == 0) return o;
  }
}

/* The vocabulary object ("token": id, ...) plus n_added added ids up to max_added. */
static void model_init(Model *m, const char *path, const char *where, const JsonValue *vocab, int64_t max_added,
                       int64_t n_added) {
  memset(m, 0, sizeof *m);
  m->path = path;
  if (!vocab || vocab->type != JSON_OBJECT)
    txl_fatal("%s: %s must be an object of token: id, not %s", path, where, vocab ? json_type_name(vocab->type) : "missing");
  int64_t max_id = max_added;
  for (size_t i = 0; i < vocab->n; i++) {
    const JsonValue *v = &vocab->items[i];
    char b[48];
    if (v->type != JSON_NUMBER || !v->is_int || v->integer < 0 || v->integer >= INT32_MAX)
      txl_fatal("%s: %s: the id of token '%s' is not an integer in [0, 2^31 - 1)", path, where,
                shown(vocab->keys[i].str, vocab->keys[i].len, b));
    if (v->integer > max_id) max_id = v->integer;
  }
  /* ids without gaps: the largest id is below the number of ids given (checked before it sizes
   * anything) */
  if (max_id >= (int64_t)vocab->n + n_added)
    txl_fatal("%s: %s: the ids are not 0 .. %lld without gaps (id %lld, %lld tokens)", path, where,
              (long long)((int64_t)vocab->n + n_added - 1), (long long)max_id, (long long)((int64_t)vocab->n + n_added));
  m->size = max_id + 1;
  if (m->size < 256) txl_fatal("%s: %s: %lld tokens cannot be a byte-level BPE (it has all 256 bytes)", path, where,
                               (long long)m->size);
  m->str = txl_calloc((size_t)m->size, sizeof *m->str, "vocabulary");
  m->len = txl_calloc((size_t)m->size, sizeof *m->len, "vocabulary");
  m->add = txl_calloc((size_t)m->size, sizeof *m->add, "vocabulary");
  m->add_len = txl_calloc((size_t)m->size, sizeof *m->add_len, "vocabulary");
  uint64_t size = 16;
  while (size < 2 * (uint64_t)m->size) size <<= 1;
  m->slot = txl_malloc(size * sizeof *m->slot, "vocabulary");
  m->mask = size - 1;
  for (uint64_t i = 0; i < size; i++) m->slot[i] = -1;
  for (size_t i = 0; i < vocab->n; i++) {
    const int64_t id = vocab->items[i].integer;
    const char *s = vocab->keys[i].str;
    const size_t len = vocab->keys[i].len;
    char b[48], b2[48];
    if (len == 0) txl_fatal("%s: %s: token %lld is the empty string", path, where, (long long)id);
    if (m->str[id])
      txl_fatal("%s: %s: id %lld is given to two tokens ('%s' and '%s')", path, where, (long long)id,
                shown(m->str[id], m->len[id], b), shown(s, len, b2));
    uint64_t h = txl_hash_bytes(s, len) & m->mask;
    for (; m->slot[h] >= 0; h = (h + 1) & m->mask)
      if (m->len[m->slot[h]] == len && memcmp(m->str[m->slot[h]], s, len) == 0)
        txl_fatal("%s: %s: token '%s' is listed twice", path, where, shown(s, len, b));
    m->slot[h] = id;
    m->str[id] = s;
    m->len[id] = len;
  }
}

static void model_free(Model *m) {
  free(m->str);
  free(m->len);
  free(m->add);
  free(m->add_len);
  free(m->slot);
}

/* GPT-2's byte-to-unicode map, inverted: the byte of each code point of the alphabet, -1 else. */
static void byte_decoder(int dec[324]) {
  for (int i = 0; i < 324; i++) dec[i] = -1;
  int extra = 0;
  for (int byte = 0; byte < 256; byte++) {
    const int printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
    dec[printable ? byte : 256 + extra++] = byte;
  }
}

/* The tokens' bytes (added tokens: their content's UTF-8; the rest: the string through the byte
 * decoder), then the merges as ids, then the encoder. `merge_str` holds 2 * n_merges strings. */
typedef struct {
  const char *s;
  size_t len;
} Str;

static const char *prep_token(void *ctx, int64_t id, size_t *len) {
  const BpePrep *b = ctx;
  *len = b->tok_len[id];
  return b->tok[id];
}

static void finish(BpePrep *b, Model *m, const Str *merge_str, int64_t n_merges, const char *merges_path,
                   const int64_t *line_of) {
  const char *path = m->path;
  int dec[324];
  byte_decoder(dec);
  b->size = m->size;
  b->tok = txl_calloc((size_t)b->size, sizeof *b->tok, "vocabulary");
  b->tok_len = txl_calloc((size_t)b->size, sizeof *b->tok_len, "vocabulary");
  for (int64_t id = 0; id < b->size; id++) {
    char sb[48];
    if (m->add[id]) {
      b->tok[id] = txl_malloc(m->add_len[id], "vocabulary");
      memcpy(b->tok[id], m->add[id], m->add_len[id]);
      b->tok_len[id] = m->add_len[id];
      continue;
    }
    if (!m->str[id]) txl_fatal("%s: no token has id %lld (the ids must be 0 .. %lld without gaps)", path,
                               (long long)id, (long long)(b->size - 1));
    const unsigned char *s = (const unsigned char *)m->str[id];
    char *out = txl_malloc(m->len[id], "vocabulary");
    size_t o = 0;
    for (size_t i = 0; i < m->len[id];) { /* the JSON parser gave valid UTF-8 */
      uint32_t cp = s[i];
      int l = cp < 0x80 ? 1 : cp < 0xE0 ? 2 : cp < 0xF0 ? 3 : 4;
      if (l == 2) cp = (s[i] & 0x1Fu) << 6 | (s[i + 1] & 0x3Fu);
      else if (l == 3) cp = (s[i] & 0x0Fu) << 12 | (s[i + 1] & 0x3Fu) << 6 | (s[i + 2] & 0x3Fu);
      else if (l == 4) cp = (s[i] & 0x07u) << 18 | (s[i + 1] & 0x3Fu) << 12 | (s[i + 2] & 0x3Fu) << 6 | (s[i + 3] & 0x3Fu);
      if (cp >= 324 || dec[cp] < 0)
        txl_fatal("%s: token %lld ('%s') has the character U+%04X, which is not in GPT-2's byte alphabet (not a "
                  "byte-level BPE vocabulary)", path, (long long)id, shown(m->str[id], m->len[id], sb), (unsigned)cp);
      out[o++] = (char)dec[cp];
      i += (size_t)l;
    }
    b->tok[id] = out;
    b->tok_len[id] = o;
  }
  b->n_merges = n_merges;
  b->merges = txl_malloc((size_t)(2 * n_merges + 1) * sizeof *b->merges, "merges");
  char *cat = NULL;
  size_t cat_cap = 0;
  for (int64_t r = 0; r < n_merges; r++) {
    const Str *x = &merge_str[2 * r], *y = &merge_str[2 * r + 1];
    char at[4200], b1[48], b2[48];
    if (line_of) snprintf(at, sizeof at, "%s:%lld", merges_path, (long long)line_of[r]);
    else snprintf(at, sizeof at, "%s: model.merges[%lld]", merges_path, (long long)r);
    const int64_t ix = model_id(m, x->s, x->len), iy = model_id(m, y->s, y->len);
    if (ix < 0 || iy < 0)
      txl_fatal("%s: the merge '%s %s' names '%s', which is not in the vocabulary", at, shown(x->s, x->len, b1),
                shown(y->s, y->len, b2), ix < 0 ? b1 : b2);
    if (x->len + y->len > cat_cap) {
      cat_cap = 2 * (x->len + y->len);
      cat = realloc(cat, cat_cap);
      ALLOC_CHECK(cat);
    }
    memcpy(cat, x->s, x->len);
    memcpy(cat + x->len, y->s, y->len);
    if (model_id(m, cat, x->len + y->len) < 0)
      txl_fatal("%s: the merge '%s %s' makes a token that is not in the vocabulary", at, shown(x->s, x->len, b1),
                shown(y->s, y->len, b2));
    b->merges[2 * r] = (int32_t)ix;
    b->merges[2 * r + 1] = (int32_t)iy;
  }
  free(cat);
  b->eos_id = -1;
  for (int64_t id = 0; id < b->size; id++)
    if (b->tok_len[id] == strlen(EOS_TOKEN) && memcmp(b->tok[id], EOS_TOKEN, b->tok_len[id]) == 0) b->eos_id = id;
  char err[512];
  b->bpe = txl_bpe_new(b->size, prep_token, b, b->merges, b->n_merges, b->special, b->n_special, b->prefix_space,
                       b->use_regex, err, sizeof err);
  if (!b->bpe) txl_fatal("%s: not a usable byte-level BPE: %s", path, err);
}

/* ---- tokenizer.json ---------------------------------------------------------------------------- */

static int is_null(const JsonValue *v) { return !v || v->type == JSON_NULL; }
static int is_true(const JsonValue *v) { return v && v->type == JSON_BOOL && v->boolean; }

/* A flag that must be false or absent. */
static void refuse_true(const char *path, const JsonValue *obj, const char *where, const char *key, const char *why) {
  const JsonValue *v = json_get(obj, key);
  if (!v || v->type == JSON_NULL || (v->type == JSON_BOOL && !v->boolean)) return;
  txl_fatal("%s: %s.%s = %s is not supported (%s)", path, where, key, v->type == JSON_BOOL ? "true" : json_type_name(v->type), why);
}

static const char *type_of(const JsonValue *v) {
  const JsonValue *t = json_get(v, "type");
  return t && t->type == JSON_STRING ? t->str : NULL;
}

/* ByteLevel's options into b (pre_tokenizer: ByteLevel, or a Sequence of one ByteLevel). */
static void read_pre_tokenizer(BpePrep *b, const char *path, const JsonValue *pt) {
  if (is_null(pt))
    txl_fatal("%s: pre_tokenizer is null; only a ByteLevel pre-tokenizer is supported (byte-level BPE)", path);
  const char *type = type_of(pt);
  if (type && !strcmp(type, "Sequence")) {
    const JsonValue *list = json_get(pt, "pretokenizers");
    if (!list || list->type != JSON_ARRAY || list->n != 1)
      txl_fatal("%s: pre_tokenizer: a Sequence is supported only of one ByteLevel pre-tokenizer", path);
    pt = &list->items[0];
    type = type_of(pt);
  }
  if (!type || strcmp(type, "ByteLevel"))
    txl_fatal("%s: pre_tokenizer type %s is not supported (only ByteLevel)", path, type ? type : "(none)");
  const JsonValue *aps = json_get(pt, "add_prefix_space"), *ur = json_get(pt, "use_regex");
  if ((aps && aps->type != JSON_BOOL) || (ur && ur->type != JSON_BOOL))
    txl_fatal("%s: pre_tokenizer: add_prefix_space and use_regex must be true or false", path);
  b->prefix_space = aps ? aps->boolean : 1; /* the defaults of tokenizers' ByteLevel */
  b->use_regex = ur ? ur->boolean : 1;
}

static void check_model(const char *path, const JsonValue *model) {
  if (!model || model->type != JSON_OBJECT) txl_fatal("%s: the key 'model' is missing or not an object", path);
  const char *type = type_of(model);
  if (type && strcmp(type, "BPE")) txl_fatal("%s: model type %s is not supported (only BPE)", path, type);
  if (!type && !json_get(model, "merges")) txl_fatal("%s: the model is not a BPE (it has no merges)", path);
  const JsonValue *d = json_get(model, "dropout");
  if (!is_null(d) && !(d->type == JSON_NUMBER && d->number == 0.0))
    txl_fatal("%s: model.dropout is not supported (BPE dropout samples; txl-prep encodes deterministically)", path);
  static const char *const prefixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const JsonValue *v = json_get(model, prefixes[i]);
    if (!is_null(v) && !(v->type == JSON_STRING && v->len == 0))
      txl_fatal("%s: model.%s is not supported (byte-level BPE has none)", path, prefixes[i]);
  }
  refuse_true(path, model, "model", "byte_fallback", "a byte-level BPE needs no fallback");
  refuse_true(path, model, "model", "ignore_merges", "only merges make the tokens");
}

/* 1 when an occurrence of a and one of b can overlap in a text (one inside the other, or an end of
 * one the start of the other). */
static int can_overlap(const char *a, size_t la, const char *b, size_t lb) {
  for (size_t k = 1; k <= la && k <= lb; k++)
    if (!memcmp(a + la - k, b, k) || !memcmp(b + lb - k, a, k)) return 1;
  for (size_t i = 0; i + lb <= la; i++)
    if (!memcmp(a + i, b, lb)) return 1;
  for (size_t i = 0; i + la <= lb; i++)
    if (!memcmp(b + i, a, la)) return 1;
  return 0;
}

void bpe_prep_load_tokenizer(BpePrep *b, const char *path) {
  memset(b, 0, sizeof *b);
  JsonValue root;
  parse_json_file(path, "tokenizer file", &root);
  if (!is_null(json_get(&root, "normalizer")))
    txl_fatal("%s: normalizer %s is not supported (only null)", path, type_of(json_get(&root, "normalizer"))
              ? type_of(json_get(&root, "normalizer")) : "(not null)");
  read_pre_tokenizer(b, path, json_get(&root, "pre_tokenizer"));
  const JsonValue *post = json_get(&root, "post_processor");
  if (!is_null(post) && (!type_of(post) || strcmp(type_of(post), "ByteLevel")))
    txl_fatal("%s: post_processor %s is not supported (only null or ByteLevel: it would add tokens)", path,
              type_of(post) ? type_of(post) : "(not null)");
  if (!is_null(json_get(&root, "truncation"))) txl_fatal("%s: truncation is not supported (must be null)", path);
  if (!is_null(json_get(&root, "padding"))) txl_fatal("%s: padding is not supported (must be null)", path);
  const JsonValue *model = json_get(&root, "model");
  check_model(path, model);

  const JsonValue *added = json_get(&root, "added_tokens");
  if (!is_null(added) && added->type != JSON_ARRAY) txl_fatal("%s: added_tokens must be an array", path);
  const size_t n_added = is_null(added) ? 0 : added->n;
  int64_t max_added = -1;
  for (size_t i = 0; i < n_added; i++) {
    const JsonValue *t = &added->items[i], *id = json_get(t, "id"), *content = json_get(t, "content");
    if (t->type != JSON_OBJECT || !id || id->type != JSON_NUMBER || !id->is_int || id->integer < 0 ||
        id->integer >= INT32_MAX || !content || content->type != JSON_STRING || content->len == 0)
      txl_fatal("%s: added_tokens[%zu] needs an id in [0, 2^31 - 1) and a non-empty content", path, i);
    static const char *const flags[] = {"single_word", "lstrip", "rstrip"};
    for (int f = 0; f < 3; f++) {
      char where[48];
      snprintf(where, sizeof where, "added_tokens[%zu]", i);
      refuse_true(path, t, where, flags[f], "added tokens are matched exactly as they are");
    }
    if (id->integer > max_added) max_added = id->integer;
  }
  Model m;
  model_init(&m, path, "model.vocab", json_get(model, "vocab"), max_added, (int64_t)n_added);
  b->special = txl_malloc((n_added + 1) * sizeof *b->special, "added tokens");
  for (size_t i = 0; i < n_added; i++) {
    const JsonValue *t = &added->items[i], *content = json_get(t, "content");
    const int64_t id = json_get(t, "id")->integer;
    char sb[48];
    if (m.add[id]) txl_fatal("%s: added_tokens[%zu]: id %lld is given to two added tokens", path, i, (long long)id);
    if (m.str[id] && (m.len[id] != content->len || memcmp(m.str[id], content->str, content->len)))
      txl_fatal("%s: added_tokens[%zu] ('%s') has id %lld, which model.vocab gives to another token", path, i,
                shown(content->str, content->len, sb), (long long)id);
    m.add[id] = content->str;
    m.add_len[id] = content->len;
    b->special[b->n_special++] = id;
    /* tokenizers matches the added tokens with normalized = false in the text first and those with
     * true in what is left; one pass over all of them gives the same only when no two of the two
     * kinds can overlap */
    const JsonValue *norm = json_get(t, "normalized");
    for (size_t j = 0; j < i; j++) {
      const JsonValue *u = &added->items[j], *cu = json_get(u, "content"), *nu = json_get(u, "normalized");
      if (is_true(norm) != is_true(nu) && can_overlap(content->str, content->len, cu->str, cu->len))
        txl_fatal("%s: added_tokens[%zu] and [%zu] differ in 'normalized' and can overlap in a text; not supported",
                  path, j, i);
    }
  }
  const JsonValue *merges = json_get(model, "merges");
  if (!merges || merges->type != JSON_ARRAY) txl_fatal("%s: model.merges must be an array", path);
  Str *ms = txl_malloc((2 * merges->n + 1) * sizeof *ms, "merges");
  for (size_t r = 0; r < merges->n; r++) {
    const JsonValue *v = &merges->items[r];
    if (v->type == JSON_STRING) { /* "a b" */
      const char *sp = memchr(v->str, ' ', v->len);
      if (!sp || sp == v->str || memchr(sp + 1, ' ', v->len - (size_t)(sp + 1 - v->str)) || sp + 1 == v->str + v->len)
        txl_fatal("%s: model.merges[%zu] is not two tokens separated by one space", path, r);
      ms[2 * r] = (Str){v->str, (size_t)(sp - v->str)};
      ms[2 * r + 1] = (Str){sp + 1, v->len - (size_t)(sp + 1 - v->str)};
    } else if (v->type == JSON_ARRAY && v->n == 2 && v->items[0].type == JSON_STRING &&
               v->items[1].type == JSON_STRING) { /* ["a", "b"] */
      ms[2 * r] = (Str){v->items[0].str, v->items[0].len};
      ms[2 * r + 1] = (Str){v->items[1].str, v->items[1].len};
    } else {
      txl_fatal("%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", path, r);
    }
  }
  finish(b, &m, ms, (int64_t)merges->n, path, NULL);
  free(ms);
  model_free(&m);
  json_free(&root);
}

/* ---- vocab.json + merges.txt ------------------------------------------------------------------- */

void bpe_prep_load_files(BpePrep *b, const char *vocab_path, const char *merges_path, int prefix_space) {
  memset(b, 0, sizeof *b);
  b->prefix_space = prefix_space;
  b->use_regex = 1;
  JsonValue root;
  parse_json_file(vocab_path, "vocabulary file", &root);
  Model m;
  model_init(&m, vocab_path, "the vocabulary", &root, -1, 0);
  b->special = txl_malloc(sizeof *b->special, "added tokens");
  size_t len;
  char *text = read_whole(merges_path, "merges file", &len);
  size_t n_lines = 1;
  for (size_t i = 0; i < len; i++) n_lines += text[i] == '\n';
  Str *ms = txl_malloc(2 * n_lines * sizeof *ms, "merges");
  int64_t *line_of = txl_malloc(n_lines * sizeof *line_of, "merges");
  int64_t n = 0, line_no = 0;
  for (size_t i = 0; i < len;) {
    const char *line = text + i, *nl = memchr(line, '\n', len - i);
    size_t l = nl ? (size_t)(nl - line) : len - i;
    i += l + (nl != NULL);
    line_no++;
    if (l > 0 && line[l - 1] == '\r') l--;
    if (line_no == 1 && l >= 8 && !memcmp(line, "#version", 8)) continue; /* as tokenizers: a header line */
    const char *sp = memchr(line, ' ', l);
    if (!sp || sp == line || sp + 1 == line + l || memchr(sp + 1, ' ', l - (size_t)(sp + 1 - line)))
      txl_fatal("%s:%lld: not a merge: two tokens separated by one space", merges_path, (long long)line_no);
    if (memchr(line, '\0', l)) txl_fatal("%s:%lld: a NUL byte in the line", merges_path, (long long)line_no);
    ms[2 * n] = (Str){line, (size_t)(sp - line)};
    ms[2 * n + 1] = (Str){sp + 1, l - (size_t)(sp + 1 - line)};
    line_of[n++] = line_no;
  }
  finish(b, &m, ms, n, merges_path, line_of);
  free(line_of);
  free(ms);
  free(text);
  model_free(&m);
  json_free(&root);
}

void bpe_prep_free(BpePrep *b) {
  txl_bpe_free(b->bpe);
  for (int64_t i = 0; b->tok && i < b->size; i++) free(b->tok[i]);
  free(b->tok);
  free(b->tok_len);
  free(b->merges);
  free(b->special);
  memset(b, 0, sizeof *b);
}
