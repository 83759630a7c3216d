/* The strict JSON parser: see json.h. Recursive descent with a depth limit; every allocation's
 * failure is an error of the parse. */
#include "data/prep/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const unsigned char *s;
  size_t n, i;
  char *err;
  size_t cap;
  int failed;
} Parser;

static int perr(Parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(Parser *p, const char *fmt, ...) {
  if (p->failed) return -1;
  p->failed = 1;
  size_t line = 1, col = 1;
  for (size_t k = 0; k < p->i && k < p->n; k++) {
    if (p->s[k] == '\n') {
      line++;
      col = 1;
    } else if ((p->s[k] & 0xC0) != 0x80) {
      col++;
    }
  }
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (p->cap > 0) snprintf(p->err, p->cap, "line %zu, column %zu: %s", line, col, msg);
  return -1;
}

static void skip_ws(Parser *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r')) p->i++;
}

/* One UTF-8 character at p->i (strict); returns its length, or 0. */
static int utf8_len(const unsigned char *s, size_t n) {
  const unsigned c = s[0];
  if (c < 0x80) return 1;
  int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (len == 0 || (size_t)len > n) return 0;
  for (int k = 1; k < len; k++)
    if ((s[k] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
  if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
  if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
  if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
  return len;
}

static int hex4(Parser *p, uint32_t *v) {
  if (p->n - p->i < 4) return perr(p, "a \\u escape needs four hex digits");
  *v = 0;
  for (int k = 0; k < 4; k++) {
    const unsigned char c = p->s[p->i + (size_t)k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return perr(p, "a \\u escape needs four hex digits");
    *v = *v << 4 | (uint32_t)d;
  }
  p->i += 4;
  return 0;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string at p->i (the opening quote); the decoded bytes are never longer than the source. */
static int parse_string(Parser *p, JsonValue *v) {
  p->i++;
  size_t start = p->i, end = start;
  while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->n) return perr(p, "a string is not closed");
  char *out = malloc(end - start + 1);
  if (!out) return perr(p, "out of memory");
  size_t o = 0;
  while (p->s[p->i] != '"') {
    const unsigned char c = p->s[p->i];
    if (c < 0x20) {
      free(out);
      return perr(p, "control character 0x%02X inside a string (write it as an escape)", c);
    }
    if (c != '\\') {
      const int l = utf8_len(p->s + p->i, p->n - p->i);
      if (l == 0) {
        free(out);
        return perr(p, "invalid UTF-8 (byte 0x%02X)", c);
      }
      memcpy(out + o, p->s + p->i, (size_t)l);
      o += (size_t)l;
      p->i += (size_t)l;
      continue;
    }
    p->i++;
    const unsigned char e = p->s[p->i++];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      static const char rep[] = "\"\\/\b\f\n\r\t";
      out[o++] = rep[simple - "\"\\/bfnrt"];
      continue;
    }
    if (e != 'u') {
      free(out);
      p->i--;
      return perr(p, "unknown escape '\\%c'", e >= 0x20 && e < 0x7F ? e : '?');
    }
    uint32_t cp, lo;
    if (hex4(p, &cp) != 0) {
      free(out);
      return -1;
    }
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      free(out);
      return perr(p, "lone low surrogate \\u%04X", (unsigned)cp);
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
        free(out);
        return perr(p, "high surrogate \\u%04X not followed by a low one", (unsigned)cp);
      }
      p->i += 2;
      if (hex4(p, &lo) != 0) {
        free(out);
        return -1;
      }
      if (lo < 0xDC00 || lo > 0xDFFF) {
        free(out);
        return perr(p, "high surrogate \\u%04X not followed by a low one", (unsigned)cp);
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    o += put_utf8(out + o, cp); /* at most 4 bytes from at least 6 of source */
  }
  p->i++;
  out[o] = '\0';
  v->type = JSON_STRING;
  v->str = out;
  v->len = o;
  return 0;
}

static int parse_number(Parser *p, JsonValue *v) {
  const size_t start = p->i;
  int integral = 1;
  if (p->s[p->i] == '-') p->i++;
  if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return perr(p, "a number needs a digit");
  if (p->s[p->i] == '0') {
    p->i++;
    if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') return perr(p, "a number has a leading zero");
  } else {
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->i < p->n && p->s[p->i] == '.') {
    integral = 0;
    p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return perr(p, "a digit must follow the '.'");
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    integral = 0;
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return perr(p, "an exponent needs a digit");
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  }
  char buf[64];
  const size_t len = p->i - start;
  v->type = JSON_NUMBER;
  if (len >= sizeof buf) { /* far outside any id: a value, not an integer */
    v->number = p->s[start] == '-' ? -1e300 : 1e300;
    return 0;
  }
  memcpy(buf, p->s + start, len);
  buf[len] = '\0';
  v->number = strtod(buf, NULL);
  if (integral) {
    errno = 0;
    const long long x = strtoll(buf, NULL, 10);
    if (errno == 0) {
      v->is_int = 1;
      v->integer = x;
    }
  }
  return 0;
}

static int parse_value(Parser *p, JsonValue *v, int depth);

/* The items of an array or object (p->i after the opening bracket). */
static int parse_items(Parser *p, JsonValue *v, int object, int depth) {
  const unsigned char close = object ? '}' : ']';
  size_t cap = 0;
  v->type = object ? JSON_OBJECT : JSON_ARRAY;
  skip_ws(p);
  if (p->i < p->n && p->s[p->i] == close) {
    p->i++;
    return 0;
  }
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      JsonValue *items = realloc(v->items, cap * sizeof *items);
      if (items) v->items = items;
      JsonValue *keys = items && object ? realloc(v->keys, cap * sizeof *keys) : NULL;
      if (keys) v->keys = keys;
      if (!items || (object && !keys)) return perr(p, "out of memory");
    }
    JsonValue *item = &v->items[v->n];
    memset(item, 0, sizeof *item);
    if (object) {
      JsonValue *key = &v->keys[v->n];
      memset(key, 0, sizeof *key);
      skip_ws(p);
      if (p->i >= p->n || p->s[p->i] != '"') return perr(p, "expected a key (a string) in the object");
      if (parse_string(p, key) != 0) return -1;
      v->n++; /* owned from here, freed with the object */
      skip_ws(p);
      if (p->i >= p->n || p->s[p->i] != ':') return perr(p, "expected ':' after the key");
      p->i++;
    } else {
      v->n++;
    }
    if (parse_value(p, item, depth + 1) != 0) return -1;
    skip_ws(p);
    if (p->i >= p->n) return perr(p, "the %s is not closed", object ? "object" : "array");
    if (p->s[p->i] == close) {
      p->i++;
      return 0;
    }
    if (p->s[p->i] != ',') return perr(p, "expected ',' or '%c'", close);
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) return perr(p, "a trailing comma before '%c'", close);
  }
}

