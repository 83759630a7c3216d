#include "src/config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/varlen.h"
#include "dist/shard.h"
#include "src/base/error.h"
#include "src/base/show.h"
#include "src/model/attn_type.h"

typedef enum { T_INT, T_FLOAT, T_BOOL, T_STRING, T_ENUM } KeyType;

typedef enum { R_FREE, R_FIXED } ResumeClass;

typedef struct {
  const char *section, *key, *def, *help;
  KeyType type;
  double lo, hi;
  const char *lo_text, *hi_text; /* the bounds as config.def writes them, for messages and --help */
  ResumeClass resume;
  size_t offset;
  const char *const *names; /* ENUM: the name of each value (TXL_CFG_CHOICES_<key>); else NULL */
  int n_names;
} KeyInfo;

/* NAMES_<key>: each ENUM key's choices as the INI text writes them, in the order of their values. */
#define NAME_TEXT(constant, name) #name,
#define NAMES_INT(key)
#define NAMES_FLOAT(key)
#define NAMES_BOOL(key)
#define NAMES_STRING(key)
#define NAMES_ENUM(key) static const char *const NAMES_##key[] = {TXL_CFG_CHOICES_##key(NAME_TEXT)};
#define X(section, key, type, def, lo, hi, resume, help) NAMES_##type(key)
#include "src/config/config.def"
#undef X

#define CHOICES_INT(key) NULL, 0
#define CHOICES_FLOAT(key) NULL, 0
#define CHOICES_BOOL(key) NULL, 0
#define CHOICES_STRING(key) NULL, 0
#define CHOICES_ENUM(key) NAMES_##key, (int)(sizeof NAMES_##key / sizeof NAMES_##key[0])
static const KeyInfo KEYS[] = {
#define X(section, key, type, def, lo, hi, resume, help)                                                    \
  {#section, #key, def, help, T_##type, lo, hi, #lo, #hi, R_##resume, offsetof(TxlConfig, key), CHOICES_##type(key)},
#include "src/config/config.def"
#undef X
};
static const int N_KEYS = (int)(sizeof KEYS / sizeof KEYS[0]);

/* A config file is a few kilobytes; anything past this is not one (and /dev/zero must not be
 * read until memory runs out). */
#define MAX_INI_BYTES (1 << 20)
/* Text quoted from the input in a message is cut after this many bytes (messages are one line). */
#define SHOW_MAX 200

static void fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* s as it can stand in a one-line message: control bytes as \xHH, cut after SHOW_MAX bytes
 * with "...". out holds at least 4 * SHOW_MAX + 4 bytes. */
#define SHOW_LEN (4 * SHOW_MAX + 4)
static const char *show(char *out, const char *s) {
  const size_t len = strnlen(s, SHOW_MAX);
  txl_show_bytes(out, SHOW_LEN - 3, s, len, 0);
  if (s[len]) strcat(out, "...");
  return out;
}

static const KeyInfo *find_key(const char *section, const char *key) {
  for (int i = 0; i < N_KEYS; i++)
    if (strcmp(KEYS[i].section, section) == 0 && strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
  return NULL;
}

/* The key named "section.key" (len bytes of name), or NULL. */
static const KeyInfo *find_name(const char *name, size_t len) {
  for (int i = 0; i < N_KEYS; i++) {
    const size_t ls = strlen(KEYS[i].section), lk = strlen(KEYS[i].key);
    if (len == ls + 1 + lk && !strncmp(name, KEYS[i].section, ls) && name[ls] == '.' &&
        !strncmp(name + ls + 1, KEYS[i].key, lk))
      return &KEYS[i];
  }
  return NULL;
}

/* The value of ENUM key k named v, or -1. */
static int choice_of(const KeyInfo *k, const char *v) {
  for (int i = 0; i < k->n_names; i++)
    if (!strcmp(k->names[i], v)) return i;
  return -1;
}

/* k's choices as "a|b|c" (for messages and --help). */
static const char *choices_text(const KeyInfo *k, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int i = 0; i < k->n_names && used < n; i++)
    used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "|" : "", k->names[i]);
  return out;
}

/* Decimal integers only: [+-]digits (no hex, no octal reading of a leading 0, no blanks). */
static int is_int_text(const char *s) {
  if (*s == '+' || *s == '-') s++;
  if (!isdigit((unsigned char)*s)) return 0;
  while (isdigit((unsigned char)*s)) s++;
  return *s == 0;
}

