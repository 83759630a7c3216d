#include "tests/data/handmade.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/philox.h"

static int attr_str(hid_t f, const char *name, const char *v) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, strlen(v) + 1);
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (a >= 0 && H5Awrite(a, t, v) >= 0) ? 0 : -1;
  H5Aclose(a);
  H5Sclose(s);
  H5Tclose(t);
  return rc;
}

static int attr_i64(hid_t f, const char *name, int64_t v) {
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0) ? 0 : -1;
  H5Aclose(a);
  H5Sclose(s);
  return rc;
}

static int dataset(hid_t f, const char *name, hid_t ftype, hid_t mtype, int64_t n, int64_t chunk,
                   const void *buf) {
  hsize_t dim = (hsize_t)n, ch = (hsize_t)(n < chunk ? n : chunk);
  hid_t s = H5Screate_simple(1, &dim, NULL);
  hid_t p = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(p, 1, &ch);
  H5Pset_fletcher32(p);
  hid_t d = H5Dcreate2(f, name, ftype, s, H5P_DEFAULT, p, H5P_DEFAULT);
  int rc = (d >= 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0) ? 0 : -1;
  H5Dclose(d);
  H5Pclose(p);
  H5Sclose(s);
  return rc;
}

/* The writer of both: split k's ids from id(k, i, ctx). */
typedef uint32_t (*IdOf)(int k, int64_t i, int64_t vocab, const void *ctx);

static int write_corpus(const char *path, const int64_t len[3], int64_t vocab, int id_bytes, int64_t chunk,
                        int64_t bad_pos, IdOf id_of, const void *ctx) {
  static const char *const split[3] = {"train", "valid", "test"};
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return -1;
  int rc = 0;
  rc |= attr_str(f, "format", "txl-corpus");
  rc |= attr_i64(f, "format_version", 1);
  rc |= attr_str(f, "mode", "word");
  rc |= attr_i64(f, "vocab_size", vocab);
  rc |= attr_i64(f, "eos_id", 0);
  rc |= attr_i64(f, "unk_id", -1);
  hid_t ftype = id_bytes == 1 ? H5T_STD_U8LE : id_bytes == 2 ? H5T_STD_U16LE : H5T_STD_U32LE;
  for (int k = 0; k < 3; k++) {
    uint32_t *ids = malloc((size_t)len[k] * sizeof *ids);
    for (int64_t i = 0; i < len[k]; i++) ids[i] = id_of(k, i, vocab, ctx);
    if (k == 0 && bad_pos >= 0 && bad_pos < len[k]) ids[bad_pos] = (uint32_t)vocab;
    rc |= dataset(f, split[k], ftype, H5T_NATIVE_UINT32, len[k], chunk, ids);
    free(ids);
  }
  /* vocabulary: "<eos>", "t1", "t2", ... */
  int64_t *off = malloc((size_t)(vocab + 1) * sizeof *off);
  char *bytes = malloc((size_t)vocab * 24 + 8), tmp[24];
  off[0] = 0;
  for (int64_t v = 0; v < vocab; v++) {
    int n = v == 0 ? snprintf(tmp, sizeof tmp, "<eos>") : snprintf(tmp, sizeof tmp, "t%lld", (long long)v);
    memcpy(bytes + off[v], tmp, (size_t)n);
    off[v + 1] = off[v] + n;
  }
  rc |= dataset(f, "vocab", H5T_STD_U8LE, H5T_NATIVE_UCHAR, off[vocab], chunk, bytes);
  rc |= dataset(f, "vocab_offsets", H5T_STD_I64LE, H5T_NATIVE_INT64, vocab + 1, chunk, off);
  free(off);
  free(bytes);
  if (H5Fclose(f) < 0) rc = -1;
  return rc ? -1 : 0;
}

static uint32_t fixed_id(int k, int64_t i, int64_t vocab, const void *ctx) {
  (void)ctx;
  return (uint32_t)handmade_id(k, i, vocab);
}

int handmade_corpus(const char *path, const int64_t len[3], int64_t vocab, int id_bytes,
                    int64_t chunk, int64_t bad_pos) {
  return write_corpus(path, len, vocab, id_bytes, chunk, bad_pos, fixed_id, NULL);
}

typedef struct {
  const double *cdf; /* [vocab] */
  uint32_t seed;
} Zipf;

static uint32_t zipf_id(int k, int64_t i, int64_t vocab, const void *ctx) {
  const Zipf *z = ctx;
  const TxlPhilox4 w = txl_philox4x32_10((uint32_t)i, (uint32_t)(i >> 32), (uint32_t)k, 0x21bfu, z->seed, 0x7a1bu);
  const double u = ((double)(w.v[0] >> 5) * 67108864.0 + (double)(w.v[1] >> 6)) / 9007199254740992.0; /* [0, 1) */
  int64_t lo = 0, hi = vocab - 1; /* the first id whose cdf exceeds u */
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (z->cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return (uint32_t)lo;
}

int handmade_zipf_corpus(const char *path, const int64_t len[3], int64_t vocab, uint32_t seed) {
  double *cdf = malloc((size_t)vocab * sizeof *cdf), s = 0.0;
  if (!cdf) return -1;
  for (int64_t i = 0; i < vocab; i++) cdf[i] = s += 1.0 / ((double)i + 1.0);
  for (int64_t i = 0; i < vocab; i++) cdf[i] /= s;
  const Zipf z = {cdf, seed};
  const int rc = write_corpus(path, len, vocab, vocab > 65535 ? 4 : 2, 1 << 16, -1, zipf_id, &z);
  free(cdf);
  return rc;
}

int handmade_foreign(const char *path) {
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return -1;
  int32_t x[5] = {1, 2, 3, 4, 5};
  hsize_t dim = 5;
  hid_t s = H5Screate_simple(1, &dim, NULL);
  hid_t d = H5Dcreate2(f, "x", H5T_STD_I32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  int rc = (d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0) ? 0 : -1;
  H5Dclose(d);
  H5Sclose(s);
  return (H5Fclose(f) < 0 || rc) ? -1 : 0;
}
