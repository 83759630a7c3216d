#include "src/config/config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_INT, T_FLOAT, T_BOOL, T_STRING, T_ENUM } KeyType;

typedef enum { R_FREE, R_FIXED } ResumeClass;

typedef struct {
  const char *section, *key, *def, *choices, *help;
  KeyType type;
  double lo, hi;
  ResumeClass resume;
  size_t offset;
} KeyInfo;

static const KeyInfo KEYS[] = {
#define X(section, key, type, def, lo, hi, choices, resume, help) \
  {#section, #key, def, choices, help, T_##type, lo, hi, R_##resume, offsetof(TxlConfig, key)},
#include "src/config/config.def"
#undef X
};
static const int N_KEYS = (int)(sizeof KEYS / sizeof KEYS[0]);

static void fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static const KeyInfo *find_key(const char *section, const char *key) {
  for (int i = 0; i < N_KEYS; i++)
    if (strcmp(KEYS[i].section, section) == 0 && strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
  return NULL;
}

static int enum_has(const char *choices, const char *v) {
  size_t n = strlen(v);
  const char *p = choices;
  while (*p) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && strncmp(p, v, n) == 0) return 1;
    if (!bar) break;
    p = bar + 1;
  }
  return 0;
}

/* Parses `value` into the field of `k`. Returns 0 or -1 with a message (without location). */
static int set_value(TxlConfig *c, const KeyInfo *k, const char *value, char *err, size_t errlen) {
  char *field = (char *)c + k->offset;
  char *end = NULL;
  switch (k->type) {
    case T_INT: {
      errno = 0;
      long long v = strtoll(value, &end, 10);
      if (errno || end == value || *end) {
        fail(err, errlen, "%s.%s: '%s' is not an integer", k->section, k->key, value);
        return -1;
      }
      if ((double)v < k->lo || (double)v > k->hi) {
        fail(err, errlen, "%s.%s = %lld is out of range [%.17g, %.17g]", k->section, k->key, v, k->lo, k->hi);
        return -1;
      }
      *(int *)field = (int)v;
      return 0;
    }
    case T_FLOAT: {
      errno = 0;
      double v = strtod(value, &end);
      if (errno || end == value || *end || !isfinite(v)) {
        fail(err, errlen, "%s.%s: '%s' is not a finite number", k->section, k->key, value);
        return -1;
      }
      if (v < k->lo || v > k->hi) {
        fail(err, errlen, "%s.%s = %g is out of range [%g, %g]", k->section, k->key, v, k->lo, k->hi);
        return -1;
      }
      *(double *)field = v;
      return 0;
    }
    case T_BOOL:
      if (!strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "yes")) {
        *(int *)field = 1;
      } else if (!strcmp(value, "false") || !strcmp(value, "0") || !strcmp(value, "no")) {
        *(int *)field = 0;
      } else {
        fail(err, errlen, "%s.%s: '%s' is not a boolean (true/false)", k->section, k->key, value);
        return -1;
      }
      return 0;
    case T_ENUM:
      if (!enum_has(k->choices, value)) {
        fail(err, errlen, "%s.%s: '%s' is not one of %s", k->section, k->key, value, k->choices);
        return -1;
      }
      /* fall through */
    case T_STRING:
      if (strlen(value) >= TXL_CFG_STRLEN) {
        fail(err, errlen, "%s.%s: value longer than %d characters", k->section, k->key, TXL_CFG_STRLEN - 1);
        return -1;
      }
      /* The resolved config is kept as INI text (txl_config_write_ini: each checkpoint, for a
       * resume and txl-eval), one "key = value" line: a value must read back as it is. */
      for (const char *p = value; *p; p++) {
        const unsigned char ch = (unsigned char)*p;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
          fail(err, errlen, "%s.%s: the value holds a control character (byte 0x%02X at position %d)", k->section,
               k->key, ch, (int)(p - value) + 1);
          return -1;
        }
        if ((ch == '#' || ch == ';') && (p == value || isspace((unsigned char)p[-1]))) {
          fail(err, errlen, "%s.%s: '%c' first or after a space would start a comment where the config is stored as INI text",
               k->section, k->key, ch);
          return -1;
        }
      }
      snprintf(field, TXL_CFG_STRLEN, "%s", value);
      return 0;
  }
  return -1;
}