/* Decimal numbers only: [+-](digits[.digits] | .digits)[(e|E)[+-]digits]. strtod alone would
 * also take hex ("0x1p-3"), "inf", "nan" and "infinity". */
static int is_decimal_text(const char *s) {
  if (*s == '+' || *s == '-') s++;
  int digits = 0;
  while (isdigit((unsigned char)*s)) s++, digits++;
  if (*s == '.') {
    s++;
    while (isdigit((unsigned char)*s)) s++, digits++;
  }
  if (!digits) return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (!isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) s++;
  }
  return *s == 0;
}

/* The shortest "%.Ng" that reads back as v: what was written for any value given with at most 17
 * significant digits (0.9999999 stays 0.9999999, never a rounded 1). */
static void format_double(double v, char *out, size_t n) {
  for (int p = 1; p <= 17; p++) {
    snprintf(out, n, "%.*g", p, v);
    if (strtod(out, NULL) == v) return;
  }
}

/* Parses `value` into the field of `k`. Returns 0 or -1 with a message (without location) that
 * quotes the value as given. */
static int set_value(TxlConfig *c, const KeyInfo *k, const char *value, char *err, size_t errlen) {
  char *field = (char *)c + k->offset;
  char shown[SHOW_LEN];
  for (const char *p = value; *p; p++) { /* a value must be writable back as INI (write_ini escapes these three) */
    const unsigned char ch = (unsigned char)*p;
    if ((ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') || ch == 0x7f) {
      fail(err, errlen, "%s.%s: '%s' holds the control character 0x%02x", k->section, k->key, show(shown, value), ch);
      return -1;
    }
  }
  switch (k->type) {
    case T_INT: {
      if (!is_int_text(value)) {
        fail(err, errlen, "%s.%s: '%s' is not an integer", k->section, k->key, show(shown, value));
        return -1;
      }
      errno = 0;
      const long long v = strtoll(value, NULL, 10);
      if (errno == ERANGE || (double)v < k->lo || (double)v > k->hi) {
        fail(err, errlen, "%s.%s = %s is out of range [%s, %s]", k->section, k->key, show(shown, value), k->lo_text,
             k->hi_text);
        return -1;
      }
      *(int *)field = (int)v;
      return 0;
    }
    case T_FLOAT: {
      if (!is_decimal_text(value)) {
        fail(err, errlen, "%s.%s: '%s' is not a decimal number", k->section, k->key, show(shown, value));
        return -1;
      }
      /* ERANGE needs no case of its own: an overflow is +-HUGE_VAL and an underflow 0 or a
       * denormal, and the range check below judges those with the text as given */
      double v = strtod(value, NULL);
      if (v < k->lo || v > k->hi) {
        fail(err, errlen, "%s.%s = %s is out of range [%s, %s]", k->section, k->key, show(shown, value), k->lo_text,
             k->hi_text);
        return -1;
      }
      if (v == 0.0) v = 0.0; /* -0 */
      *(double *)field = v;
      return 0;
    }
    case T_BOOL:
      if (!strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "yes")) {
        *(int *)field = 1;
      } else if (!strcmp(value, "false") || !strcmp(value, "0") || !strcmp(value, "no")) {
        *(int *)field = 0;
      } else {
        fail(err, errlen, "%s.%s: '%s' is not a boolean (true/false)", k->section, k->key, show(shown, value));
        return -1;
      }
      return 0;
    case T_ENUM: {
      const int v = choice_of(k, value);
      char choices[128];
      if (v < 0) {
        fail(err, errlen, "%s.%s: '%s' is not one of %s", k->section, k->key, show(shown, value),
             choices_text(k, choices, sizeof choices));
        return -1;
      }
      *(int *)field = v;
      return 0;
    }
    case T_STRING:
      if (strlen(value) >= TXL_CFG_STRLEN) {
        fail(err, errlen, "%s.%s: the value is %zu bytes, longer than %d", k->section, k->key, strlen(value),
             TXL_CFG_STRLEN - 1);
        return -1;
      }
      snprintf(field, TXL_CFG_STRLEN, "%s", value);
      return 0;
  }
  return -1;
}

/* src into dst[TXL_CFG_WHERE_LEN], cut with "..." when longer (a place in a message, never a value). */
static void copy_where(char *dst, const char *src) {
  if (strlen(src) < TXL_CFG_WHERE_LEN)
    memcpy(dst, src, strlen(src) + 1);
  else
    snprintf(dst, TXL_CFG_WHERE_LEN, "%.*s...", TXL_CFG_WHERE_LEN - 4, src);
}

