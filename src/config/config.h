/* The run's configuration: INI file + --set overrides, every key checked against config.def. */
#ifndef TXL_CONFIG_CONFIG_H
#define TXL_CONFIG_CONFIG_H

#include <stdio.h>

#define TXL_CFG_STRLEN 512

#define TXL_CFG_FIELD_INT int
#define TXL_CFG_FIELD_FLOAT double
#define TXL_CFG_FIELD_BOOL int
#define TXL_CFG_FIELD_STRING char
#define TXL_CFG_FIELD_ENUM char
#define TXL_CFG_DIM_INT
#define TXL_CFG_DIM_FLOAT
#define TXL_CFG_DIM_BOOL
#define TXL_CFG_DIM_STRING [TXL_CFG_STRLEN]
#define TXL_CFG_DIM_ENUM [TXL_CFG_STRLEN]

typedef struct {
#define X(section, key, type, def, lo, hi, choices, resume, help) TXL_CFG_FIELD_##type key TXL_CFG_DIM_##type;
#include "src/config/config.def"
#undef X
} TxlConfig;

/* Fills every key with its default. */
void txl_config_defaults(TxlConfig *c);
/* Reads an INI file over the current values. Returns 0, or -1 with a one-line message in err
 * ("FILE:LINE: problem"). */
int txl_config_load_ini(TxlConfig *c, const char *path, char *err, size_t errlen);
/* Reads INI text (a checkpoint's config); `name` names it in messages. */
int txl_config_load_ini_text(TxlConfig *c, const char *text, const char *name, char *err, size_t errlen);
/* Lists the keys whose values differ between a and b as "section.key A -> B" separated by
 * "; " in out; fixed_only: only the keys that fix the model's shape (FIXED in config.def).
 * Returns how many differ. */
int txl_config_diff(const TxlConfig *a, const TxlConfig *b, int fixed_only, char *out, size_t n);
/* Applies "section.key=value". Returns 0, or -1 with a message in err. */
int txl_config_set(TxlConfig *c, const char *assignment, char *err, size_t errlen);
/* Checks the combinations no single range can (d_model even, ...). `world` is the rank count.
 * Returns 0, or -1 with a message in err. */
int txl_config_validate(const TxlConfig *c, int world, char *err, size_t errlen);
/* Writes every key as INI (sections in table order); marks values that differ from the default
 * with a trailing comment when `mark_changed`. */
void txl_config_write_ini(const TxlConfig *c, FILE *f, int mark_changed);
/* `--help` text for every key, generated from the table. */
void txl_config_print_help(FILE *f);

/* Values derived from the keys (the -1 / -2 "same as training" conventions resolved). */
int txl_config_eval_mem_len(const TxlConfig *c);
/* model.cutoffs parsed into cutoffs[] (at most TXL_CFG_MAX_CUTOFFS), checked to increase within
 * (0, n_token) (n_token <= 0: no upper bound yet) and to leave every cluster a feature; returns
 * their number, or -1 with a message naming the key. */
#define TXL_CFG_MAX_CUTOFFS 3
int txl_config_cutoffs(const TxlConfig *c, int n_token, int *cutoffs, char *err, size_t errlen);
int txl_config_eval_clamp_len(const TxlConfig *c);

#endif
