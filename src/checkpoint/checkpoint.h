/* Checkpoints: one HDF5 file per checkpoint, written and read by all ranks together with
 * parallel HDF5 (MPI-IO on MPI_COMM_WORLD). The layout is in src/checkpoint/FORMAT.md.
 *
 * Parameters and both Adam moments are stored by tensor name with the parameter table's shapes;
 * the memory (mems) is stored by global column, so a checkpoint written by P ranks can be read
 * by any rank count that splits the same batch_size into contiguous column shards.
 *
 * Every file carries a SHA-256 digest of all its bytes in its HDF5 user block (FORMAT.md); every
 * reader below checks it (rank 0 hashes, streamed; every rank gets the verdict) before HDF5 opens
 * the file, because HDF5 does not survive every damaged byte of its metadata. A file without one
 * (older txl) is read after a notice on stderr, guarded by HDF5's checksums alone.
 *
 * Every function returning int returns 0 on success or -1 with a one-line message naming the
 * file in `err` ("<path>: <problem>"); the collective ones give every rank the same verdict and
 * the same message (that of the lowest rank that failed), so callers can exit together
 * (txl_fatal_all). HDF5's own error printing is switched off inside these calls. */
#ifndef TXL_CHECKPOINT_CHECKPOINT_H
#define TXL_CHECKPOINT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "src/model/params.h"

#define TXL_CKPT_FORMAT "txl-checkpoint"
#define TXL_CKPT_FORMAT_VERSION 2
/* Version 1 files (without run_id and vocab_digest) are still read: both read as "". */
#define TXL_CKPT_OLDEST_VERSION 1
#define TXL_CKPT_ID_LEN 65 /* run_id and vocab_digest: at most 64 characters and a NUL */

/* The training loop's sums over the steps since its last progress line (src/train/report.h's
 * TxlProgress): root attributes progress_loss, _tokens, _seconds, _wait, _steps, _skipped. */
typedef struct {
  double loss, tokens, seconds, wait;
  int steps;
  long long skipped; /* of those steps, skipped for a non-finite gradient (dynamic loss scaling) */
} TxlCkptProgress;

/* The root attributes of the training state and of the geometry beside it, in the order a file
 * holds them (FORMAT.md): the one list that declares TxlCkptState's stored fields below and that
 * ckpt_attrs.c's writer and reader walk.
 *   X(where, name, kind, lo, hi, absent, set)
 *   where:  ST a field of TxlCkptState (declared from this list); PROGRESS a field of its progress
 *           (TxlCkptProgress), the attribute progress_<name>; GEO the geometry of the file
 *           (ckpt_internal.h's CkptGeometry, checked against the reading run's)
 *   kind:   I64 int64_t, I32 int, U32 uint32_t (each stored as an integer of that width), F64
 *           double, ID char[TXL_CKPT_ID_LEN] (a string of at most 64 characters)
 *   lo, hi: the range an integer's value in a file must lie in
 *   absent: the value of a file without the attribute, as text (NULL: required; an ID is "" in
 *           version 1 files)
 *   set:    NONE, or the optional set it belongs to (added at once to the format: a file holds
 *           all of a set or, written before it existed, none; has_plateau, ... say which) */
