/* Writing a checkpoint (txl_ckpt_write): agree on what to write, reserve the space, create
 * <path>.tmp, write the root attributes, the tensors and the memory collectively, then rename. */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/checkpoint/ckpt_internal.h"

const char *const CKPT_GROUPS[3] = {"params", "adam_m", "adam_v"};

/* Creates a float32 dataset `name` in loc and writes this rank's part collectively: the file
 * selection is the box [start, start + count) (count NULL: this rank writes nothing), the
 * memory holds that box densely at buf. chunk NULL: contiguous without filter (empty
 * datasets). collective */
static void write_dataset(CkptCtx *c, hid_t loc, const char *group, const char *name, int nd,
                          const hsize_t *dims, const hsize_t *chunk, const hsize_t *start,
                          const hsize_t *count, const TxlTensorInfo *ti, const float *buf, hid_t dxpl) {
  const char *sep = group[0] ? "/" : "";
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hid_t fsp = H5Screate_simple(nd, dims, NULL);
  if (dcpl < 0 || fsp < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
      (chunk && (H5Pset_chunk(dcpl, nd, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0)))
    ckpt_fail_h5(c, "dataset properties of '/%s%s%s'", group, sep, name);
  hid_t d = -1;
  if (ckpt_agree(c)) {
    d = H5Dcreate2(loc, name, H5T_IEEE_F32LE, fsp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) ckpt_fail_h5(c, "creating dataset '/%s%s%s' failed", group, sep, name);
  }
  int created = ckpt_all_true(d >= 0);
  if (ckpt_agree(c) && chunk) {
    hid_t msp = -1;
    if (count) { /* buf holds count values end to end, or ti's padded rows */
      msp = ti ? ckpt_tensor_memspace(ti) : H5Screate_simple(nd, count, NULL);
      if (msp == H5S_ALL) msp = H5Screate_simple(nd, count, NULL);
      if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        ckpt_fail_h5(c, "selecting the part of '/%s%s%s' to write", group, sep, name);
    } else {
      hsize_t one = 1;
      msp = H5Screate_simple(1, &one, NULL);
      if (msp < 0 || H5Sselect_none(msp) < 0 || H5Sselect_none(fsp) < 0)
        ckpt_fail_h5(c, "selecting nothing of '/%s%s%s'", group, sep, name);
    }
    /* a failed selection must not leave the others in the collective write */
    if (ckpt_agree(c) && H5Dwrite(d, H5T_NATIVE_FLOAT, msp, fsp, dxpl, buf) < 0)
      ckpt_fail_h5(c, "writing dataset '/%s%s%s' to %s.tmp failed", group, sep, name, c->path);
    if (msp >= 0) H5Sclose(msp);
  }
  if (d >= 0 && created && H5Dclose(d) < 0)
    ckpt_fail_h5(c, "closing dataset '/%s%s%s' failed", group, sep, name);
  if (fsp >= 0) H5Sclose(fsp);
  if (dcpl >= 0) H5Pclose(dcpl);
  ckpt_agree(c);
}

/* Whole rows, at most CKPT_CHUNK_BYTES, the rows spread evenly over the chunks: a filtered edge chunk
 * is stored at full size, so a nearly empty last chunk would waste most of a chunk. */
static void tensor_chunk(const TxlTensorInfo *ti, hsize_t chunk[2]) {
  int64_t row = ti->rank == 2 ? ti->shape[1] : 1;
  int64_t rows = ti->shape[0];
  int64_t fit = CKPT_CHUNK_BYTES / (row * (int64_t)sizeof(float));
  if (fit < 1) fit = 1;
  int64_t n_chunks = (rows + fit - 1) / fit;
  chunk[0] = (hsize_t)((rows + n_chunks - 1) / n_chunks);
  chunk[1] = (hsize_t)row;
}

/* One group of tensors (parameters or a moment); rank 0 writes the data. collective */
static void write_group(CkptCtx *c, hid_t file, const char *group, const TxlParamTable *t,
                        const float *base, hid_t dxpl) {
  hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  hid_t g = -1;
  if (gcpl < 0 || H5Pset_obj_track_times(gcpl, 0) < 0 ||
      (g = H5Gcreate2(file, group, H5P_DEFAULT, gcpl, H5P_DEFAULT)) < 0)
    ckpt_fail_h5(c, "creating group '/%s' failed", group);
  if (gcpl >= 0) H5Pclose(gcpl);
  int created = ckpt_all_true(g >= 0);
  for (int i = 0; i < t->n_tensors && ckpt_agree(c); i++) {
    const TxlTensorInfo *ti = &t->tensors[i];
    hsize_t dims[2] = {(hsize_t)ti->shape[0], (hsize_t)ti->shape[1]}, chunk[2], start[2] = {0, 0};
    tensor_chunk(ti, chunk);
    int empty = ti->numel == 0;
    write_dataset(c, g, group, ti->name, ti->rank, dims, empty ? NULL : chunk, start,
                  c->rank == 0 ? dims : NULL, ti, base + ti->offset, dxpl);
  }
  if (g >= 0 && created && H5Gclose(g) < 0) ckpt_fail_h5(c, "closing group '/%s' failed", group);
  ckpt_agree(c);
}

static void sync_folder_of(const char *path) {
  char *dir = txl_malloc(strlen(path) + 2, "folder name");
  strcpy(dir, path);
  char *slash = strrchr(dir, '/');
  if (!slash) strcpy(dir, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd); /* not every file system syncs folders: best effort */
    close(fd);
  }
  free(dir);
}

