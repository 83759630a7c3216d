/* Reading the source text of txl-prep: a line reader with universal newlines (as Python's text
 * mode: "\n", "\r\n" and a lone "\r" end a line), the SHA-256 of the raw bytes, byte counts for
 * progress, strict UTF-8 decoding and Python's notion of whitespace (str.split()). */
#ifndef TXL_DATA_PREP_TEXT_H
#define TXL_DATA_PREP_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "data/sha256.h"

typedef struct {
  const char *path;
  const char *what;    /* "train file", for messages */
  FILE *f;
  unsigned char *buf;  /* read buffer */
  size_t n, pos;       /* valid bytes in buf, next unread byte */
  unsigned char *line; /* the current line, terminator included */
  size_t line_len, line_cap;
  int64_t line_no;     /* 1-based number of the line last returned */
  int64_t bytes;       /* raw bytes read so far */
  TxlSha256 sha;       /* of the raw bytes read so far */
  /* called after each read from the file with the number of bytes read (progress reports) */
  void (*on_read)(void *ctx, size_t n);
  void *ctx;
} LineReader;

/* Opens path for reading; `what` ("train file") is used in the error message. */
void lr_open(LineReader *r, const char *path, const char *what);
/* Next line: returns 0 at the end of the file, else 1 with *line pointing at the line's bytes
 * (writable, owned by the reader, valid until the next call), *content_len its length without
 * the terminator and *total_len its length with it. */
int lr_next(LineReader *r, unsigned char **line, size_t *content_len, size_t *total_len);
/* Next block of raw bytes without line splitting: returns 0 at the end of the file. */
int lr_next_raw(LineReader *r, unsigned char **data, size_t *len);
/* Closes the file and gives the SHA-256 of everything read (hex, 65 bytes). */
void lr_close(LineReader *r, char sha_hex[65]);

/* Ends the program with "<path>:<line>: invalid UTF-8 (byte 0xHH at byte <col + 1> of the line)"
 * for the byte b at offset col of the reader's current line. */
void lr_bad_utf8(const LineReader *r, size_t col, unsigned char b) __attribute__((noreturn));
/* Checks that line[0 .. len) of the reader's current line is valid UTF-8 (utf8_decode), ending
 * the program with lr_bad_utf8's message otherwise. */
void lr_check_utf8(const LineReader *r, const unsigned char *line, size_t len);
/* --lower: ASCII letters A-Z to a-z, in place. */
void lower_ascii(unsigned char *s, size_t len);

/* Decodes one UTF-8 code point at p (n > 0 bytes available), strictly as Python does: no
 * overlong forms, no surrogates, nothing above U+10FFFF. Returns its length (1..4) or 0. */
int utf8_decode(const unsigned char *p, size_t n, uint32_t *cp);
/* Python's str.isspace() for a code point (what str.split() without arguments splits on). */
int py_isspace(uint32_t cp);

#endif