#define TXL_CKPT_ROOT_ATTRS(X)                                                                           \
  X(ST, step, I64, 0, INT64_MAX, NULL, NONE)            /* optimizer steps done */                      \
  X(ST, tokens_seen, I64, 0, INT64_MAX, NULL, NONE)     /* training tokens consumed (global) */         \
  X(ST, data_pos, I64, 0, INT64_MAX, NULL, NONE)        /* the data stream's row in each column */      \
  X(ST, epoch, I64, 0, INT64_MAX, NULL, NONE)                                                             \
  X(ST, best_step, I64, INT64_MIN, INT64_MAX, NULL, NONE) /* step of best_valid_loss (-1: none yet) */  \
  X(ST, mem_rows, I32, 0, INT32_MAX, NULL, NONE)        /* memory rows valid now, <= mem_len */          \
  X(ST, adam_t, I32, 0, INT32_MAX, NULL, NONE)          /* Adam updates done (bias correction) */        \
  /* write: ignored (the communicator's size is stored); read: the writer's */                          \
  X(ST, world_size, I32, 1, INT32_MAX, NULL, NONE)                                                        \
  X(GEO, batch_size, I32, 1, INT32_MAX, NULL, NONE)                                                       \
  X(GEO, mem_len, I32, 0, INT32_MAX, NULL, NONE)                                                          \
  X(GEO, n_layer, I32, 1, INT32_MAX, NULL, NONE)                                                          \
  X(GEO, d_model, I32, 1, INT32_MAX, NULL, NONE)                                                          \
  X(ST, seed, U32, 0, UINT32_MAX, NULL, NONE)                                                             \
  X(ST, best_valid_loss, F64, 0, 0, NULL, NONE)                                                           \
  X(ST, lr, F64, 0, 0, NULL, NONE)                      /* learning rate of the last step */            \
  /* train.scheduler = dev_perf's state (src/optim/schedule.h, TxlPlateau) */                           \
  X(ST, plateau_rate, F64, 0, 0, NULL, PLATEAU)                                                           \
  X(ST, plateau_best, F64, 0, 0, NULL, PLATEAU)                                                           \
  X(ST, plateau_bad, I32, 0, INT32_MAX, NULL, PLATEAU)                                                    \
  /* train.loss_scale's state (src/optim/loss_scale.h, TxlLossScale): S (1 when off), the finite     */ \
  /* steps in a row, the steps skipped                                                               */ \
  X(ST, loss_scale, F64, 0, 0, NULL, LOSS_SCALE)                                                          \
  X(ST, loss_scale_good, I64, 0, INT64_MAX, NULL, LOSS_SCALE)                                             \
  X(ST, loss_scale_skipped, I64, 0, INT64_MAX, NULL, LOSS_SCALE)                                          \
  /* the training loop's sums since its last progress line, so that the first line after a resume    */ \
  /* averages the same steps as without the stop (a file written before them: they start at zero)   */ \
  X(PROGRESS, loss, F64, 0, 0, NULL, PROGRESS)                                                            \
  X(PROGRESS, tokens, F64, 0, 0, NULL, PROGRESS)                                                          \
  X(PROGRESS, seconds, F64, 0, 0, NULL, PROGRESS)                                                         \
  X(PROGRESS, wait, F64, 0, 0, NULL, PROGRESS)                                                            \
  X(PROGRESS, steps, I32, 0, INT32_MAX, NULL, PROGRESS)                                                   \
  X(PROGRESS, skipped, I64, 0, INT64_MAX, NULL, PROGRESS)                                                 \
  /* the step of the latest validation (-1: none), so that a run resumed at its last step does not   */ \
  /* validate it again; in the same set                                                              */ \
  X(ST, last_eval_step, I64, -1, INT64_MAX, NULL, PROGRESS)                                               \
  /* the lineage: set when a run starts fresh, kept by every run that resumes from it */                \
  X(ST, run_id, ID, 0, 0, NULL, NONE)                                                                     \
  X(ST, vocab_digest, ID, 0, 0, NULL, NONE)             /* the corpus's txl_corpus_vocab_digest */      \
  /* train.optim's name: what adam_m, adam_v and adam_t hold; files written before it held Adam's */    \
  X(ST, optim, ID, 0, 0, "adam", NONE)                                                                    \
  /* model.attn_type; files written before it held attn_type 0's parameters */                          \
  X(GEO, attn_type, I32, TXL_ATTN_REL, TXL_ATTN_N_TYPES - 1, "0", NONE)

#define TXL_CKPT_CTYPE_I64 int64_t
#define TXL_CKPT_CTYPE_I32 int
#define TXL_CKPT_CTYPE_U32 uint32_t
#define TXL_CKPT_CTYPE_F64 double
#define TXL_CKPT_CTYPE_ID char
#define TXL_CKPT_DIM_I64
#define TXL_CKPT_DIM_I32
#define TXL_CKPT_DIM_U32
#define TXL_CKPT_DIM_F64
#define TXL_CKPT_DIM_ID [TXL_CKPT_ID_LEN]
#define TXL_CKPT_FIELD_ST(name, kind) TXL_CKPT_CTYPE_##kind name TXL_CKPT_DIM_##kind;
#define TXL_CKPT_FIELD_PROGRESS(name, kind)
#define TXL_CKPT_FIELD_GEO(name, kind)
#define TXL_CKPT_FIELD(where, name, kind, lo, hi, absent, set) TXL_CKPT_FIELD_##where(name, kind)