void txl_config_defaults(TxlConfig *c) {
  memset(c, 0, sizeof *c);
  char err[256];
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

static int load_stream(TxlConfig *c, FILE *f, const char *path, char *err, size_t errlen) {
  char line[4096], section[64] = "";
  int lineno = 0, rc = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    if (!strchr(line, '\n') && !feof(f)) {
      fail(err, errlen, "%s:%d: line too long", path, lineno);
      rc = -1;
      break;
    }
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';') continue;
    if (*s == '[') {
      char *close = strchr(s, ']');
      if (!close || close[1]) {
        fail(err, errlen, "%s:%d: malformed section header '%s'", path, lineno, s);
        rc = -1;
        break;
      }
      *close = 0;
      char *name = trim(s + 1);
      int known = 0;
      for (int i = 0; i < N_KEYS; i++) known |= !strcmp(KEYS[i].section, name);
      if (!known) {
        fail(err, errlen, "%s:%d: unknown section [%s] (sections: data, model, train, eval, dist, run)", path, lineno, name);
        rc = -1;
        break;
      }
      snprintf(section, sizeof section, "%s", name);
      continue;
    }
    char *eq = strchr(s, '=');
    if (!eq) {
      fail(err, errlen, "%s:%d: expected 'key = value', got '%s'", path, lineno, s);
      rc = -1;
      break;
    }
    *eq = 0;
    /* strip a trailing comment: a '#' or ';' after whitespace, the one after '=' included
     * ("key = # ..." is an empty value, as txl_config_write_ini marks one) */
    for (char *p = eq + 1; *p; p++)
      if ((*p == '#' || *p == ';') && isspace((unsigned char)p[-1])) {
        *p = 0;
        break;
      }
    char *key = trim(s), *value = trim(eq + 1);
    if (!*section) {
      fail(err, errlen, "%s:%d: key '%s' outside any [section]", path, lineno, key);
      rc = -1;
      break;
    }
    const KeyInfo *k = find_key(section, key);
    if (!k) {
      fail(err, errlen, "%s:%d: unknown key '%s' in section [%s] (see txl-train --help)", path, lineno, key, section);
      rc = -1;
      break;
    }
    char msg[512];
    if (set_value(c, k, value, msg, sizeof msg) != 0) {
      fail(err, errlen, "%s:%d: %s", path, lineno, msg);
      rc = -1;
      break;
    }
  }
  if (rc == 0 && ferror(f)) {
    fail(err, errlen, "%s: read error", path);
    rc = -1;
  }
  return rc;
}

int txl_config_load_ini(TxlConfig *c, const char *path, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fail(err, errlen, "%s: cannot open config: %s", path, strerror(errno));
    return -1;
  }
  int rc = load_stream(c, f, path, err, errlen);
  fclose(f);
  return rc;
}

int txl_config_load_ini_text(TxlConfig *c, const char *text, const char *name, char *err, size_t errlen) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  if (!f) {
    fail(err, errlen, "%s: cannot read the config text", name);
    return -1;
  }
  int rc = load_stream(c, f, name, err, errlen);
  fclose(f);
  return rc;
}

