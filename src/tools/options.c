/* A tool's start (--help or MPI) and its options that set config keys: checked as they are read,
 * applied in order. */
#include "src/tools/options.h"

#include <stdlib.h>

#include "src/base/error.h"

void txl_tool_begin(TxlDist *dist, int *argc, char ***argv, void (*usage)(FILE *f)) {
  if (txl_cli_wants_help(*argc, *argv)) {
    usage(stdout);
    exit(0);
  }
  txl_dist_init(dist, argc, argv);
}

const char *txl_key_option(const char *opt, const char *v, const char *key) {
  if (!v) txl_fatal_all("%s needs a value (see --help)", opt);
  TxlConfig scratch;
  txl_config_defaults(&scratch);
  txl_key_option_apply(&scratch, opt, v, key);
  return v;
}

void txl_key_option_apply(TxlConfig *c, const char *opt, const char *v, const char *key) {
  char where[TXL_CFG_WHERE_LEN], err[1024];
  snprintf(where, sizeof where, "%s %s", opt, v);
  if (txl_config_set_key(c, key, v, where, err, sizeof err) != 0) txl_fatal_all("%s", err);
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
