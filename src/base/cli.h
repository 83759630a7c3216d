/* Command-line helpers shared by the tools. */
#ifndef TXL_BASE_CLI_H
#define TXL_BASE_CLI_H

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