/* An upper bound of the file's size: every chunk with its checksum, plus generous room for the
 * metadata (object headers, chunk indexes, attributes). */
static int64_t estimate_bytes(const TxlCkptBuffers *b, size_t config_len) {
  int64_t est = ((int64_t)1 << 20) + 2 * (int64_t)config_len;
  for (int i = 0; i < b->table->n_tensors; i++) {
    const TxlTensorInfo *ti = &b->table->tensors[i];
    hsize_t chunk[2];
    tensor_chunk(ti, chunk);
    int64_t chunk_bytes = (int64_t)(chunk[0] * chunk[1]) * 4;
    int64_t n_chunks = (ti->shape[0] + (int64_t)chunk[0] - 1) / (int64_t)chunk[0];
    est += 3 * (n_chunks * (chunk_bytes + 4) + 8192);
  }
  est += (int64_t)b->n_layer * b->B_global * ((int64_t)b->mem_len * b->d_model * 4 + 4) + 8192;
  est += (int64_t)b->n_layer * b->B_global * 64; /* chunk index entries of /mems */
  return est;
}

/* Reserves the file's space before HDF5 creates the file, so that a full disk or a file-size
 * limit shows here, before HDF5 has written a byte, and never as a failed write inside HDF5:
 * HDF5 1.10 cannot close a file whose metadata flush fails (H5Fclose fails, the file ID stays
 * behind and MPI_Finalize crashes on it; with several ranks one waits in MPI_File_close's barrier
 * and another in the metadata cache's, for ever). Even a file that only H5Fcreate has touched
 * needs its superblock written at close, so the space must be held before H5Fcreate, not after.
 * Every rank checks its file-size limit; rank 0 creates (or empties) the temporary and allocates
 * `est` bytes to it past its end (FALLOC_FL_KEEP_SIZE): its size stays 0, H5Fcreate truncates
 * only a non-empty file, so the blocks stay reserved and every write of HDF5 lands in them.
 * Where the file system cannot allocate (fallocate unsupported) the free space is compared
 * instead. Returns 1 on rank 0 when it created the temporary (to remove on failure). */
static int reserve_space(CkptCtx *c, const char *tmp, int64_t est) {
  int err = 0, created = 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (int64_t)rl.rlim_cur < est)
    err = EFBIG;
  if (!err && c->rank == 0) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      err = errno;
    } else {
      created = 1;
      if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)est) != 0) err = errno;
      if (err == EOPNOTSUPP || err == ENOSYS) {
        struct statvfs vs;
        err = 0;
        if (fstatvfs(fd, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < est) err = ENOSPC;
      }
      if (close(fd) != 0 && !err) err = errno;
    }
  }
  if (err)
    ckpt_fail(c, "no room for the checkpoint: reserving %.1f MB for %s failed: %s", (double)est / 1e6,
         tmp, strerror(err));
  return created;
}

/* Gives the reserved blocks past the file's end back (HDF5 has set the file's size when it
 * closed it). Rank 0; best effort: a file system that cannot punch keeps them until the file
 * is removed. */
static void release_reserve(const char *tmp, int64_t est) {
  int fd = open(tmp, O_WRONLY);
  if (fd < 0) return;
  struct stat sb;
  if (fstat(fd, &sb) == 0 && sb.st_size < est) {
    /* to the end of the block holding the reservation's last byte: a hole frees whole blocks */
    const int64_t blk = sb.st_blksize > 0 ? (int64_t)sb.st_blksize : 4096;
    const int64_t end = (est + blk - 1) / blk * blk;
    (void)fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, sb.st_size, end - sb.st_size);
  }
  close(fd);
}