/* Remembers where k was set, for the messages of txl_config_validate. */
static void record(TxlConfig *c, const KeyInfo *k, const char *where) {
  TxlCfgOrigin *o = &c->set_by.key[k - KEYS];
  copy_where(o->where, where);
  o->seq = ++c->set_by.count;
}

/* Sets k from `value` and records `where`; an error is "WHERE: problem". */
static int assign(TxlConfig *c, const KeyInfo *k, const char *value, const char *where, char *err, size_t errlen) {
  char msg[1024];
  if (set_value(c, k, value, msg, sizeof msg) != 0) {
    fail(err, errlen, "%s: %s", where, msg);
    return -1;
  }
  record(c, k, where);
  return 0;
}

void txl_config_defaults(TxlConfig *c) {
  memset(c, 0, sizeof *c);
  char err[1024];
  for (int i = 0; i < N_KEYS; i++)
    if (set_value(c, &KEYS[i], KEYS[i].def, err, sizeof err) != 0) {
      fprintf(stderr, "txl: internal error: bad default: %s\n", err);
      abort();
    }
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
  return s;
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t'; }

/* A comment starts at '#' or ';' at the start of the text or after a blank. */
static char *comment_start(char *s) {
  for (char *p = s; *p; p++)
    if ((*p == '#' || *p == ';') && (p == s || is_blank(p[-1]))) return p;
  return NULL;
}

/* The value after '=' (blanks already dropped at both ends) as it stands: a quoted one unquoted
 * and unescaped in place, an unquoted one with its comment cut. Returns NULL with a message. */
static char *parse_value(char *v, char *msg, size_t n) {
  if (*v != '"') {
    char *hash = comment_start(v);
    if (hash) *hash = 0;
    return trim(v);
  }
  char *out = v, *p = v + 1;
  for (;; p++) {
    if (!*p || (*p == '\\' && !p[1])) { /* (a backslash ending the line escapes nothing) */
      fail(msg, n, "unterminated quote (a quoted value ends with '\"' on the same line)");
      return NULL;
    }
    if (*p == '"') break;
    if (*p != '\\') {
      *out++ = *p;
      continue;
    }
    switch (*++p) {
      case '"': *out++ = '"'; break;
      case '\\': *out++ = '\\'; break;
      case 'n': *out++ = '\n'; break;
      case 't': *out++ = '\t'; break;
      case 'r': *out++ = '\r'; break;
      default:
        fail(msg, n, "unknown escape '\\%c' in a quoted value (known: \\\" \\\\ \\n \\t \\r)", *p);
        return NULL;
    }
  }
  char *rest = p + 1;
  while (is_blank(*rest)) rest++;
  if (*rest && *rest != '#' && *rest != ';') {
    char shown[SHOW_LEN];
    fail(msg, n, "text after the closing quote: '%s'", show(shown, rest));
    return NULL;
  }
  *out = 0;
  return v;
}

/* The sections in table order, as "data, model, ...". */
static const char *section_list(char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int i = 0; i < N_KEYS && used < n; i++)
    if (i == 0 || strcmp(KEYS[i].section, KEYS[i - 1].section))
      used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", KEYS[i].section);
  return out;
}

/* One line (NUL-terminated, without its line end). `section` is the current one ("" before
 * the first header); line_of[] the line each key was set on in this text. */
