#include "src/base/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"

double txl_cli_number(const char *opt, const char *v, double lo, double hi, int integer) {
  char *end = NULL;
  errno = 0;
  const double x = v ? strtod(v, &end) : 0.0;
  if (!v || !*v || *end || errno || !(x >= lo && x <= hi) || (integer && x != (double)(long long)x))
    txl_fatal_all("%s %s: expected %s in [%.15g, %.15g]", opt, v ? v : "(missing)", integer ? "an integer" : "a number",
                  lo, hi);
  return x;
}

const char *txl_cli_choice(const char *opt, const char *v, const char *choices) {
  const size_t n = v ? strlen(v) : 0;
  for (const char *c = choices; n && c && *c; c = strchr(c, '|') ? strchr(c, '|') + 1 : NULL)
    if (!strncmp(c, v, n) && (c[n] == '|' || c[n] == '\0')) return v;
  txl_fatal_all("%s %s: expected one of %s", opt, v ? v : "(missing)", choices);
}

int txl_cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  return 0;
}

void txl_cli_positional(const char *tool, const char *what, const char *arg, const char **slot) {
  if (arg[0] == '-') txl_fatal_all("unknown option '%s' (see %s --help)", arg, tool);
  if (*slot) txl_fatal_all("two %ss given ('%s' and '%s')", what, *slot, arg);
  *slot = arg;
}

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
