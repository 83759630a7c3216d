/* A checkpoint without a digest (written by an older txl), verified whole the only way it can
 * be: every dataset read back, so that HDF5 checks every chunk's Fletcher32 checksum (and the
 * chunk indexes' checksums on the way). txl_ckpt_find uses it before it resumes from such a file;
 * a file with a digest needs none of it (the digest covers every byte). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

#define SLAB_BYTES ((hsize_t)16 << 20) /* read at most this much at a time (whole rows) */

/* Reads dataset `name` of loc (named `full` in messages) a slab of rows at a time. Serial. */
static void verify_one(CkptCtx *c, hid_t loc, const char *name, const char *full) {
  hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
  hid_t fsp = d < 0 ? -1 : H5Dget_space(d);
  const int nd = fsp < 0 ? -1 : H5Sget_simple_extent_ndims(fsp);
  hsize_t dims[8] = {0};
  if (d < 0 || nd < 0 || nd > 8 || H5Sget_simple_extent_dims(fsp, dims, NULL) < 0) {
    ckpt_fail_h5(c, "cannot open dataset '%s'", full);
  } else if (nd > 0) {
    hsize_t row = 4; /* bytes of one index of dimension 0, read as float32 */
    for (int i = 1; i < nd; i++) row *= dims[i];
    hsize_t rows = row ? SLAB_BYTES / row : dims[0];
    if (rows < 1) rows = 1;
    float *buf = txl_malloc((size_t)(rows * row) + 4, "checkpoint slab");
    hsize_t start[8] = {0}, count[8];
    for (int i = 0; i < nd; i++) count[i] = dims[i];
    for (hsize_t r0 = 0; r0 < dims[0] && c->ok && row > 0; r0 += rows) {
      start[0] = r0;
      count[0] = dims[0] - r0 < rows ? dims[0] - r0 : rows;
      hid_t msp = H5Screate_simple(nd, count, NULL);
      if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
          H5Dread(d, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, buf) < 0) {
        CkptH5Trace t;
        ckpt_h5_trace(&t);
        if (t.checksum)
          ckpt_fail(c, "dataset '%s' is damaged: its checksum (Fletcher32) does not match", full);
        else
          ckpt_fail_h5(c, "reading dataset '%s' failed", full);
      }
      if (msp >= 0) H5Sclose(msp);
    }
    free(buf);
  }
  if (fsp >= 0) H5Sclose(fsp);
  if (d >= 0) H5Dclose(d);
}

typedef struct {
  CkptCtx *c;
  const char *group;
} GroupWalk;

static herr_t verify_cb(hid_t g, const char *name, const H5L_info_t *info, void *data) {
  (void)info;
  GroupWalk *w = data;
  char full[512];
  snprintf(full, sizeof full, "/%s/%.400s", w->group, name);
  verify_one(w->c, g, name, full);
  return w->c->ok ? 0 : 1;
}

void ckpt_verify_datasets(CkptCtx *c, hid_t file) {
  if (c->ok && c->rank == 0) {
    for (int k = 0; k < 3 && c->ok; k++) {
      hid_t g = H5Gopen2(file, CKPT_GROUPS[k], H5P_DEFAULT);
      GroupWalk w = {c, CKPT_GROUPS[k]};
      hsize_t idx = 0;
      if (g < 0) ckpt_fail_h5(c, "cannot open group '/%s'", CKPT_GROUPS[k]);
      else if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, verify_cb, &w) < 0 && c->ok)
        ckpt_fail_h5(c, "cannot list group '/%s'", CKPT_GROUPS[k]);
      if (g >= 0) H5Gclose(g);
    }
    if (c->ok) verify_one(c, file, "mems", "/mems");
  }
  ckpt_agree(c);
}
