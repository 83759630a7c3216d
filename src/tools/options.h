/* The tools' options that set config keys (TxlToolOption rows with a key, src/base/cli.h): each is
 * checked as that key's values are (type and range from config.def) and recorded to be applied
 * over the checkpoint's config. */
#ifndef TXL_TOOLS_OPTIONS_H
#define TXL_TOOLS_OPTIONS_H

#include <stdio.h>

#include "dist/dist.h"
#include "src/base/cli.h"
#include "src/config/config.h"

/* A tool's start: with -h or --help anywhere, prints usage on stdout and exits 0 before MPI
 * starts; else starts MPI (txl_dist_init). */
void txl_tool_begin(TxlDist *dist, int *argc, char ***argv, void (*usage)(FILE *f));

/* The value v of a tool's option `opt` that stands for config key `key` ("section.key"): checked
 * as the key's values are (type and range from config.def, the one source), a one-line error on
 * every rank naming the option otherwise ("--clamp-len -3: eval.eval_clamp_len = -3 is out of
 * range [-2, ...]"). Returns v. collective */
const char *txl_key_option(const char *opt, const char *v, const char *key);
/* Sets `key` of c to v as txl_key_option checks it; the key then counts as set by "OPT V" in the
 * messages of txl_config_validate_eval. collective */
void txl_key_option_apply(TxlConfig *c, const char *opt, const char *v, const char *key);

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
