/* Writing the described files of the corpus and checkpoint harnesses (h5gen.h). */
#include "tests/fuzz/h5gen.h"

#include "tests/fuzz/fuzz.h"

#include <stdlib.h>
#include <string.h>

unsigned fuzz_in_byte(FuzzIn *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

uint64_t fuzz_in_u64(FuzzIn *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)fuzz_in_byte(in) << (8 * i);
  return v;
}

static int write_attr(hid_t obj, const char *name, hid_t ftype, hid_t mtype, int n, const void *v) {
  hsize_t dim = (hsize_t)n;
  hid_t sp = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &dim, NULL);
  hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a >= 0 && H5Awrite(a, mtype, v) >= 0 ? 0 : -1;
  if (a >= 0) H5Aclose(a);
  if (sp >= 0) H5Sclose(sp);
  return rc;
}

/* A string attribute: fixed length (NUL-terminated, as txl's writers store them) or variable. */
static void write_string_attr(hid_t obj, const char *name, const char *s, size_t len, int variable) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0) return;
  if (variable) {
    H5Tset_size(t, H5T_VARIABLE);
    write_attr(obj, name, t, t, 1, &s);
  } else {
    H5Tset_size(t, len + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    char *buf = calloc(len + 1, 1);
    if (buf) {
      memcpy(buf, s, len);
      write_attr(obj, name, t, t, 1, buf);
      free(buf);
    }
  }
  H5Tclose(t);
}

static void write_canon(hid_t obj, const char *name, const Canon *c) {
  if (c->kind == CANON_INT) write_attr(obj, name, c->type, H5T_NATIVE_INT64, 1, &c->i);
  else if (c->kind == CANON_FLOAT) write_attr(obj, name, c->type, H5T_NATIVE_DOUBLE, 1, &c->f);
  else write_string_attr(obj, name, c->s, strlen(c->s), 0);
}

/* File types the input picks from: the integers (k < 8), then two floats. */
static hid_t some_type(unsigned k) {
  switch (k) {
    case 0: return H5T_STD_I8LE;
    case 1: return H5T_STD_U8LE;
    case 2: return H5T_STD_I16LE;
    case 3: return H5T_STD_U16LE;
    case 4: return H5T_STD_I32LE;
    case 5: return H5T_STD_U32LE;
    case 6: return H5T_STD_I64LE;
    case 7: return H5T_STD_U64LE;
    case 8: return H5T_IEEE_F32LE;
    default: return H5T_IEEE_F64LE;
  }
}

void gen_attr(hid_t obj, const char *name, const Canon *c, FuzzIn *in) {
  const unsigned op = fuzz_in_byte(in) % 13;
  switch (op) {
    case 4: /* missing */
      return;
    case 5: case 6: case 7: { /* an integer of some type, any value */
      hid_t t = some_type(fuzz_in_byte(in) % 8);
      int64_t v = (int64_t)fuzz_in_u64(in);
      write_attr(obj, name, t, H5T_NATIVE_INT64, 1, &v);
      return;
    }
    case 8: { /* a double, any bits */
      uint64_t bits = fuzz_in_u64(in);
      double v;
      memcpy(&v, &bits, sizeof v);
      write_attr(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &v);
      return;
    }
    case 9: case 10: { /* a string of any bytes */
      char s[80];
      size_t len = fuzz_in_byte(in) % sizeof s;
      for (size_t i = 0; i < len; i++) s[i] = (char)fuzz_in_byte(in);
      if (op == 10) {
        s[len < sizeof s ? len : sizeof s - 1] = '\0';
        write_string_attr(obj, name, s, strlen(s), 1);
      } else {
        write_string_attr(obj, name, s, len, 0);
      }
      return;
    }
    case 11: { /* two elements */
      int64_t v[2] = {c->kind == CANON_INT ? c->i : 0, (int64_t)fuzz_in_u64(in)};
      write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 2, v);
      return;
    }
    case 12: /* near the valid value */
      if (c->kind == CANON_INT) {
        int64_t v = c->i + (int8_t)fuzz_in_byte(in);
        write_attr(obj, name, c->type, H5T_NATIVE_INT64, 1, &v);
      } else if (c->kind == CANON_FLOAT) {
        double v = c->f * (1.0 + (int8_t)fuzz_in_byte(in) / 64.0);
        write_attr(obj, name, c->type, H5T_NATIVE_DOUBLE, 1, &v);
      } else {
        write_string_attr(obj, name, c->s, strlen(c->s), 1);
      }
      return;
    default: /* 0-3: as in a valid file */
      write_canon(obj, name, c);
  }
}