static int parse_line(TxlConfig *c, char *line, const char *name, int lineno, const char **section, int *line_of,
                      char *err, size_t errlen) {
  char shown[SHOW_LEN], msg[1024];
  for (const char *p = line; *p; p++) {
    const unsigned char ch = (unsigned char)*p;
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
      fail(err, errlen, "%s:%d: control character 0x%02x (not a text line)", name, lineno, ch);
      return -1;
    }
  }
  char *s = trim(line);
  if (!*s || *s == '#' || *s == ';') return 0;
  if (*s == '[') {
    char *close = strchr(s, ']');
    char *rest = close ? close + 1 : NULL;
    while (rest && is_blank(*rest)) rest++;
    if (!close || (*rest && *rest != '#' && *rest != ';')) {
      fail(err, errlen, "%s:%d: malformed section header '%s' (expected [name], then at most a comment)", name,
           lineno, show(shown, s));
      return -1;
    }
    *close = 0;
    const char *sec = trim(s + 1);
    for (int i = 0; i < N_KEYS; i++)
      if (!strcmp(KEYS[i].section, sec)) {
        *section = KEYS[i].section;
        return 0;
      }
    char sections[128];
    fail(err, errlen, "%s:%d: unknown section [%s] (sections: %s)", name, lineno, show(shown, sec),
         section_list(sections, sizeof sections));
    return -1;
  }
  char *eq = strchr(s, '=');
  if (!eq) {
    fail(err, errlen, "%s:%d: expected 'key = value', got '%s'", name, lineno, show(shown, s));
    return -1;
  }
  *eq = 0;
  char *key = trim(s);
  if (!*key) {
    fail(err, errlen, "%s:%d: no key before '='", name, lineno);
    return -1;
  }
  if (!**section) {
    fail(err, errlen, "%s:%d: key '%s' outside any [section]", name, lineno, show(shown, key));
    return -1;
  }
  const KeyInfo *k = find_key(*section, key);
  if (!k) {
    fail(err, errlen, "%s:%d: unknown key '%s' in section [%s] (see txl-train --help)", name, lineno,
         show(shown, key), *section);
    return -1;
  }
  const int idx = (int)(k - KEYS);
  if (line_of[idx]) {
    fail(err, errlen, "%s:%d: %s.%s is set twice, on lines %d and %d", name, lineno, k->section, k->key,
         line_of[idx], lineno);
    return -1;
  }
  line_of[idx] = lineno;
  char *value = parse_value(trim(eq + 1), msg, sizeof msg);
  if (!value) {
    fail(err, errlen, "%s:%d: %s.%s: %s", name, lineno, k->section, k->key, msg);
    return -1;
  }
  if (set_value(c, k, value, msg, sizeof msg) != 0) {
    fail(err, errlen, "%s:%d: %s", name, lineno, msg);
    return -1;
  }
  char where[TXL_CFG_WHERE_LEN + 16];
  snprintf(where, sizeof where, "%s:%d", name, lineno);
  record(c, k, where);
  return 0;
}

int txl_config_load_ini_bytes(TxlConfig *c, const char *data, size_t len, const char *name, char *err,
                              size_t errlen) {
  if (!c->set_by.source[0]) copy_where(c->set_by.source, name);
  char *buf = txl_malloc(len + 1, "config text");
  memcpy(buf, data, len);
  buf[len] = 0;
  size_t pos = 0;
  if (len >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) pos = 3; /* a UTF-8 byte-order mark: editors write one */
  int line_of[TXL_CFG_N_KEYS] = {0};
  const char *section = "";
  int rc = 0;
  for (int lineno = 1; pos < len && rc == 0; lineno++) {
    char *line = buf + pos;
    char *nl = memchr(line, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - line) : len - pos;
    pos += n + (nl ? 1 : 0);
    if (memchr(line, 0, n)) {
      fail(err, errlen, "%s:%d: NUL byte (a config is text; nothing after it on the line would be read)", name,
           lineno);
      rc = -1;
      break;
    }
    line[n] = 0;
    if (n && line[n - 1] == '\r') line[n - 1] = 0; /* CRLF */
    rc = parse_line(c, line, name, lineno, &section, line_of, err, errlen);
  }
  free(buf);
  return rc;
}

int txl_config_load_ini(TxlConfig *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(err, errlen, "%s: cannot open config: %s", path, strerror(errno));
    return -1;
  }
  char *buf = txl_malloc((size_t)MAX_INI_BYTES + 1, "config file");
  const size_t len = fread(buf, 1, (size_t)MAX_INI_BYTES + 1, f);
  int rc = 0;
  if (ferror(f)) {
    fail(err, errlen, "%s: cannot read config: %s", path, strerror(errno));
    rc = -1;
  } else if (len > MAX_INI_BYTES) {
    fail(err, errlen, "%s: larger than %d bytes: not a config file", path, MAX_INI_BYTES);
    rc = -1;
  }
  fclose(f);
  if (rc == 0) rc = txl_config_load_ini_bytes(c, buf, len, path, err, errlen);
  free(buf);
  return rc;
}

int txl_config_load_ini_text(TxlConfig *c, const char *text, const char *name, char *err, size_t errlen) {
  return txl_config_load_ini_bytes(c, text, strlen(text), name, err, errlen);
}