/* ---- the test hook (FORMAT.md) ------------------------------------------------------------ */

static int g_abort_after_params = 0;
static int g_no_digest = 0; /* write files as txl did before the digest (tests of such files) */

void txl_ckpt_fault_from_env(void) {
  const char *f = getenv("TXL_CKPT_FAULT");
  g_abort_after_params = f && strcmp(f, "after_params") == 0;
  g_no_digest = f && strcmp(f, "no_digest") == 0;
}

/* TXL_CKPT_FAULT=after_params: every rank aborts, the parameters of tmp written. collective */
static void fault_after_params(const CkptCtx *c, const char *tmp) {
  if (!g_abort_after_params) return;
  txl_dist_barrier_blocking();
  if (c->rank == 0) {
    fprintf(stderr, "txl: TXL_CKPT_FAULT=after_params: aborting while writing %s\n", tmp);
    fflush(stderr);
  }
  abort();
}

/* ---- the writer's steps ------------------------------------------------------------------- */

/* Rank 0's state and config text, on every rank (they should be equal everywhere; rank 0's are
 * what the file records). Returns the config (malloc'd) and its length, or NULL after a
 * failure. collective */
static char *agree_on_inputs(CkptCtx *c, const TxlCkptState *st_in, const char *config_ini,
                             TxlCkptState *st, int *clen_out) {
  memset(st, 0, sizeof *st);
  if (st_in) *st = *st_in;
  else ckpt_fail(c, "internal error: no checkpoint state");
  txl_dist_bcast_blocking(st, (int)sizeof *st, 0);
  st->run_id[TXL_CKPT_ID_LEN - 1] = st->vocab_digest[TXL_CKPT_ID_LEN - 1] = 0;
  if (!config_ini) config_ini = "";
  int clen = (int)(strlen(config_ini) < (size_t)INT32_MAX ? strlen(config_ini) : INT32_MAX);
  txl_dist_bcast_blocking(&clen, (int)sizeof clen, 0);
  if (clen >= CKPT_MAX_CONFIG_BYTES) {
    ckpt_fail(c, "the configuration text is %d bytes, more than a checkpoint holds (%d)", clen,
              CKPT_MAX_CONFIG_BYTES);
    ckpt_agree(c);
    return NULL;
  }
  char *config = txl_malloc((size_t)clen + 1, "checkpoint config");
  if (c->rank == 0) memcpy(config, config_ini, (size_t)clen);
  config[clen] = '\0';
  txl_dist_bcast_blocking(config, clen, 0);
  *clen_out = clen;
  return config;
}

/* Creates tmp as an HDF5 file for parallel writes: -1 after a failure. Sets *everywhere when
 * every rank has it open (closing is collective). collective */
static hid_t create_file(CkptCtx *c, const char *tmp, int *everywhere) {
  hid_t file = -1;
  hid_t fapl = ckpt_make_fapl();
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  /* The 1.10 file format: every piece of metadata (superblock, object headers with the root
   * attributes, chunk indexes) carries a checksum that HDF5 verifies before it decodes it, as
   * Fletcher32 does for the tensors; a damaged byte is then an error, not a crash in HDF5. */
  /* The user block holds the digest of the whole file (ckpt_digest.c), written after HDF5 closed it. */
  if (fapl < 0 || fcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
      (!g_no_digest && H5Pset_userblock(fcpl, CKPT_USERBLOCK) < 0) ||
      H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) < 0) {
    ckpt_fail_h5(c, "file properties for parallel HDF5");
  } else {
    file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    if (file < 0) ckpt_fail_h5(c, "cannot create %s", tmp);
  }
  if (fcpl >= 0) H5Pclose(fcpl);
  if (fapl >= 0) H5Pclose(fapl);
  *everywhere = ckpt_all_true(file >= 0);
  return file;
}

