#include "src/config/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/base/show.h"
#include "src/config/config_internal.h"

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
  int numbered; /* ENUM_NUM: a value may also be written as its number (0 .. n_names - 1) */
} KeyInfo;

/* NAMES_<key>: each ENUM key's choices as the INI text writes them, in the order of their values. */
#define NAME_TEXT(constant, name) #name,
#define NAMES_INT(key)
#define NAMES_FLOAT(key)
#define NAMES_BOOL(key)
#define NAMES_STRING(key)
#define NAMES_ENUM(key) static const char *const NAMES_##key[] = {TXL_CFG_CHOICES_##key(NAME_TEXT)};
#define NAMES_ENUM_NUM(key) NAMES_ENUM(key)
#define X(section, key, type, def, lo, hi, resume, help) NAMES_##type(key)
#include "src/config/config.def"
#undef X

#define CHOICES_INT(key) NULL, 0, 0
#define CHOICES_FLOAT(key) NULL, 0, 0
#define CHOICES_BOOL(key) NULL, 0, 0
#define CHOICES_STRING(key) NULL, 0, 0
#define CHOICES_ENUM(key) NAMES_##key, (int)(sizeof NAMES_##key / sizeof NAMES_##key[0]), 0
#define CHOICES_ENUM_NUM(key) NAMES_##key, (int)(sizeof NAMES_##key / sizeof NAMES_##key[0]), 1
/* config.def's type as KeyType: an ENUM_NUM key is an ENUM (its `numbered` says the rest) */
#define KIND_INT T_INT
#define KIND_FLOAT T_FLOAT
#define KIND_BOOL T_BOOL
#define KIND_STRING T_STRING
#define KIND_ENUM T_ENUM
#define KIND_ENUM_NUM T_ENUM
static const KeyInfo KEYS[] = {
#define X(section, key, type, def, lo, hi, resume, help)                                                    \
  {#section, #key, def, help, KIND_##type, lo, hi, #lo, #hi, R_##resume, offsetof(TxlConfig, key), CHOICES_##type(key)},
#include "src/config/config.def"
#undef X
};
static const int N_KEYS = (int)(sizeof KEYS / sizeof KEYS[0]);

/* A config file is a few kilobytes; anything past this is not one (and /dev/zero must not be
 * read until memory runs out). */
#define MAX_INI_BYTES (1 << 20)
/* Text quoted from the input in a message is cut after this many bytes (messages are one line). */
#define SHOW_MAX 200

void txl_cfg_fail(char *err, size_t errlen, const char *fmt, ...) {
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

/* Decimal integers only: [+-]digits (no hex, no octal reading of a leading 0, no blanks). */
static int is_int_text(const char *s) {
  if (*s == '+' || *s == '-') s++;
  if (!isdigit((unsigned char)*s)) return 0;
  while (isdigit((unsigned char)*s)) s++;
  return *s == 0;
}

/* The value of ENUM key k named v (or, k numbered, written as its number as an INT key reads
 * one: "1", "+1", "01" when that is 0 .. n_names - 1), or -1. */
static int choice_of(const KeyInfo *k, const char *v) {
  for (int i = 0; i < k->n_names; i++)
    if (!strcmp(k->names[i], v)) return i;
  if (!k->numbered || !is_int_text(v)) return -1;
  errno = 0;
  const long long i = strtoll(v, NULL, 10);
  return errno == 0 && i >= 0 && i < k->n_names ? (int)i : -1;
}

/* k's choices as "a|b|c" (for messages and --help); a numbered key's "a|b|c or their numbers 0-2". */
static const char *choices_text(const KeyInfo *k, char *out, size_t n) {
  size_t used = 0;
  out[0] = 0;
  for (int i = 0; i < k->n_names && used < n; i++)
    used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "|" : "", k->names[i]);
  if (k->numbered && used < n) snprintf(out + used, n - used, " or their numbers 0-%d", k->n_names - 1);
  return out;
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

void txl_cfg_format_double(double v, char *out, size_t n) {
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
      txl_cfg_fail(err, errlen, "%s.%s: '%s' holds the control character 0x%02x", k->section, k->key, show(shown, value), ch);
      return -1;
    }
  }
  switch (k->type) {
    case T_INT: {
      if (!is_int_text(value)) {
        txl_cfg_fail(err, errlen, "%s.%s: '%s' is not an integer", k->section, k->key, show(shown, value));
        return -1;
      }
      errno = 0;
      const long long v = strtoll(value, NULL, 10);
      if (errno == ERANGE || (double)v < k->lo || (double)v > k->hi) {
        txl_cfg_fail(err, errlen, "%s.%s = %s is out of range [%s, %s]", k->section, k->key, show(shown, value), k->lo_text,
             k->hi_text);
        return -1;
      }
      *(int *)field = (int)v;
      return 0;
    }
    case T_FLOAT: {
      if (!is_decimal_text(value)) {
        txl_cfg_fail(err, errlen, "%s.%s: '%s' is not a decimal number", k->section, k->key, show(shown, value));
        return -1;
      }
      /* ERANGE needs no case of its own: an overflow is +-HUGE_VAL and an underflow 0 or a
       * denormal, and the range check below judges those with the text as given */
      double v = strtod(value, NULL);
      if (v < k->lo || v > k->hi) {
        txl_cfg_fail(err, errlen, "%s.%s = %s is out of range [%s, %s]", k->section, k->key, show(shown, value), k->lo_text,
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
        txl_cfg_fail(err, errlen, "%s.%s: '%s' is not a boolean (true/false)", k->section, k->key, show(shown, value));
        return -1;
      }
      return 0;
    case T_ENUM: {
      const int v = choice_of(k, value);
      char choices[160];
      if (v < 0) {
        txl_cfg_fail(err, errlen, "%s.%s: '%s' is not one of %s", k->section, k->key, show(shown, value),
             choices_text(k, choices, sizeof choices));
        return -1;
      }
      *(int *)field = v;
      return 0;
    }
    case T_STRING:
      if (strlen(value) >= TXL_CFG_STRLEN) {
        txl_cfg_fail(err, errlen, "%s.%s: the value is %zu bytes, longer than %d", k->section, k->key, strlen(value),
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
    txl_cfg_fail(err, errlen, "%s: %s", where, msg);
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
      txl_cfg_fail(msg, n, "unterminated quote (a quoted value ends with '\"' on the same line)");
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
        txl_cfg_fail(msg, n, "unknown escape '\\%c' in a quoted value (known: \\\" \\\\ \\n \\t \\r)", *p);
        return NULL;
    }
  }
  char *rest = p + 1;
  while (is_blank(*rest)) rest++;
  if (*rest && *rest != '#' && *rest != ';') {
    char shown[SHOW_LEN];
    txl_cfg_fail(msg, n, "text after the closing quote: '%s'", show(shown, rest));
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
      txl_cfg_fail(err, errlen, "%s:%d: control character 0x%02x (not a text line)", name, lineno, ch);
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
      txl_cfg_fail(err, errlen, "%s:%d: malformed section header '%s' (expected [name], then at most a comment)", name,
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
    txl_cfg_fail(err, errlen, "%s:%d: unknown section [%s] (sections: %s)", name, lineno, show(shown, sec),
         section_list(sections, sizeof sections));
    return -1;
  }
  char *eq = strchr(s, '=');
  if (!eq) {
    txl_cfg_fail(err, errlen, "%s:%d: expected 'key = value', got '%s'", name, lineno, show(shown, s));
    return -1;
  }
  *eq = 0;
  char *key = trim(s);
  if (!*key) {
    txl_cfg_fail(err, errlen, "%s:%d: no key before '='", name, lineno);
    return -1;
  }
  if (!**section) {
    txl_cfg_fail(err, errlen, "%s:%d: key '%s' outside any [section]", name, lineno, show(shown, key));
    return -1;
  }
  const KeyInfo *k = find_key(*section, key);
  if (!k) {
    txl_cfg_fail(err, errlen, "%s:%d: unknown key '%s' in section [%s] (see txl-train --help)", name, lineno,
         show(shown, key), *section);
    return -1;
  }
  const int idx = (int)(k - KEYS);
  if (line_of[idx]) {
    txl_cfg_fail(err, errlen, "%s:%d: %s.%s is set twice, on lines %d and %d", name, lineno, k->section, k->key,
         line_of[idx], lineno);
    return -1;
  }
  line_of[idx] = lineno;
  char *value = parse_value(trim(eq + 1), msg, sizeof msg);
  if (!value) {
    txl_cfg_fail(err, errlen, "%s:%d: %s.%s: %s", name, lineno, k->section, k->key, msg);
    return -1;
  }
  if (set_value(c, k, value, msg, sizeof msg) != 0) {
    txl_cfg_fail(err, errlen, "%s:%d: %s", name, lineno, msg);
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
      txl_cfg_fail(err, errlen, "%s:%d: NUL byte (a config is text; nothing after it on the line would be read)", name,
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
    txl_cfg_fail(err, errlen, "%s: cannot open config: %s", path, strerror(errno));
    return -1;
  }
  char *buf = txl_malloc((size_t)MAX_INI_BYTES + 1, "config file");
  const size_t len = fread(buf, 1, (size_t)MAX_INI_BYTES + 1, f);
  int rc = 0;
  if (ferror(f)) {
    txl_cfg_fail(err, errlen, "%s: cannot read config: %s", path, strerror(errno));
    rc = -1;
  } else if (len > MAX_INI_BYTES) {
    txl_cfg_fail(err, errlen, "%s: larger than %d bytes: not a config file", path, MAX_INI_BYTES);
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
    txl_cfg_fail(err, errlen, "%s: unknown key %s (see txl-train --help)", where, show(shown, name));
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
    txl_cfg_fail(err, errlen, "%s: expected section.key=value", where);
    return -1;
  }
  const char *b = assignment, *e = eq; /* the name without the blanks around it */
  while (b < e && isspace((unsigned char)*b)) b++;
  while (e > b && isspace((unsigned char)e[-1])) e--;
  const KeyInfo *k = find_name(b, (size_t)(e - b));
  if (!k) {
    txl_cfg_fail(err, errlen, "%s: unknown key (see txl-train --help)", where);
    return -1;
  }
  char *value = txl_malloc(strlen(eq + 1) + 1, "--set value");
  strcpy(value, eq + 1);
  const int rc = assign(c, k, trim(value), where, err, errlen);
  free(value);
  return rc;
}

/* ---- writing ----------------------------------------------------------------------------------- */

static void format_value(const TxlConfig *c, const KeyInfo *k, char *out, size_t n) {
  const char *field = (const char *)c + k->offset;
  switch (k->type) {
    case T_INT: snprintf(out, n, "%d", *(const int *)field); break;
    case T_FLOAT: txl_cfg_format_double(*(const double *)field, out, n); break;
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
    char range[192] = "";
    if (k->type == T_INT || k->type == T_FLOAT)
      snprintf(range, sizeof range, " range [%s, %s]", k->lo_text, k->hi_text);
    char choices[160];
    if (k->type == T_ENUM) snprintf(range, sizeof range, " one of %s", choices_text(k, choices, sizeof choices));
    static const char *tn[] = {"int", "float", "bool", "string", "enum"};
    fprintf(f, "    %-18s %-6s default %s%s%s\n        %s\n", k->key, tn[k->type], *k->def ? k->def : "\"\"", range,
            k->resume == R_FIXED ? ", fixed on resume" : "", k->help);
  }
}

const char *txl_config_choice_name(int key, int v) { return KEYS[key].names[v]; }

int txl_config_choice_value(int key, const char *name) { return choice_of(&KEYS[key], name); }
