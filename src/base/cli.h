/* Command-line helpers shared by the tools. */
#ifndef TXL_BASE_CLI_H
#define TXL_BASE_CLI_H

#include <stdio.h>

/* A tool's options as one table: each row names an option, its value, the config key it sets
 * (when it stands for one: src/tools/options.h) and its --help text. The tool's parser looks
 * options up in it and its --help lists every row. */
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

/* The value v of option opt as a number in [lo, hi] (an integer when integer != 0); anything
 * else (missing, not a number, out of range) is a one-line error on every rank. */
double txl_cli_number(const char *opt, const char *v, double lo, double hi, int integer);

/* The value v of option opt, which must be one of `choices` ("a|b|c"); anything else (missing,
 * another word) is a one-line error on every rank. Returns v. */
const char *txl_cli_choice(const char *opt, const char *v, const char *choices);

/* 1 when the command line asks for help (-h or --help anywhere): the tool prints its usage and
 * exits 0 before starting MPI. */
int txl_cli_wants_help(int argc, char **argv);

/* Records the tool's one positional argument (a checkpoint, a config file) in *slot; a second
 * one, or an unknown option, is a one-line error naming the tool. */
void txl_cli_positional(const char *tool, const char *what, const char *arg, const char **slot);

#endif