/* The training state besides the tensors: the ST attributes of TXL_CKPT_ROOT_ATTRS, and what a
 * read says about the file. */
typedef struct {
  TXL_CKPT_ROOT_ATTRS(TXL_CKPT_FIELD)
  TxlCkptProgress progress; /* the PROGRESS attributes */
  int format_version;  /* write: ignored (TXL_CKPT_FORMAT_VERSION is stored); read: the file's */
  /* write: ignored; read: whether the file holds the set (each 0 for a file written before it) */
  int has_plateau, has_loss_scale, has_progress;
} TxlCkptState;

/* What a rank hands to txl_ckpt_write or gets from txl_ckpt_read. Host memory. */
typedef struct {
  const TxlParamTable *table;
  float *params, *adam_m, *adam_v; /* [table->total] each, identical on every rank, laid out by
                                      the table (padded); each tensor is written and read at its
                                      offset, the padding is neither written nor read (the
                                      caller keeps it zero) */
  float *mems;                     /* this rank's [n_layer, mem_len, B_local, d_model]; may be
                                      NULL when mem_len == 0 */
  int n_layer, mem_len, d_model;
  int B_global;                    /* batch_size: columns of all ranks */
  int B_local, col0;               /* this rank's columns: [col0, col0 + B_local) */
} TxlCkptBuffers;

/* Writes `path` atomically: rank 0 first reserves the file's full size for "<path>.tmp" (a full
 * disk or a file-size limit fails here, before HDF5 has written anything), everything goes to
 * it, it is flushed and closed, then rank 0 renames it to `path` (and syncs the folder). On any
 * failure on any rank (disk full, file-size limit, bad buffers, ...) every rank returns -1 with
 * the same message, rank 0 removes the .tmp and `path` is untouched (an older file of that name
 * stays as it was).
 * `config_ini` is the resolved configuration (txl_config_write_ini), stored as text; less than
 * 60 KiB. collective: all ranks */
int txl_ckpt_write(const char *path, const char *config_ini, const TxlCkptState *st,
                   const TxlCkptBuffers *b, char *err, size_t errlen);

/* Test hook (FORMAT.md): reads TXL_CKPT_FAULT once; when it is after_params, every later
 * txl_ckpt_write makes every rank abort() once the parameters are written. Programs that write
 * checkpoints call it at start (the trainer's setup); the writer itself reads no environment. */
void txl_ckpt_fault_from_env(void);

/* Opens `path` and validates its root attributes (format, version, every attribute present with
 * the right type, values in range) without reading any tensor. On success *config_ini is the
 * stored configuration text (malloc'd: the caller frees it; config_ini may be NULL) and *st the
 * state (st may be NULL). collective: all ranks */
int txl_ckpt_peek(const char *path, char **config_ini, TxlCkptState *st, char *err, size_t errlen);

/* Whether `path` is a checkpoint that can be used whole: its digest matches (FORMAT.md: a
 * SHA-256 of the whole file, checked before HDF5 opens it) and its root attributes pass
 * txl_ckpt_peek; a file without a digest (older txl) has every dataset read back instead, each
 * chunk's checksum (Fletcher32) verified. Returns 0, or -1 with the problem in err.
 * collective: all ranks */
int txl_ckpt_verify(const char *path, char *err, size_t errlen);

/* Renews the digest of a checkpoint changed on purpose after it was written (an attribute or a
 * value rewritten with h5py or HDF5): the file then reads as one txl wrote so. Returns 0, or -1
 * with a message when the file has no digest header (written by an older txl). Serial. */
int txl_ckpt_seal(const char *path, char *err, size_t errlen);

/* Reads everything into b's buffers: every tensor of b->table must exist in /params, /adam_m
 * and /adam_v with exactly the table's shape (and no other tensor may be there), /mems must be
 * [n_layer, mem_len, B_global, d_model] as in b; each rank reads its columns [col0, col0 +
 * B_local) of the memory. Checksums (Fletcher32) are verified on every read; a damaged dataset
 * is an error naming the file and the dataset, and so is a value no checkpoint may hold (see
 * txl_ckpt_check_values; in /mems only the valid rows [0, mem_rows) count). On failure the
 * buffers hold unspecified data. collective: all ranks */
int txl_ckpt_read(const char *path, TxlCkptState *st, const TxlCkptBuffers *b, char *err,
                  size_t errlen);