int txl_config_set_key(TxlConfig *c, const char *name, const char *value, const char *where, char *err,
                       size_t errlen) {
  const KeyInfo *k = find_name(name, strlen(name));
  if (!k) {
    char shown[SHOW_LEN];
    fail(err, errlen, "%s: unknown key %s (see txl-train --help)", where, show(shown, name));
    return -1;
  }
  return assign(c, k, value, where, err, errlen);
}

int txl_config_set(TxlConfig *c, const char *assignment, char *err, size_t errlen) {
  char where[TXL_CFG_WHERE_LEN], shown[SHOW_LEN], full[SHOW_LEN + 8];
  snprintf(full, sizeof full, "--set %s", show(shown, assignment));
  copy_where(where, full);
  const char *eq = strchr(assignment, '=');
  const char *dot = strchr(assignment, '.');
  if (!eq || !dot || dot > eq) {
    fail(err, errlen, "%s: expected section.key=value", where);
    return -1;
  }
  const char *b = assignment, *e = eq; /* the name without the blanks around it */
  while (b < e && isspace((unsigned char)*b)) b++;
  while (e > b && isspace((unsigned char)e[-1])) e--;
  const KeyInfo *k = find_name(b, (size_t)(e - b));
  if (!k) {
    fail(err, errlen, "%s: unknown key (see txl-train --help)", where);
    return -1;
  }
  char *value = txl_malloc(strlen(eq + 1) + 1, "--set value");
  strcpy(value, eq + 1);
  const int rc = assign(c, k, trim(value), where, err, errlen);
  free(value);
  return rc;
}

int txl_config_eval_mem_len(const TxlConfig *c) { return c->eval_mem_len < 0 ? c->mem_len : c->eval_mem_len; }
int txl_config_eval_clamp_len(const TxlConfig *c) { return c->eval_clamp_len == -2 ? c->clamp_len : c->eval_clamp_len; }

int txl_config_cutoffs(const TxlConfig *c, int n_token, int *cutoffs, char *err, size_t errlen) {
  int n = 0;
  const char *p = c->cutoffs;
  while (*p == ' ') p++;
  while (*p) {
    char *end;
    errno = 0;
    const long v = strtol(p, &end, 10);
    if (end == p || errno) {
      fail(err, errlen, "model.cutoffs = '%s': expected increasing token ids separated by commas", c->cutoffs);
      return -1;
    }
    if (n == TXL_CFG_MAX_CUTOFFS) {
      fail(err, errlen, "model.cutoffs = '%s': at most %d cutoffs", c->cutoffs, TXL_CFG_MAX_CUTOFFS);
      return -1;
    }
    if (n > 0 && v <= cutoffs[n - 1]) {
      fail(err, errlen, "model.cutoffs = '%s': %ld does not follow %d (cutoffs increase)", c->cutoffs, v,
           cutoffs[n - 1]);
      return -1;
    }
    if (v < 1 || v > INT_MAX || (n_token > 0 && v >= n_token)) {
      if (n_token > 0)
        fail(err, errlen, "model.cutoffs = '%s': %ld is outside the vocabulary's (0, %d)", c->cutoffs, v, n_token);
      else
        fail(err, errlen, "model.cutoffs = '%s': %ld is not a token id in [1, %d]", c->cutoffs, v, INT_MAX);
      return -1;
    }
    cutoffs[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') {
      p++;
      while (*p == ' ') p++;
      if (!*p) { /* "20000,": a cutoff was meant to follow */
        fail(err, errlen, "model.cutoffs = '%s': a comma with no token id after it", c->cutoffs);
        return -1;
      }
    }
  }
  const int d_embed = c->d_embed > 0 ? c->d_embed : c->d_model;
  long width = d_embed;
  for (int i = 0; i < n; i++) width /= c->div_val;
  if (width < 1) {
    fail(err, errlen, "model.d_embed = %d with div_val = %d leaves the last of %d clusters no features", d_embed,
         c->div_val, n + 1);
    return -1;
  }
  if (c->div_val != 1 && n == 0) {
    fail(err, errlen, "model.div_val = %d needs model.cutoffs (clusters to divide the width among)", c->div_val);
    return -1;
  }
  return n;
}

/* ---- combinations ---------------------------------------------------------------------------- */

/* The keys a combination's message is about (up to 3, the rest -1). */
typedef struct {
  int k[5];
} KeySet;
#define ON(...) ((KeySet){{__VA_ARGS__, -1, -1}})