int txl_config_set(TxlConfig *c, const char *assignment, char *err, size_t errlen) {
  char buf[TXL_CFG_STRLEN + 128];
  snprintf(buf, sizeof buf, "%s", assignment);
  char *eq = strchr(buf, '=');
  char *dot = strchr(buf, '.');
  if (!eq || !dot || dot > eq) {
    fail(err, errlen, "--set %s: expected section.key=value", assignment);
    return -1;
  }
  *eq = 0;
  *dot = 0;
  const KeyInfo *k = find_key(trim(buf), trim(dot + 1));
  if (!k) {
    fail(err, errlen, "--set %s: unknown key (see txl-train --help)", assignment);
    return -1;
  }
  char msg[512];
  if (set_value(c, k, trim(eq + 1), msg, sizeof msg) != 0) {
    fail(err, errlen, "--set: %s", msg);
    return -1;
  }
  return 0;
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
    if (v < 1 || (n_token > 0 && v >= n_token)) {
      if (n_token > 0)
        fail(err, errlen, "model.cutoffs = '%s': %ld is outside the vocabulary's (0, %d)", c->cutoffs, v, n_token);
      else
        fail(err, errlen, "model.cutoffs = '%s': %ld is not a token id > 0", c->cutoffs, v);
      return -1;
    }
    cutoffs[n++] = (int)v;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') p++;
    while (*p == ' ') p++;
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

int txl_config_validate(const TxlConfig *c, int world, char *err, size_t errlen) {
  int cut[TXL_CFG_MAX_CUTOFFS];
  if (txl_config_cutoffs(c, c->n_token, cut, err, errlen) < 0) return -1;
  if (c->d_model % 2) {
    fail(err, errlen, "model.d_model = %d must be even (relative positions use sin/cos halves)", c->d_model);
    return -1;
  }
  if (c->batch_size % world) {
    fail(err, errlen, "train.batch_size = %d does not divide among %d ranks", c->batch_size, world);
    return -1;
  }
  if (c->eval_batch_size % world) {
    fail(err, errlen, "eval.eval_batch_size = %d does not divide among %d ranks", c->eval_batch_size, world);
    return -1;
  }
  if (c->warmup_step > c->max_step) {
    fail(err, errlen, "train.warmup_step = %d exceeds train.max_step = %d", c->warmup_step, c->max_step);
    return -1;
  }
  if (c->same_length && c->mem_len == 0) {
    fail(err, errlen, "model.same_length needs train.mem_len > 0 (with no memory every key would be masked)");
    return -1;
  }
  if (c->eval_same_length && txl_config_eval_mem_len(c) == 0) {
    fail(err, errlen, "eval.eval_same_length needs an evaluation memory (eval.eval_mem_len > 0)");
    return -1;
  }
  if (c->eta_min > c->lr) {
    fail(err, errlen, "train.eta_min = %g exceeds train.lr = %g", c->eta_min, c->lr);
    return -1;
  }
  return 0;
}

static void format_value(const TxlConfig *c, const KeyInfo *k, char *out, size_t n) {
  const char *field = (const char *)c + k->offset;
  switch (k->type) {
    case T_INT: snprintf(out, n, "%d", *(const int *)field); break;
    case T_FLOAT: snprintf(out, n, "%.9g", *(const double *)field); break;
    case T_BOOL: snprintf(out, n, "%s", *(const int *)field ? "true" : "false"); break;
    case T_STRING:
    case T_ENUM: snprintf(out, n, "%s", field); break;
  }
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
    char v[TXL_CFG_STRLEN + 8], dv[TXL_CFG_STRLEN + 8];
    format_value(c, k, v, sizeof v);
    format_value(&d, k, dv, sizeof dv);
    if (mark_changed && strcmp(v, dv))
      fprintf(f, "%-18s = %-24s # default %s\n", k->key, v, dv);
    else
      fprintf(f, "%-18s = %s\n", k->key, v);
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
    if (k->type == T_INT || k->type == T_FLOAT) snprintf(range, sizeof range, " range [%g, %g]", k->lo, k->hi);
    if (k->type == T_ENUM) snprintf(range, sizeof range, " one of %s", k->choices);
    static const char *tn[] = {"int", "float", "bool", "string", "enum"};
    fprintf(f, "    %-18s %-6s default %s%s\n        %s\n", k->key, tn[k->type],
            *k->def ? k->def : "\"\"", range, k->help);
  }
}
