/* The run's configuration: INI file + --set overrides, every key checked against config.def. */
#ifndef TXL_CONFIG_CONFIG_H
#define TXL_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "src/model/attn_type.h" /* TXL_ATTN_TYPES: model.attn_type's choices (config.def) */

#define TXL_CFG_STRLEN 512

#define TXL_CFG_FIELD_INT int
#define TXL_CFG_FIELD_FLOAT double
#define TXL_CFG_FIELD_BOOL int
#define TXL_CFG_FIELD_STRING char
#define TXL_CFG_FIELD_ENUM int
#define TXL_CFG_FIELD_ENUM_NUM int
#define TXL_CFG_DIM_INT
#define TXL_CFG_DIM_FLOAT
#define TXL_CFG_DIM_BOOL
#define TXL_CFG_DIM_STRING [TXL_CFG_STRLEN]
#define TXL_CFG_DIM_ENUM
#define TXL_CFG_DIM_ENUM_NUM

/* The values of the ENUM keys, from config.def's TXL_CFG_CHOICES_<key> lists (0, 1, ... per key):
 * TXL_SCHEDULER_COSINE, TXL_DEVICE_CUDA, TXL_PRECISION_BF16, ... An ENUM_NUM key's list is the
 * enum of the layer that defines it (model.attn_type's: TxlAttnType), its constants already there. */
#define TXL_CFG_CONSTANT(constant, name) TXL_##constant,
#define TXL_CFG_CONSTANTS_INT(key)
#define TXL_CFG_CONSTANTS_FLOAT(key)
#define TXL_CFG_CONSTANTS_BOOL(key)
#define TXL_CFG_CONSTANTS_STRING(key)
#define TXL_CFG_CONSTANTS_ENUM(key) enum { TXL_CFG_CHOICES_##key(TXL_CFG_CONSTANT) };
#define TXL_CFG_CONSTANTS_ENUM_NUM(key)
#define X(section, key, type, def, lo, hi, resume, help) TXL_CFG_CONSTANTS_##type(key)
#include "src/config/config.def"
#undef X

/* Each key's index in config.def: TXL_CFG_KEY_lr, ... */
enum {
#define X(section, key, type, def, lo, hi, resume, help) TXL_CFG_KEY_##key,
#include "src/config/config.def"
#undef X
  TXL_CFG_N_KEYS
};

/* Where a key's value came from, for the messages about combinations of keys: "FILE:LINE",
 * "--set section.key=value", a tool's option ("--clamp-len 5"); "" while it holds its default.
 * Longer places are cut (with "...") here only, never the values. */
#define TXL_CFG_WHERE_LEN 192
typedef struct {
  char where[TXL_CFG_WHERE_LEN];
  int seq; /* order of the assignments, 1 = the first; 0: the default */
} TxlCfgOrigin;

typedef struct {
#define X(section, key, type, def, lo, hi, resume, help) TXL_CFG_FIELD_##type key TXL_CFG_DIM_##type;
#include "src/config/config.def"
#undef X
  /* bookkeeping, not keys */
  struct {
    TxlCfgOrigin key[TXL_CFG_N_KEYS];
    int count;       /* assignments so far */
    char source[TXL_CFG_WHERE_LEN]; /* the INI file or text read first: named for keys at their default */
  } set_by;
} TxlConfig;

/* Fills every key with its default. */
void txl_config_defaults(TxlConfig *c);
/* Reads an INI file over the current values. Returns 0, or -1 with a one-line message in err
 * ("FILE:LINE: problem"). Syntax: [section] headers, `key = value` lines, comments from '#' or ';'
 * at the start of a line or after a blank, a value in double quotes taken as it stands (escapes
 * \" \\ \n \t \r; needed for leading or trailing blanks, " #" or " ;"); CRLF line ends and a UTF-8
 * byte-order mark are accepted. A key given twice, a NUL or other control byte, text after a
 * section header, a number with trailing text, hex, inf or nan are errors. */
int txl_config_load_ini(TxlConfig *c, const char *path, char *err, size_t errlen);
/* The same from INI text (a checkpoint's config); `name` names it in messages. */
int txl_config_load_ini_text(TxlConfig *c, const char *text, const char *name, char *err, size_t errlen);
/* The same from `len` bytes that may hold anything (a NUL byte is an error, not the end). */
int txl_config_load_ini_bytes(TxlConfig *c, const char *data, size_t len, const char *name, char *err,
                              size_t errlen);
/* Lists the keys whose values differ between a and b as "section.key A -> B" separated by
 * "; " in out; fixed_only: only the keys that fix the model's shape (FIXED in config.def).
 * Returns how many differ. */
int txl_config_diff(const TxlConfig *a, const TxlConfig *b, int fixed_only, char *out, size_t n);
/* Applies "section.key=value" (the value as it stands, blanks around it dropped). Returns 0, or
 * -1 with a message in err that starts "--set section.key=value: ". */
int txl_config_set(TxlConfig *c, const char *assignment, char *err, size_t errlen);
/* Sets key `name` ("section.key") to `value`, checked as a value of the file is; `where` names
 * the setting in messages (a tool's option: "--clamp-len 5"). Returns 0, or -1 with a message in
 * err that starts "WHERE: ". */
int txl_config_set_key(TxlConfig *c, const char *name, const char *value, const char *where, char *err,
                       size_t errlen);
/* Checks the combinations no single range can (d_model even, ...) for training on `world` ranks:
 * the model's and the evaluation's (txl_config_validate_eval) and the training's. Returns 0, or
 * -1 with a message in err that starts with where the key that completed the bad combination was
 * set ("FILE:LINE: ", "--set ...: "; the file for keys at their default). */
int txl_config_validate(const TxlConfig *c, int world, char *err, size_t errlen);
/* The same for evaluating a trained model on `world` ranks: the model's and the eval keys only. */
int txl_config_validate_eval(const TxlConfig *c, int world, char *err, size_t errlen);
/* Writes every key as INI (sections in table order) that reads back to the same values; marks
 * values that differ from the default with a trailing comment when `mark_changed`. */
void txl_config_write_ini(const TxlConfig *c, FILE *f, int mark_changed);
/* `--help` text for every key, generated from the table. */
void txl_config_print_help(FILE *f);
/* The name of value v of ENUM key `key` (TXL_CFG_KEY_device, TXL_DEVICE_CUDA -> "cuda"), as the
 * INI text writes it. */
const char *txl_config_choice_name(int key, int v);
/* The value of ENUM key `key` that the INI text writes as `name` ("inv_sqrt" ->
 * TXL_SCHEDULER_INV_SQRT; for an ENUM_NUM key its number too: "1" -> TXL_ATTN_SHAW), or -1 when it
 * is none of its choices. */
int txl_config_choice_value(int key, const char *name);

/* Values derived from the keys (the -1 / -2 "same as training" conventions resolved). */
int txl_config_eval_mem_len(const TxlConfig *c);
/* model.cutoffs parsed into cutoffs[] (at most TXL_CFG_MAX_CUTOFFS), checked to increase within
 * (0, n_token) (n_token <= 0: no upper bound yet) and to leave every cluster a feature; returns
 * their number, or -1 with a message naming the key. */
#define TXL_CFG_MAX_CUTOFFS 3
int txl_config_cutoffs(const TxlConfig *c, int n_token, int *cutoffs, char *err, size_t errlen);
int txl_config_eval_clamp_len(const TxlConfig *c);

#endif