/* A bad combination is blamed on the setting that completed it: the last-set of its keys (a
 * --set after the file, a later line), or the config's source when all hold their defaults. */
static const char *blame(const TxlConfig *c, KeySet keys) {
  const TxlCfgOrigin *last = NULL;
  for (int i = 0; i < 5 && keys.k[i] >= 0; i++) {
    const TxlCfgOrigin *o = &c->set_by.key[keys.k[i]];
    if (o->seq > 0 && (!last || o->seq > last->seq)) last = o;
  }
  return last ? last->where : c->set_by.source;
}

static int refuse(const TxlConfig *c, KeySet keys, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int refuse(const TxlConfig *c, KeySet keys, char *err, size_t errlen, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *where = blame(c, keys);
  fail(err, errlen, "%s%s%s", where, *where ? ": " : "", msg);
  return -1;
}

/* Rows of the model's matrix products: (segment + memory) rows x columns on a rank, passed to the
 * GEMMs as an int. */
static int64_t product_rows(int tgt_len, int mem_len, int batch, int world) {
  return ((int64_t)tgt_len + (mem_len > 0 ? mem_len : 0)) * txl_shard_max(batch, world);
}

#define K(key) TXL_CFG_KEY_##key

int txl_config_validate_eval(const TxlConfig *c, int world, char *err, size_t errlen) {
  int cut[TXL_CFG_MAX_CUTOFFS];
  char msg[1024];
  if (txl_config_cutoffs(c, c->n_token, cut, msg, sizeof msg) < 0)
    return refuse(c, ON(K(cutoffs), K(div_val), K(d_embed)), err, errlen, "%s", msg);
  if (c->d_model % 2)
    return refuse(c, ON(K(d_model)), err, errlen,
                  "model.d_model = %d must be even (relative positions use sin/cos halves)", c->d_model);
  if (c->d_embed == 0)
    return refuse(c, ON(K(d_embed)), err, errlen, "model.d_embed = 0: an embedding needs a width (-1: d_model)");
  /* every rank holds at least one column (dist/shard.h: floor or ceil of B / P each) */
  if (c->eval_batch_size < world)
    return refuse(c, ON(K(eval_batch_size)), err, errlen,
                  "eval.eval_batch_size = %d is fewer columns than the %d ranks (each rank needs one)",
                  c->eval_batch_size, world);
  if (c->eval_same_length && txl_config_eval_mem_len(c) == 0)
    return refuse(c, ON(K(eval_same_length), K(eval_mem_len), K(mem_len)), err, errlen,
                  "eval.eval_same_length needs an evaluation memory (eval.eval_mem_len > 0)");
  if (c->max_eval_steps == 0)
    return refuse(c, ON(K(max_eval_steps)), err, errlen,
                  "eval.max_eval_steps = 0 evaluates no tokens (no loss, never a best checkpoint); -1: the whole "
                  "split, or >= 1 segments");
  const int64_t rows = product_rows(c->eval_tgt_len, txl_config_eval_mem_len(c), c->eval_batch_size, world);
  if (rows > INT_MAX)
    return refuse(c, ON(K(eval_tgt_len), K(eval_mem_len), K(eval_batch_size)), err, errlen,
                  "eval.eval_tgt_len %d + %d memory rows x %d columns on a rank = %lld rows of a matrix "
                  "product, more than %d (a 32-bit int)",
                  c->eval_tgt_len, txl_config_eval_mem_len(c), txl_shard_max(c->eval_batch_size, world),
                  (long long)rows, INT_MAX);
  return 0;
}

int txl_config_validate(const TxlConfig *c, int world, char *err, size_t errlen) {
  if (txl_config_validate_eval(c, world, err, errlen) != 0) return -1;
  if (c->batch_size < world)
    return refuse(c, ON(K(batch_size)), err, errlen,
                  "train.batch_size = %d is fewer columns than the %d ranks (each rank needs one)", c->batch_size,
                  world);
  const int train_rows = txl_varlen_max_rows(c->tgt_len, c->varlen); /* tgt_len + 15 with varlen */
  const int64_t rows = product_rows(train_rows, c->mem_len, c->batch_size, world);
  if (rows > INT_MAX)
    return refuse(c, ON(K(tgt_len), K(mem_len), K(batch_size)), err, errlen,
                  "train.tgt_len %d%s + train.mem_len %d rows x %d columns on a rank = %lld rows of a matrix "
                  "product, more than %d (a 32-bit int)",
                  c->tgt_len, c->varlen ? " (+ 15 with train.varlen)" : "", c->mem_len,
                  txl_shard_max(c->batch_size, world), (long long)rows, INT_MAX);
  if (c->warmup_step > c->max_step)
    return refuse(c, ON(K(warmup_step), K(max_step)), err, errlen, "train.warmup_step = %d exceeds train.max_step = %d",
                  c->warmup_step, c->max_step);
  if (!c->work_dir[0]) /* "" names no folder: mkdir("") failed, and a checkpoint would be "/ckpt-..." */
    return refuse(c, ON(K(work_dir)), err, errlen,
                  "run.work_dir is empty (the run's files need a folder; '.' is this one)");
  if (txl_attn_key_bias((TxlAttnType)c->attn_type) && c->device == TXL_DEVICE_CUDA &&
      (c->precision == TXL_PRECISION_BF16 || c->precision == TXL_PRECISION_FP16))
    return refuse(c, ON(K(attn_type), K(precision)), err, errlen,
                  "model.attn_type = 1 keeps its per-key bias r_bias in fp32 through the attention: "
                  "run.precision = %s is not supported with it (use fp32 or tf32)",
                  c->precision == TXL_PRECISION_BF16 ? "bf16" : "fp16");
  if (txl_attn_adds_every_layer((TxlAttnType)c->attn_type)) { /* the original adds r_emb[-qlen:]: a segment longer than its table fails there */
    const int max_klen = c->tgt_len + c->mem_len;
    if (train_rows > max_klen || c->eval_tgt_len > max_klen)
      return refuse(c, ON(K(attn_type), K(tgt_len), K(eval_tgt_len)), err, errlen,
                    "model.attn_type = 3 learns one position per row of train.tgt_len + train.mem_len = %d, "
                    "but segments of %d rows%s would need more", max_klen,
                    train_rows > c->eval_tgt_len ? train_rows : c->eval_tgt_len,
                    train_rows > max_klen ? " (train.tgt_len with train.varlen)" : " (eval.eval_tgt_len)");
  }
  if (c->same_length && c->mem_len == 0)
    return refuse(c, ON(K(same_length), K(mem_len)), err, errlen,
                  "model.same_length needs train.mem_len > 0 (with no memory every key would be masked)");
  char a[32], b[32];
  format_double(c->lr, a, sizeof a);
  if ((float)c->lr == 0.0f) /* Adam takes lr in single precision */
    return refuse(c, ON(K(lr)), err, errlen, "train.lr = %s would train nothing (%s)", a,
                  c->lr == 0.0 ? "the parameters never change"
                               : "it is 0 in single precision, as the optimizer uses it");
  if (c->eta_min > c->lr) {
    format_double(c->eta_min, b, sizeof b);
    return refuse(c, ON(K(eta_min), K(lr)), err, errlen, "train.eta_min = %s exceeds train.lr = %s", b, a);
  }
  if (c->scheduler == TXL_SCHEDULER_DEV_PERF && c->eval_interval == 0)
    return refuse(c, ON(K(scheduler), K(eval_interval)), err, errlen,
                  "train.scheduler = dev_perf lowers the rate on validation losses, but train.eval_interval = 0 "
                  "validates only at the end: set train.eval_interval > 0");
  if (c->decay_rate <= 0.0 || c->decay_rate >= 1.0) {
    format_double(c->decay_rate, b, sizeof b);
    return refuse(c, ON(K(decay_rate)), err, errlen, "train.decay_rate = %s must lie in (0, 1)", b);
  }
  int exponent = 0;
  if (frexp(c->loss_scale_init, &exponent) != 0.5) { /* a power of two: x = 0.5 * 2^e exactly */
    return refuse(c, ON(K(loss_scale_init)), err, errlen,
                  "train.loss_scale_init = %.17g is not a power of two (scaling by one is exact in binary floating "
                  "point)",
                  c->loss_scale_init);
  }
  return 0;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static void format_value(const TxlConfig *c, const KeyInfo *k, char *out, size_t n) {
  const char *field = (const char *)c + k->offset;
  switch (k->type) {
    case T_INT: snprintf(out, n, "%d", *(const int *)field); break;
    case T_FLOAT: format_double(*(const double *)field, out, n); break;
    case T_BOOL: snprintf(out, n, "%s", *(const int *)field ? "true" : "false"); break;
    case T_STRING: snprintf(out, n, "%s", field); break;
    case T_ENUM: snprintf(out, n, "%s", k->names[*(const int *)field]); break;
  }
}

/* Whether a string must be quoted to read back as itself. */
static int needs_quotes(const char *s) {
  if (!*s) return 0;
  if (is_blank(s[0]) || is_blank(s[strlen(s) - 1]) || s[0] == '"') return 1;
  for (const char *p = s; *p; p++)
    if (*p == '#' || *p == ';' || (unsigned char)*p < 0x20) return 1;
  return 0;
}

/* v as an INI value: quoted and escaped when needed. out holds 2 * strlen(v) + 3 bytes. */
static void ini_value(const char *v, char *out) {
  if (!needs_quotes(v)) {
    strcpy(out, v);
    return;
  }
  char *o = out;
  *o++ = '"';
  for (const char *p = v; *p; p++) {
    switch (*p) {
      case '"': *o++ = '\\', *o++ = '"'; break;
      case '\\': *o++ = '\\', *o++ = '\\'; break;
      case '\n': *o++ = '\\', *o++ = 'n'; break;
      case '\t': *o++ = '\\', *o++ = 't'; break;
      case '\r': *o++ = '\\', *o++ = 'r'; break;
      default: *o++ = *p;
    }
  }
  *o++ = '"';
  *o = 0;
}

int txl_config_diff(const TxlConfig *a, const TxlConfig *b, int fixed_only, char *out, size_t n) {
  int count = 0;
  size_t used = 0;
  if (n) out[0] = 0;
  for (int i = 0; i < N_KEYS; i++) {
    const KeyInfo *k = &KEYS[i];
    if (fixed_only && k->resume != R_FIXED) continue;
    char va[TXL_CFG_STRLEN + 8], vb[TXL_CFG_STRLEN + 8];
    format_value(a, k, va, sizeof va);
    format_value(b, k, vb, sizeof vb);
    if (!strcmp(va, vb)) continue;
    if (used < n)
      used += (size_t)snprintf(out + used, n - used, "%s%s.%s %s -> %s", count ? "; " : "", k->section, k->key,
                               *va ? va : "\"\"", *vb ? vb : "\"\"");
    count++;
  }
  return count;
}

void txl_config_write_ini(const TxlConfig *c, FILE *f, int mark_changed) {
  TxlConfig d;
  txl_config_defaults(&d);
  const char *section = "";
  for (int i = 0; i < N_KEYS; i++) {
    const KeyInfo *k = &KEYS[i];
    if (strcmp(section, k->section)) {
      fprintf(f, "%s[%s]\n", i ? "\n" : "", k->section);
      section = k->section;
    }
    char v[TXL_CFG_STRLEN + 8], dv[TXL_CFG_STRLEN + 8], q[2 * TXL_CFG_STRLEN + 24];
    format_value(c, k, v, sizeof v);
    format_value(&d, k, dv, sizeof dv);
    ini_value(v, q);
    if (mark_changed && strcmp(v, dv))
      fprintf(f, "%-18s = %-24s # default %s\n", k->key, q, dv);
    else
      fprintf(f, "%-18s = %s\n", k->key, q);
  }
}

void txl_config_print_help(FILE *f) {
  const char *section = "";
  for (int i = 0; i < N_KEYS; i++) {
    const KeyInfo *k = &KEYS[i];
    if (strcmp(section, k->section)) {
      fprintf(f, "\n  [%s]\n", k->section);
      section = k->section;
    }
    char range[96] = "";
    if (k->type == T_INT || k->type == T_FLOAT)
      snprintf(range, sizeof range, " range [%s, %s]", k->lo_text, k->hi_text);
    char choices[80];
    if (k->type == T_ENUM) snprintf(range, sizeof range, " one of %s", choices_text(k, choices, sizeof choices));
    static const char *tn[] = {"int", "float", "bool", "string", "enum"};
    fprintf(f, "    %-18s %-6s default %s%s%s\n        %s\n", k->key, tn[k->type], *k->def ? k->def : "\"\"", range,
            k->resume == R_FIXED ? ", fixed on resume" : "", k->help);
  }
}

const char *txl_config_choice_name(int key, int v) { return KEYS[key].names[v]; }

int txl_config_choice_value(int key, const char *name) { return choice_of(&KEYS[key], name); }
