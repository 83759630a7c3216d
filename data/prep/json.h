/* A small strict JSON parser (RFC 8259) for the tokenizer files of txl-prep --mode bpe: the whole
 * text must be one value, UTF-8, no comments, no trailing commas, no leading zeros, no control
 * characters in strings; \uXXXX escapes with surrogate pairs (a lone surrogate is an error);
 * nesting at most JSON_MAX_DEPTH deep. Any input gives a tree or one line of error (with the line
 * and column), never a crash. Object keys are kept in order; a repeated key is not detected here
 * (json_get finds the first). */
#ifndef TXL_DATA_PREP_JSON_H
#define TXL_DATA_PREP_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue JsonValue;
struct JsonValue {
  JsonType type;
  int boolean;          /* JSON_BOOL */
  double number;        /* JSON_NUMBER */
  int is_int;           /* JSON_NUMBER: written without fraction or exponent and within int64 */
  int64_t integer;      /* ... its value */
  char *str;            /* JSON_STRING: the decoded bytes (UTF-8), NUL-terminated */
  size_t len;           /* JSON_STRING: their length (a \u0000 may be inside) */
  size_t n;             /* JSON_ARRAY, JSON_OBJECT: the number of items */
  JsonValue *items;     /* [n] */
  JsonValue *keys;      /* JSON_OBJECT: [n] the keys (JSON_STRING values) */
};

/* Parses text[0 .. len). Returns 0 with *root (free it with json_free), or -1 with one line in err:
 * "line L, column C: <problem>". */
int json_parse(const char *text, size_t len, JsonValue *root, char *err, size_t cap);
void json_free(JsonValue *v);

/* The value of key `key` in object obj, NULL when absent (or obj is no object). */
const JsonValue *json_get(const JsonValue *obj, const char *key);
/* "null", "true/false", "a number", "a string", "an array", "an object" (for messages). */
const char *json_type_name(JsonType t);

#endif
