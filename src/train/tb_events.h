/* TensorBoard's event files, byte by byte: TFRecord framing (uint64 LE length, uint32 masked
 * CRC32C of the length bytes, the data, uint32 masked CRC32C of the data) around Event protocol
 * buffers, encoded and read back here by hand (no protobuf library):
 *   Event    {double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
 *             SessionLog session_log = 7}  (3, 5 and 7 are a oneof: one of them per event)
 *   Summary  {repeated Value value = 1}    Value {string tag = 1; float simple_value = 2}
 *   SessionLog {SessionStatus status = 1}  (START = 1: a reader drops what it holds of this step
 *                                           and later ones, the run continues from here)
 * No files: src/train/tb_log.h writes them. */
#ifndef TXL_TRAIN_TB_EVENTS_H
#define TXL_TRAIN_TB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of p[0, n), and the masked form the
 * framing stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t txl_crc32c(const void *p, size_t n);
uint32_t txl_crc32c_masked(const void *p, size_t n);

#define TXL_TB_FILE_VERSION "brain.Event:2"
#define TXL_TB_SUMMARY_MAX 2048

/* A Summary's encoded values. overflow: a value did not fit (it was left out). */
typedef struct {
  unsigned char bytes[TXL_TB_SUMMARY_MAX];
  size_t len;
  int overflow;
} TxlTbSummary;

/* Adds Value {tag, simple_value = (float)value}. */
void txl_tb_summary_add(TxlTbSummary *s, const char *tag, double value);

/* What one Event says (NULL / 0 for the fields it leaves out). */
typedef struct {
  double wall_time;
  int64_t step;
  const char *file_version;
  const TxlTbSummary *summary;
  int session_start; /* 1: session_log {status: START} */
} TxlTbEvent;

/* The Event framed as one record into out[0, cap): its bytes, or 0 when it does not fit. */
size_t txl_tb_record(const TxlTbEvent *e, unsigned char *out, size_t cap);

/* Reads the record at buf[*pos, size). Returns 1 with *data, *len its payload and *pos past it;
 * 0 at the end (*pos == size); -1 when the framing is damaged (a length whose CRC fails, or a
 * record cut short: nothing after it can be found); -2 when only the data's CRC fails (*pos past
 * it: the records after it can be read). */
int txl_tb_next_record(const unsigned char *buf, size_t size, size_t *pos, const unsigned char **data, size_t *len);

/* An Event's step (0 without one) and the part of its first tag before the '/' in kind (the
 * metrics.jsonl kind its scalars came from: "train", "valid", "test", "unigram"; "" without
 * scalars); *has_version = 1 when it holds a file_version. Returns 0, or -1 when it does not
 * parse. */
int txl_tb_event_parse(const unsigned char *data, size_t len, int64_t *step, char *kind, size_t kind_len,
                       int *has_version);

#endif