static int literal(Parser *p, const char *word) {
  const size_t l = strlen(word);
  if (p->n - p->i < l || memcmp(p->s + p->i, word, l) != 0) return perr(p, "unexpected character");
  p->i += l;
  return 0;
}

static int parse_value(Parser *p, JsonValue *v, int depth) {
  if (depth > JSON_MAX_DEPTH) return perr(p, "nested more than %d deep", JSON_MAX_DEPTH);
  skip_ws(p);
  if (p->i >= p->n) return perr(p, "unexpected end of the text (a value is missing)");
  const unsigned char c = p->s[p->i];
  switch (c) {
    case '{': p->i++; return parse_items(p, v, 1, depth);
    case '[': p->i++; return parse_items(p, v, 0, depth);
    case '"': return parse_string(p, v);
    case 't': v->type = JSON_BOOL; v->boolean = 1; return literal(p, "true");
    case 'f': v->type = JSON_BOOL; v->boolean = 0; return literal(p, "false");
    case 'n': v->type = JSON_NULL; return literal(p, "null");
    default:
      if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
      if (c >= 0x20 && c < 0x7F) return perr(p, "unexpected character '%c'", c);
      return perr(p, "unexpected byte 0x%02X", c);
  }
}

int json_parse(const char *text, size_t len, JsonValue *root, char *err, size_t cap) {
  Parser p = {(const unsigned char *)text, len, 0, err, cap, 0};
  memset(root, 0, sizeof *root);
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) return perr(&p, "a byte-order mark (JSON has none)");
  int rc = parse_value(&p, root, 0);
  if (rc == 0) {
    skip_ws(&p);
    if (p.i < p.n) rc = perr(&p, "text after the value");
  }
  if (rc != 0) {
    json_free(root);
    memset(root, 0, sizeof *root);
  }
  return rc;
}

void json_free(JsonValue *v) {
  if (!v) return;
  free(v->str);
  for (size_t i = 0; i < v->n; i++) {
    if (v->items) json_free(&v->items[i]);
    if (v->keys) json_free(&v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  v->str = NULL;
  v->items = v->keys = NULL;
  v->n = 0;
}

const JsonValue *json_get(const JsonValue *obj, const char *key) {
  if (!obj || obj->type != JSON_OBJECT) return NULL;
  const size_t l = strlen(key);
  for (size_t i = 0; i < obj->n; i++)
    if (obj->keys[i].len == l && memcmp(obj->keys[i].str, key, l) == 0) return &obj->items[i];
  return NULL;
}

const char *json_type_name(JsonType t) {
  switch (t) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "true/false";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    default: return "an object";
  }
}
