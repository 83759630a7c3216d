/* HDF5 output of txl-prep: no timestamps on any object (H5Pset_obj_track_times(.., 0)), so the
 * same input gives a byte-identical file; every dataset chunked with the Fletcher32 filter. A
 * failure ends the program with one line naming the output file and the reason (data/h5msg.h). */
#ifndef TXL_DATA_PREP_WRITER_H
#define TXL_DATA_PREP_WRITER_H

#include <hdf5.h>
#include <stdint.h>

typedef struct {
  const char *name; /* the output file as the user named it (for messages) */
  hid_t file;
} H5Out;

void h5out_create(H5Out *o, const char *tmp_path, const char *name);
void h5out_close(H5Out *o);
void h5out_attr_string(H5Out *o, const char *attr, const char *value);
void h5out_attr_int32(H5Out *o, const char *attr, int32_t value);
void h5out_attr_int64(H5Out *o, const char *attr, int64_t value);
/* A 1-D dataset of n elements of file type `type`, chunks of min(n, chunk) elements. */
hid_t h5out_dataset(H5Out *o, const char *dset, hid_t type, int64_t n, int64_t chunk);
/* A 2-D dataset [rows, cols] of file type `type`, chunks of min(rows, chunk_rows) rows (at least 1). */
hid_t h5out_dataset_2d(H5Out *o, const char *dset, hid_t type, int64_t rows, int64_t cols, int64_t chunk_rows);
/* Writes n elements of memory type mem_type from buf at [start, start + n). */
void h5out_write(H5Out *o, hid_t dset, const char *dset_name, hid_t mem_type, int64_t start,
                 int64_t n, const void *buf);
/* Writes the whole dataset (n elements in all; nothing when n = 0) from buf. */
void h5out_write_all(H5Out *o, hid_t dset, const char *dset_name, hid_t mem_type, int64_t n, const void *buf);
void h5out_close_dataset(H5Out *o, hid_t dset, const char *dset_name);

#endif
