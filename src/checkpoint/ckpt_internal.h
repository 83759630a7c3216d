/* What the checkpoint files (src/checkpoint/ckpt_*.c) share and nothing else sees.
 *
 * Failure agreement: each rank records its first failure in a CkptCtx; after every HDF5 call
 * that is collective or may fail (create, open, each dataset's create / write / read, flush,
 * close) the ranks agree (the lowest failing rank over all ranks, then that rank's message is
 * broadcast: dist/'s blocking collectives), so every rank leaves at the same point with the same
 * message and no rank is left waiting in a collective that the others skipped. After a failure
 * the ranks still close what they opened, in the same order. */
#ifndef TXL_CHECKPOINT_CKPT_INTERNAL_H
#define TXL_CHECKPOINT_CKPT_INTERNAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "src/checkpoint/checkpoint.h"

/* Chunks of a parameter / moment dataset hold whole rows and at most this many bytes (one chunk
 * for every tensor up to this size). */
#define CKPT_CHUNK_BYTES ((int64_t)4 << 20)
/* The config text is a root attribute: HDF5 keeps attributes in the object header (< 64 KiB). */
#define CKPT_MAX_CONFIG_BYTES (60 * 1024)
#define CKPT_MSG_LEN 1024

/* The three groups of tensors, in file order: the parameters, Adam's two moments. */
extern const char *const CKPT_GROUPS[3];

/* ---- failure bookkeeping and agreement (ckpt_common.c) ---------------------------------- */
typedef struct {
  const char *path;       /* the file named in messages */
  int rank, world;
  int ok;                 /* no failure seen on this rank (after ckpt_agree: on any rank) */
  int sealed;             /* after ckpt_open_file: the file's digest matched (0: it has none) */
  char msg[CKPT_MSG_LEN]; /* "<path>: <problem>" */
  H5E_auto2_t h5_fn;      /* HDF5's error printing, restored at the end */
  void *h5_data;
} CkptCtx;

typedef struct {
  char desc[2][256]; /* the two innermost messages of the HDF5 error stack */
  int n;
  int checksum;      /* some message mentions a checksum (Fletcher32) */
} CkptH5Trace;

void ckpt_ctx_begin(CkptCtx *c, const char *path);
/* 0, or -1 with the agreed message in err. */
int ckpt_ctx_end(CkptCtx *c, char *err, size_t errlen);
void ckpt_h5_trace(CkptH5Trace *t);
/* Records the first failure of this rank: "<path>: <what>" (fail_h5: with HDF5's innermost
 * messages appended). */
void ckpt_fail(CkptCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ckpt_fail_h5(CkptCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when no rank has failed; otherwise every rank gets the message of the lowest failing rank,
 * is marked failed, and 0 is returned. collective */
int ckpt_agree(CkptCtx *c);
/* 1 when `flag` is set on every rank. collective */
int ckpt_all_true(int flag);

/* ---- buffers: local sanity and agreement between ranks (ckpt_common.c) ------------------ */
void ckpt_shape_text(char *buf, size_t n, int nd, const hsize_t *d);
/* Checks b on this rank, then that every rank describes the same model and memory and that the
 * ranks' columns tile [0, B_global) in rank order. collective */
void ckpt_check_buffers(CkptCtx *c, const TxlCkptBuffers *b, int need_mem_rows, int mem_rows);

/* ---- HDF5 helpers (ckpt_common.c) ------------------------------------------------------- */
hid_t ckpt_make_fapl(void);
/* The memory dataspace of a parameter tensor in its buffer (from ti->offset): its rows ld floats
 * apart (the padding of the layout, src/model/params.h), the tensor's values selected (packed in
 * the file). H5S_ALL for a tensor whose values lie end to end; -1 on failure. Close with
 * ckpt_close_memspace. */
hid_t ckpt_tensor_memspace(const TxlTensorInfo *ti);
void ckpt_close_memspace(hid_t msp);
/* Every rank writes the same value (attribute writes are collective). collective */
void ckpt_attr_write(CkptCtx *c, hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v);
void ckpt_attr_write_string(CkptCtx *c, hid_t obj, const char *name, const char *value);
void ckpt_attr_i32(CkptCtx *c, hid_t o, const char *name, int64_t v);
void ckpt_attr_i64(CkptCtx *c, hid_t o, const char *name, int64_t v);
void ckpt_attr_f64(CkptCtx *c, hid_t o, const char *name, double v);
/* A scalar attribute of class `cls` read as `mtype` / a string attribute malloc'd into *out.
 * Return 0, or -1 after ckpt_fail(). This rank only. */
int ckpt_attr_read_num_local(CkptCtx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype,
                             void *v);
int ckpt_attr_read_string_local(CkptCtx *c, hid_t obj, const char *name, char **out);
/* The readers above followed by agreement, so that all ranks stop at the same attribute.
 * collective */
int ckpt_attr_read_num(CkptCtx *c, hid_t obj, const char *name, H5T_class_t cls, hid_t mtype, void *v);
int ckpt_attr_read_string(CkptCtx *c, hid_t obj, const char *name, char **out);
/* Opens c->path read-only on every rank (checks the file first: a clearer message than
 * HDF5's). Returns the file or -1 (after agreement: all ranks alike). collective */
hid_t ckpt_open_file(CkptCtx *c);
void ckpt_close_file(CkptCtx *c, hid_t *file);

/* ---- the digest of the whole file (ckpt_digest.c, FORMAT.md) ---------------------------- */
/* The HDF5 user block of every checkpoint: the digest header, HDF5's part after it. */
#define CKPT_USERBLOCK 512
/* Rank 0, on the closed temporary file: hashes it and writes the header (size, SHA-256, run
 * id) into its user block, then fsyncs it. Returns 0, or -1 with the reason in why. Serial. */
int ckpt_digest_write(const char *tmp, const char *run_id, char *why, size_t n);
/* Before HDF5 opens c->path: rank 0 checks the digest (streamed), every rank gets the verdict
 * and c->sealed. A file without a digest (older txl) passes with a notice on stderr, once per
 * file: HDF5's own checksums are then all it has. collective */
void ckpt_digest_verify(CkptCtx *c);
/* The header alone (no hash, no HDF5): *sealed = 1 with its run id, 0 for a file without one;
 * -1 with the problem in msg when the header or the file's size is wrong. Serial. */
int ckpt_digest_run_id(const char *path, int *sealed, char run_id[TXL_CKPT_ID_LEN], char *msg, size_t n);

/* ---- a file without a digest, whole (ckpt_verify.c) ------------------------------------- */
/* Reads every dataset of /params, /adam_m, /adam_v and /mems back (rank 0, a slab at a time):
 * each chunk's Fletcher32 checksum is verified. collective */
void ckpt_verify_datasets(CkptCtx *c, hid_t file);

/* ---- the root attributes (ckpt_attrs.c) ------------------------------------------------- */
/* Geometry recorded beside the state. */
typedef struct {
  int batch_size, mem_len, n_layer, d_model;
  int attn_type; /* model.attn_type of the parameters (0 in files written before it) */
} CkptGeometry;
/* collective */
void ckpt_write_root_attrs(CkptCtx *c, hid_t file, const TxlCkptState *st, const CkptGeometry *g,
                           const char *config);
/* Reads and validates the root attributes (state, geometry, optionally the config). collective */
void ckpt_read_root_attrs(CkptCtx *c, hid_t file, TxlCkptState *st, CkptGeometry *g, char **config);

#endif