static hsize_t product(int rank, const hsize_t *d) {
  hsize_t n = 1;
  for (int i = 0; i < rank; i++) n *= d[i];
  return n;
}

/* The storage of a dataset of rank r, dims d, element size esize. */
static hid_t make_dcpl(int r, const hsize_t *d, size_t esize, unsigned store, FuzzIn *in) {
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (dcpl < 0) return -1;
  const hsize_t n = product(r, d);
  if (r == 0 || n == 0 || store == 3) return dcpl; /* contiguous */
  if (store == 4) {
    if (n * esize < 60000) H5Pset_layout(dcpl, H5D_COMPACT);
    return dcpl;
  }
  hsize_t ch[8];
  for (int i = 0; i < r; i++) ch[i] = store == 1 || store == 5 ? 1 + fuzz_in_byte(in) % d[i] : d[i];
  H5Pset_chunk(dcpl, r, ch);
  if (store <= 1) H5Pset_fletcher32(dcpl);
  return dcpl;
}

int gen_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, hid_t mem_type,
                const void *values, FuzzIn *in) {
  const unsigned op = fuzz_in_byte(in) % 16, store = fuzz_in_byte(in) % 6;
  hsize_t d[8];
  int r = rank;
  memcpy(d, dims, (size_t)rank * sizeof *d);
  hid_t ftype = type;
  const size_t esize = H5Tget_size(mem_type);
  const hsize_t total = product(rank, dims);
  uint64_t changed = 0;
  switch (op) {
    case 8: return 0; /* missing */
    case 9: ftype = some_type(fuzz_in_byte(in) % 10); break;
    case 10: if (r < 7) d[r++] = 1; break;
    case 11:
      if (r > 1) {
        d[r - 2] *= d[r - 1];
        r--;
      } else {
        r = 0;
      }
      break;
    case 12: if (r > 0) d[r - 1]++; break;
    case 13: if (r > 0 && d[r - 1] > 0) d[r - 1]--; break;
    case 14: { /* a group where the dataset belongs */
      hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      if (g < 0) return -1;
      H5Gclose(g);
      return 0;
    }
    case 15: changed = 1 + fuzz_in_u64(in) % (total ? total : 1); break;
    default: break; /* 0-7: as in a valid file */
  }
  const hsize_t n = product(r, d);
  char *buf = calloc(n ? n : 1, esize);
  if (!buf) return -1;
  memcpy(buf, values, (size_t)(n < total ? n : total) * esize);
  if (changed && changed <= n && H5Tget_class(mem_type) == H5T_INTEGER) {
    uint64_t v = fuzz_in_u64(in); /* little-endian machine: the low bytes of v */
    memcpy(buf + (changed - 1) * esize, &v, esize < sizeof v ? esize : sizeof v);
  }
  int rc = -1;
  hid_t sp = r ? H5Screate_simple(r, d, NULL) : H5Screate(H5S_SCALAR);
  hid_t dcpl = make_dcpl(r, d, H5Tget_size(ftype), store, in);
  hid_t ds = sp < 0 || dcpl < 0 ? -1 : H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (ds >= 0 && (n == 0 || H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0)) rc = 0;
  if (ds >= 0) H5Dclose(ds);
  if (dcpl >= 0) H5Pclose(dcpl);
  if (sp >= 0) H5Sclose(sp);
  free(buf);
  return rc;
}

hid_t gen_create(const char *path) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* a description HDF5 refuses is skipped, silently */
  return H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
}

void gen_file_then_run(const char *path, const uint8_t *data, size_t size,
                       int (*write_described)(const uint8_t *data, size_t size), void (*run)(void *)) {
  static const uint8_t hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  static const char txl_digest[] = "txl-checkpoint digest"; /* a checkpoint's user block */
  const int file = (size >= 8 && !memcmp(data, hdf5_signature, 8)) ||
                   (size >= 512 + 8 && !memcmp(data + 512, hdf5_signature, 8)) ||
                   (size >= sizeof txl_digest - 1 && !memcmp(data, txl_digest, sizeof txl_digest - 1));
  if (file)
    fuzz_write_file(path, data, size);
  else if (write_described(data, size) != 0)
    return;
  fuzz_run(run, NULL, FUZZ_EXIT_CRASH);
}