/* /mems [n_layer, mem_len, B_global, d_model]: this rank's columns. collective */
static void write_mems(CkptCtx *c, hid_t file, const TxlCkptBuffers *b, hid_t dxpl) {
  hsize_t dims[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_global,
                     (hsize_t)b->d_model};
  hsize_t chunk[4] = {1, (hsize_t)b->mem_len, 1, (hsize_t)b->d_model};
  hsize_t start[4] = {0, 0, (hsize_t)b->col0, 0};
  hsize_t count[4] = {(hsize_t)b->n_layer, (hsize_t)b->mem_len, (hsize_t)b->B_local,
                      (hsize_t)b->d_model};
  int empty = b->mem_len == 0;
  write_dataset(c, file, "", "mems", 4, dims, empty ? NULL : chunk, start,
                b->B_local > 0 ? count : NULL, NULL, b->mems, dxpl);
}

/* Everything the file holds, into the open file; stops at the first failure. collective */
static void write_contents(CkptCtx *c, hid_t file, const char *tmp, const TxlCkptState *st,
                           const char *config, const TxlCkptBuffers *b) {
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
    ckpt_fail_h5(c, "transfer properties for collective writes");
  if (!ckpt_agree(c)) goto out;
  CkptGeometry g = {b->B_global, b->mem_len, b->n_layer, b->d_model, b->table->attn_type};
  ckpt_write_root_attrs(c, file, st, &g, config);
  if (!ckpt_agree(c)) goto out;
  const float *groups[3] = {b->params, b->adam_m, b->adam_v};
  for (int k = 0; k < 3 && c->ok; k++) {
    write_group(c, file, CKPT_GROUPS[k], b->table, groups[k], dxpl);
    if (k == 0 && c->ok) fault_after_params(c, tmp);
  }
  if (c->ok) write_mems(c, file, b, dxpl); /* each write ends agreed: c->ok is the same everywhere */
  if (!c->ok) goto out;
  if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) ckpt_fail_h5(c, "flushing %s failed", tmp);
  ckpt_agree(c);
out:
  if (dxpl >= 0) H5Pclose(dxpl);
}

/* Rank 0 writes the digest of the finished tmp (after every rank closed it: the file is final),
 * then renames it to path. collective */
static void publish(CkptCtx *c, const char *tmp, const char *path, int64_t est, const char *run_id) {
  if (c->ok && c->rank == 0) {
    char why[CKPT_MSG_LEN];
    release_reserve(tmp, est);
    if (!g_no_digest && ckpt_digest_write(tmp, run_id, why, sizeof why) != 0)
      ckpt_fail(c, "%s", why);
    else if (rename(tmp, path) != 0)
      ckpt_fail(c, "renaming %s to %s failed: %s", tmp, path, strerror(errno));
    else
      sync_folder_of(path);
  }
  ckpt_agree(c);
}

int txl_ckpt_write(const char *path, const char *config_ini, const TxlCkptState *st_in,
                   const TxlCkptBuffers *b, char *err, size_t errlen) {
  CkptCtx c;
  ckpt_ctx_begin(&c, path);
  TxlCkptState st;
  int clen = 0;
  char *config = agree_on_inputs(&c, st_in, config_ini, &st, &clen);
  if (!config) return ckpt_ctx_end(&c, err, errlen);

  if (st.step < 0 || st.tokens_seen < 0 || st.data_pos < 0 || st.epoch < 0 || st.adam_t < 0)
    ckpt_fail(&c, "internal error: negative counters in the checkpoint state (step %lld, "
              "tokens_seen %lld, data_pos %lld, epoch %lld, adam_t %d)", (long long)st.step,
              (long long)st.tokens_seen, (long long)st.data_pos, (long long)st.epoch, st.adam_t);
  ckpt_check_buffers(&c, b, 1, st.mem_rows);
  char *tmp = NULL;
  int created_tmp = 0;
  int64_t est = 0; /* bytes reserved for the file */
  if (ckpt_agree(&c)) {
    tmp = txl_malloc(strlen(path) + 5, "temporary name");
    sprintf(tmp, "%s.tmp", path);
    /* the space first, then <path>.tmp as an HDF5 file (see reserve_space) */
    est = estimate_bytes(b, (size_t)clen);
    created_tmp = reserve_space(&c, tmp, est);
  }
  if (ckpt_agree(&c)) {
    int everywhere = 0;
    hid_t file = create_file(&c, tmp, &everywhere);
    if (ckpt_agree(&c)) write_contents(&c, file, tmp, &st, config, b);
    if (file >= 0 && everywhere) ckpt_close_file(&c, &file);
    ckpt_agree(&c);
    publish(&c, tmp, path, est, st.run_id);
  }
  if (!c.ok && created_tmp && tmp) unlink(tmp);
  free(tmp);
  free(config);
  return ckpt_ctx_end(&c, err, errlen);
}
