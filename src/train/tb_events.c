#include "src/train/tb_events.h"

#include <string.h>

/* ---- CRC32C --------------------------------------------------------------------------------- */

static uint32_t crc_table[256];
static int crc_ready = 0;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_table[i] = c;
  }
  crc_ready = 1;
}

uint32_t txl_crc32c(const void *p, size_t n) {
  if (!crc_ready) crc_init(); /* rank 0 alone writes events: no race */
  const unsigned char *b = (const unsigned char *)p;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t txl_crc32c_masked(const void *p, size_t n) {
  const uint32_t c = txl_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---- encoding ------------------------------------------------------------------------------- */

/* A buffer being filled; overflow once something did not fit. */
typedef struct {
  unsigned char *p;
  size_t len, cap;
  int overflow;
} Out;

static void put(Out *o, const void *data, size_t n) {
  if (o->overflow || n > o->cap - o->len) {
    o->overflow = 1;
    return;
  }
  memcpy(o->p + o->len, data, n);
  o->len += n;
}

static void put_varint(Out *o, uint64_t v) {
  unsigned char b[10];
  size_t n = 0;
  do {
    b[n] = (unsigned char)(v & 0x7F);
    v >>= 7;
    if (v) b[n] |= 0x80;
    n++;
  } while (v);
  put(o, b, n);
}

static void put_le(Out *o, uint64_t v, int bytes) {
  unsigned char b[8];
  for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
  put(o, b, (size_t)bytes);
}

/* field numbers and wire types: key = field << 3 | type */
enum { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };

static void put_key(Out *o, int field, int type) { put_varint(o, (uint64_t)(field << 3 | type)); }

static void put_bytes(Out *o, int field, const void *data, size_t n) {
  put_key(o, field, LEN);
  put_varint(o, n);
  put(o, data, n);
}

void txl_tb_summary_add(TxlTbSummary *s, const char *tag, double value) {
  unsigned char v[300];
  Out val = {v, 0, sizeof v, 0};
  put_bytes(&val, 1, tag, strlen(tag));
  const float f = (float)value;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  put_key(&val, 2, I32);
  put_le(&val, bits, 4);
  Out o = {s->bytes, s->len, sizeof s->bytes, val.overflow};
  put_bytes(&o, 1, v, val.len);
  if (o.overflow) s->overflow = 1;
  else s->len = o.len;
}

size_t txl_tb_record(const TxlTbEvent *e, unsigned char *out, size_t cap) {
  if (cap < 16) return 0;
  Out o = {out + 12, 0, cap - 16, 0}; /* the data, after the length and its CRC */
  uint64_t wall;
  memcpy(&wall, &e->wall_time, sizeof wall);
  put_key(&o, 1, I64);
  put_le(&o, wall, 8);
  if (e->step) { /* 0 is proto3's default, left out */
    put_key(&o, 2, VARINT);
    put_varint(&o, (uint64_t)e->step);
  }
  if (e->file_version) put_bytes(&o, 3, e->file_version, strlen(e->file_version));
  if (e->summary) put_bytes(&o, 5, e->summary->bytes, e->summary->len);
  if (e->session_start) {
    const unsigned char start[2] = {1 << 3 | VARINT, 1}; /* SessionLog {status: START} */
    put_bytes(&o, 7, start, sizeof start);
  }
  if (o.overflow || (e->summary && e->summary->overflow)) return 0;
  Out head = {out, 0, 12, 0};
  put_le(&head, o.len, 8);
  put_le(&head, txl_crc32c_masked(out, 8), 4);
  Out tail = {out + 12 + o.len, 0, 4, 0};
  put_le(&tail, txl_crc32c_masked(out + 12, o.len), 4);
  return 16 + o.len;
}

/* ---- reading -------------------------------------------------------------------------------- */

static uint64_t get_le(const unsigned char *b, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

int txl_tb_next_record(const unsigned char *buf, size_t size, size_t *pos, const unsigned char **data, size_t *len) {
  const size_t at = *pos;
  if (at >= size) return 0;
  if (size - at < 12 || (uint32_t)get_le(buf + at + 8, 4) != txl_crc32c_masked(buf + at, 8)) return -1;
  const uint64_t n = get_le(buf + at, 8);
  if (n > size - at - 12 || size - at - 12 - n < 4) return -1;
  *data = buf + at + 12;
  *len = (size_t)n;
  *pos = at + 16 + (size_t)n;
  return (uint32_t)get_le(buf + at + 12 + n, 4) == txl_crc32c_masked(*data, *len) ? 1 : -2;
}

/* A message being read; bad once it did not parse. */
typedef struct {
  const unsigned char *p;
  size_t len, at;
  int bad;
} In;

static uint64_t get_varint(In *in) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in->at >= in->len) break;
    const unsigned char b = in->p[in->at++];
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  in->bad = 1;
  return 0;
}

/* The next field: its number, wire type and (LEN) its bytes in *sub; the others skipped, their
 * VARINT value in *value. 0 at the end or when it does not parse. */
static int next_field(In *in, int *field, int *type, In *sub, uint64_t *value) {
  if (in->bad || in->at >= in->len) return 0;
  const uint64_t key = get_varint(in);
  *field = (int)(key >> 3);
  *type = (int)(key & 7);
  size_t skip = 0;
  if (*type == VARINT) *value = get_varint(in);
  else if (*type == I64) skip = 8;
  else if (*type == I32) skip = 4;
  else if (*type == LEN) {
    skip = (size_t)get_varint(in);
    if (skip <= in->len - in->at) *sub = (In){in->p + in->at, skip, 0, 0};
  } else in->bad = 1;
  if (in->bad || skip > in->len - in->at) {
    in->bad = 1;
    return 0;
  }
  in->at += skip;
  return 1;
}

/* The first Value's tag of a Summary, up to its '/', into kind. */
static void first_kind(In summary, char *kind, size_t kind_len, int *bad) {
  int field, type;
  In value = {0}, tag = {0};
  uint64_t v;
  while (next_field(&summary, &field, &type, &value, &v)) {
    if (field != 1 || type != LEN) continue;
    while (next_field(&value, &field, &type, &tag, &v)) {
      if (field != 1 || type != LEN) continue;
      size_t n = 0;
      while (n < tag.len && tag.p[n] != '/' && n + 1 < kind_len) n++;
      memcpy(kind, tag.p, n);
      kind[n] = 0;
      *bad |= value.bad;
      return;
    }
    *bad |= value.bad;
    return;
  }
  *bad |= summary.bad;
}

int txl_tb_event_parse(const unsigned char *data, size_t len, int64_t *step, char *kind, size_t kind_len,
                       int *has_version) {
  In in = {data, len, 0, 0}, sub = {0};
  int field, type, bad = 0;
  uint64_t v = 0;
  *step = 0;
  *has_version = 0;
  if (kind_len) kind[0] = 0;
  while (next_field(&in, &field, &type, &sub, &v)) {
    if (field == 2 && type == VARINT) *step = (int64_t)v;
    else if (field == 3 && type == LEN) *has_version = 1;
    else if (field == 5 && type == LEN && kind_len) first_kind(sub, kind, kind_len, &bad);
  }
  return in.bad || bad ? -1 : 0;
}
