#include "data/prep/writer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "data/h5msg.h"
#include "src/base/error.h"

/* One line: "<output>: writing the output failed: <what>: <system message>" (a full disk, an I/O
 * error), or "... <what> (HDF5: <reason>)" for a failure of HDF5's own. */
static void fail(const H5Out *o, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
static void fail(const H5Out *o, const char *fmt, ...) {
  char reason[256], msg[512];
  const int sys = txl_h5_reason(reason, sizeof reason);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (sys) txl_fatal("%s: writing the output failed: %s: %s", o->name, msg, reason);
  txl_fatal("%s: writing the output failed: %s%s%s%s", o->name, msg, reason[0] ? " (HDF5: " : "", reason,
            reason[0] ? ")" : "");
}

void h5out_create(H5Out *o, const char *tmp_path, const char *name) {
  o->name = name;
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  if (fcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0) fail(o, "file creation properties");
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  /* The 1.10 file format: every piece of metadata (superblock, object headers with the
   * attributes, chunk indexes) carries a checksum that HDF5 verifies before it decodes it, as
   * Fletcher32 does for the ids; a damaged byte is then an error, not a crash in HDF5's decoder. */
  if (fapl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0)
    fail(o, "file access properties");
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl, 1, 1); /* lock, but go on where the file system has no locks */
#endif
  o->file = H5Fcreate(tmp_path, H5F_ACC_TRUNC, fcpl, fapl);
  if (o->file < 0) fail(o, "cannot create %s", tmp_path);
  H5Pclose(fapl);
  H5Pclose(fcpl);
}

void h5out_close(H5Out *o) {
  if (H5Fclose(o->file) < 0) fail(o, "closing the file");
  o->file = -1;
}

static void write_attr(H5Out *o, const char *attr, hid_t file_type, hid_t mem_type, const void *v) {
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = sp < 0 ? -1 : H5Acreate2(o->file, attr, file_type, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, mem_type, v) < 0) fail(o, "attribute '%s'", attr);
  H5Aclose(a);
  H5Sclose(sp);
}

void h5out_attr_string(H5Out *o, const char *attr, const char *value) {
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0 || H5Tset_size(t, strlen(value) + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)
    fail(o, "string type for '%s'", attr);
  write_attr(o, attr, t, t, value);
  H5Tclose(t);
}

void h5out_attr_int32(H5Out *o, const char *attr, int32_t value) {
  write_attr(o, attr, H5T_STD_I32LE, H5T_NATIVE_INT32, &value);
}

void h5out_attr_int64(H5Out *o, const char *attr, int64_t value) {
  write_attr(o, attr, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

static hid_t dataset(H5Out *o, const char *dset, hid_t type, int rank, const hsize_t *dim, const hsize_t *ch) {
  hid_t sp = H5Screate_simple(rank, dim, NULL);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (sp < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 || H5Pset_chunk(dcpl, rank, ch) < 0 ||
      H5Pset_fletcher32(dcpl) < 0)
    fail(o, "dataset properties of '/%s'", dset);
  hid_t d = H5Dcreate2(o->file, dset, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (d < 0) fail(o, "creating dataset '/%s'", dset);
  H5Pclose(dcpl);
  H5Sclose(sp);
  return d;
}

hid_t h5out_dataset(H5Out *o, const char *dset, hid_t type, int64_t n, int64_t chunk) {
  hsize_t dim = (hsize_t)n, ch = (hsize_t)(n < chunk ? n : chunk);
  if (ch == 0) ch = 1;
  return dataset(o, dset, type, 1, &dim, &ch);
}

hid_t h5out_dataset_2d(H5Out *o, const char *dset, hid_t type, int64_t rows, int64_t cols, int64_t chunk_rows) {
  hsize_t dim[2] = {(hsize_t)rows, (hsize_t)cols}, ch[2] = {(hsize_t)(rows < chunk_rows ? rows : chunk_rows), (hsize_t)cols};
  if (ch[0] == 0) ch[0] = 1;
  return dataset(o, dset, type, 2, dim, ch);
}

void h5out_write(H5Out *o, hid_t dset, const char *dset_name, hid_t mem_type, int64_t start,
                 int64_t n, const void *buf) {
  if (n == 0) return;
  hsize_t st = (hsize_t)start, cnt = (hsize_t)n;
  hid_t fsp = H5Dget_space(dset);
  hid_t msp = H5Screate_simple(1, &cnt, NULL);
  if (fsp < 0 || msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, &st, NULL, &cnt, NULL) < 0 ||
      H5Dwrite(dset, mem_type, msp, fsp, H5P_DEFAULT, buf) < 0)
    fail(o, "writing '/%s'", dset_name);
  H5Sclose(msp);
  H5Sclose(fsp);
}

void h5out_write_all(H5Out *o, hid_t dset, const char *dset_name, hid_t mem_type, int64_t n, const void *buf) {
  if (n == 0) return;
  if (H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) fail(o, "writing '/%s'", dset_name);
}

void h5out_close_dataset(H5Out *o, hid_t dset, const char *dset_name) {
  if (H5Dclose(dset) < 0) fail(o, "closing '/%s'", dset_name);
}