/* Reads only the parameters (/params, every tensor of `table` with exactly its shape, checksums
 * verified, every value finite) into params, for evaluation and generation: any rank count, any batch. *st gets the
 * state attributes (st may be NULL). collective: all ranks */
int txl_ckpt_read_params(const char *path, const TxlParamTable *table, int n_layer, int d_model, float *params,
                         TxlCkptState *st, char *err, size_t errlen);

/* The values a checkpoint must not hold, among n floats of `dataset` (its full name, e.g.
 * "/adam_v/word_emb") read from `path`, `first` being the dataset element (C order) of v[0]: NaN
 * or an infinity, and in /adam_v a negative number (Adam's second moment is a mean of squares).
 * Returns 0, or -1 with "<path>: dataset '<dataset>' holds NaN at element <i>: the checkpoint is
 * unusable" in err. txl_ckpt_read (every group, the valid rows of /mems) and
 * txl_ckpt_read_params check what they read; txl-inspect --verify calls it. Serial. */
int txl_ckpt_check_values(const char *path, const char *dataset, const float *v, int64_t n,
                          int64_t first, char *err, size_t errlen);

/* The run_id root attribute of one checkpoint, read by this rank alone (for rank 0's rotation of
 * a run folder): from the digest header when the file has one (no hash, HDF5 does not open it),
 * else from the HDF5 file. Returns 0, or -1 with a message when the file cannot be read as a
 * checkpoint. */
int txl_ckpt_read_run_id(const char *path, char run_id[TXL_CKPT_ID_LEN], char *err, size_t errlen);

/* The checkpoint of run folder `dir` to continue from or to load: the file `dir`/latest names
 * when it passes txl_ckpt_verify; otherwise (latest missing, empty, naming a missing file or one
 * that does not pass: damaged, truncated, ...) the newest ckpt-<step>.h5 of dir that passes it. Returns
 *   0: its path in path_out; notice "" when it is latest's file, else one line naming the
 *      skipped file and the one used, for the caller to print;
 *   1: dir holds no checkpoint at all (no file that latest names, no ckpt-<step>.h5): err says
 *      what there is (without dir: the caller words the message);
 *  -1: there are checkpoints but none passes: err is the message, naming dir and the problem.
 * Rank 0 reads the folder and every rank tries the same files in the same order, so every rank
 * gets the same answer. collective: all ranks */
int txl_ckpt_find(const char *dir, char *path_out, size_t n, char *notice, size_t notice_len,
                  char *err, size_t errlen);

/* Compares the vocabulary digest of checkpoint `path` (st->vocab_digest) with that of the corpus
 * it is used with (txl_corpus_vocab_digest of `corpus_path`): two vocabularies of one size may
 * map ids to other tokens. Returns 0 when they are equal; -1 when they differ, with the error in
 * msg naming both files; 1 when the checkpoint has no digest (a version 1 file), with a one-line
 * notice in msg that only the vocabulary size could be checked. Serial. */
int txl_ckpt_check_vocab(const char *path, const TxlCkptState *st, const char *corpus_path,
                         const char *corpus_digest, char *msg, size_t n);

/* The newest checkpoint of a run folder: reads `dir`/latest (one line naming a checkpoint file
 * in dir, or an absolute path). Returns 0 with the full path in path_out when that file exists,
 * -1 when there is no latest file, it is empty, or it names a missing file (no checkpoint yet:
 * not an error). Serial: any rank may call it. */
int txl_ckpt_latest(const char *dir, char *path_out, size_t n);

/* What run folder pointer `dir`/`pointer` ("latest" or "best": one line naming a checkpoint file
 * in dir, or an absolute path) names, read as txl_ckpt_latest reads latest. Returns 0 with the
 * full path in path_out when that file exists; -3 when it names a missing file (its path in
 * path_out); -2 when the pointer is empty; -1 when there is no such pointer. Serial. */
int txl_ckpt_pointer(const char *dir, const char *pointer, char *path_out, size_t n);

/* A checkpoint file of a run folder, named as the trainer names them: "ckpt-<step>.h5". */
typedef struct {
  long step;
  char name[256];
} TxlCkptFile;

/* The ckpt-<step>.h5 files of run folder dir, newest first: a malloc'd array of *count (free()
 * it); NULL with *count = 0 when there are none or dir cannot be read. Serial. */
TxlCkptFile *txl_ckpt_list_dir(const char *dir, int *count);

#endif
