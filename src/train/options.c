/* The tools' option tables: lookup, --help lines, the options that set config keys. */
#include "src/train/options.h"

#include <string.h>

#include "src/base/error.h"
#include "src/train/loaded.h"

int txl_tool_option_find(const TxlToolOption *opts, int n, const char *a) {
  for (int i = 0; i < n; i++)
    if (!strcmp(opts[i].name, a)) return i;
  return -1;
}

void txl_tool_options_help(FILE *f, const TxlToolOption *opts, int n, int width) {
  for (int i = 0; i < n; i++) {
    char head[64];
    snprintf(head, sizeof head, "%s%s%s", opts[i].name, opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
    fprintf(f, "  %-*s ", width - 3, head);
    for (const char *p = opts[i].help; *p; p++) {
      fputc(*p, f);
      if (*p == '\n') fprintf(f, "%*s", width, "");
    }
    fputc('\n', f);
  }
}

int txl_key_settings_add(TxlKeySettings *s, const TxlToolOption *o, const char *v) {
  if (s->n == TXL_MAX_KEY_SETTINGS) txl_fatal_all("%s: too many options", o->name);
  const int flag = o->arg == NULL;
  if (flag) v = o->value;
  s->set[s->n].opt = o->name, s->set[s->n].value = txl_key_option(o->name, v, o->key), s->set[s->n].key = o->key;
  s->set[s->n++].flag = flag;
  return flag ? 0 : 1;
}

void txl_key_settings_apply(const TxlKeySettings *s, TxlConfig *c) {
  char err[1024];
  for (int k = 0; k < s->n; k++) {
    if (!s->set[k].flag)
      txl_key_option_apply(c, s->set[k].opt, s->set[k].value, s->set[k].key);
    else if (txl_config_set_key(c, s->set[k].key, s->set[k].value, s->set[k].opt, err, sizeof err) != 0)
      txl_fatal_all("%s", err);
  }
}
