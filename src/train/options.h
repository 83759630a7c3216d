/* A tool's command-line options as one table: each row names an option, its value, the config key
 * it sets (when it stands for one) and its --help text. The tools' parsers look options up in it,
 * their --help lists every row, and an option that sets a key is checked as that key's values are
 * (type and range from config.def) and recorded to be applied over the checkpoint's config. */
#ifndef TXL_TRAIN_OPTIONS_H
#define TXL_TRAIN_OPTIONS_H

#include <stdio.h>

#include "src/config/config.h"

typedef struct {
  const char *name;  /* "--clamp-len" */
  const char *arg;   /* the value as --help names it ("N"); NULL: the option takes no value */
  const char *key;   /* the config key the option sets ("eval.eval_clamp_len"); NULL: the tool's own */
  const char *value; /* an option without a value that sets a key: the value it sets ("true") */
  const char *help;  /* --help text; "\n" starts a continuation line */
} TxlToolOption;

/* The row of option a in opts[n], or -1. */
int txl_tool_option_find(const TxlToolOption *opts, int n, const char *a);
/* --help lines of every row: "  NAME ARG" padded to `width` columns, then the help, continuation
 * lines indented to the same column. */
void txl_tool_options_help(FILE *f, const TxlToolOption *opts, int n, int width);

/* The key-setting options given, in order, to be applied once the config they override is read. */
#define TXL_MAX_KEY_SETTINGS 16
typedef struct {
  struct {
    const char *opt, *value, *key;
    int flag; /* an option without a value (--same-length): messages name it alone */
  } set[TXL_MAX_KEY_SETTINGS];
  int n;
} TxlKeySettings;
/* Records row o with value v (argv's next word; ignored for an option without a value), checked
 * as o->key's values are: a one-line error on every rank otherwise. Returns how many words of
 * argv after the option it used (0 or 1). collective */
int txl_key_settings_add(TxlKeySettings *s, const TxlToolOption *o, const char *v);
/* Sets every recorded key of c, in order; each then counts as set by its option in messages. collective */
void txl_key_settings_apply(const TxlKeySettings *s, TxlConfig *c);

#endif
