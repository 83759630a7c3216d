/* Test driver for the checkpoint module (src/checkpoint). Every mode runs under mpirun with any
 * rank count that divides the batch (or alone, without mpirun); the scripts beside it call it.
 *
 *   test_ckpt roundtrip DIR                      write, peek, read back, compare (several shapes)
 *   test_ckpt write FILE SHAPE STEP              write the content of STEP (exit 1 on failure)
 *   test_ckpt read FILE SHAPE STEP               read and compare with the content of STEP
 *   test_ckpt write-fail FILE SHAPE STEP PATS    the write must fail on every rank with the same
 *   test_ckpt read-fail FILE SHAPE STEP PATS     message containing FILE and each pattern
 *   test_ckpt peek-fail FILE PATS                  (PATS: fixed strings separated by '|')
 *   test_ckpt read-any FILE SHAPE                the read must succeed (any content)
 *   test_ckpt latest                             txl_ckpt_latest on a scratch folder (DIR)
 *   test_ckpt set-attr FILE NAME INT             rewrite an integer root attribute (serial)
 *   test_ckpt set-attr-str FILE NAME TEXT        rewrite a root attribute as a string (serial)
 *   test_ckpt set-attr-f64 FILE NAME X           rewrite a root attribute as a float64 (serial)
 *   test_ckpt poke FILE DATASET INDEX X          write X (a float: nan, inf, -1, ...) into the
 *                                                element INDEX (C order) of DATASET (serial)
 *   test_ckpt del-attr FILE NAME                 delete a root attribute (serial)
 *   (set-attr* poke del-attr delete renew the digest after the change: txl_ckpt_seal)
 *   test_ckpt delete FILE DATASET                H5Ldelete a dataset (serial)
 *   test_ckpt flip FILE params|mems              flip one byte inside a marker written into
 *                                                layers.0.w_ff1 / the last column of the mems
 *                                                (the digest is left as it was: damage)
 *   test_ckpt seal FILE                          renew the digest (txl_ckpt_seal)
 *   test_ckpt bench SHAPE DIR [REPS]             write / read timings (not a test)
 *
 * SHAPE: small, other (small with d_inner 48), untied (small with its own output layer),
 * batch8 (small with batch 8), big (a 70,001-token vocabulary: the embedding spans 2 chunks),
 * mem0 (no memory), bench_small, wt103_base.
 * The content of a step is a pure function of (buffer, index, step), so any rank count can
 * compute what it should read; the file's mems are stored by global column. */
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/base/hash.h"
#include "src/checkpoint/checkpoint.h"

static int g_rank = 0, g_world = 1;
/* The row padding of the buffers (src/model/params.h): CKPT_TEST_ROW_ALIGN, 1 (the CPU's) by
 * default; 8 is the CUDA backend's. The file is the same whatever the padding. */
static int g_row_align = 1;

/* ---------------------------------------------------------------------------------------------
 * Shapes and content
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  const char *name;
  struct { int n_token, n_layer, d_model, n_head, d_head, d_inner, untie_r, tie_weight; } dims;
  int mem_len, batch;
} Shape;

/* The shape's dims, one softmax over the vocabulary. */
static TxlDims shape_dims(const Shape *s) {
  TxlDims m;
  memset(&m, 0, sizeof m);
  m.n_token = s->dims.n_token;
  m.n_layer = s->dims.n_layer;
  m.d_model = s->dims.d_model;
  m.n_head = s->dims.n_head;
  m.d_head = s->dims.d_head;
  m.d_inner = s->dims.d_inner;
  m.untie_r = s->dims.untie_r;
  m.tie_weight = s->dims.tie_weight;
  txl_dims_single_softmax(&m);
  return m;
}

static const Shape SHAPES[] = {
    /* n_token n_layer d_model n_head d_head d_inner untie_r tie_weight */
    {"small", {50, 2, 16, 2, 8, 32, 0, 1}, 5, 4},
    {"odd", {50, 2, 20, 3, 7, 30, 0, 1}, 5, 4}, /* widths no multiple of 8: padded rows differ */
    {"other", {50, 2, 16, 2, 8, 48, 0, 1}, 5, 4},
    {"untied", {50, 2, 16, 2, 8, 32, 0, 0}, 5, 4},
    {"batch8", {50, 2, 16, 2, 8, 32, 0, 1}, 5, 8},
    {"big", {70001, 2, 16, 2, 8, 32, 1, 1}, 7, 4},
    {"mem0", {50, 2, 16, 2, 8, 32, 0, 1}, 0, 4},
    {"bench_small", {10000, 4, 256, 8, 32, 1024, 0, 1}, 128, 16},
    {"wt103_base", {267735, 16, 410, 10, 41, 2100, 0, 1}, 150, 64},
};

static const Shape *find_shape(const char *name) {
  for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
    if (strcmp(SHAPES[i].name, name) == 0) return &SHAPES[i];
  txl_fatal("unknown shape '%s'", name);
}

/* Markers: 16 bytes that occur once in a file, to find and damage. */
static const float MARK_P[4] = {1234.5678f, -8765.4321f, 3.1415927e-7f, 2.7182817e+7f};
static const float MARK_M[4] = {-4321.125f, 9876.5f, 1.6180339e-5f, -6.0221409e+13f};

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t h = a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return h;
}

/* An exactly representable value in [-0.5, 0.5). */
static float value(uint32_t kind, uint64_t i, int step) {
  uint32_t h = mix(kind, (uint32_t)i ^ (uint32_t)(i >> 32) * 31u, (uint32_t)step);
  return (float)(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
}

typedef struct {
  const Shape *s;
  TxlParamTable table;
  TxlCkptBuffers b;
  TxlCkptState st;
  char config[512];
} World;

static int64_t tensor_offset(const TxlParamTable *t, const char *name) {
  for (int i = 0; i < t->n_tensors; i++)
    if (strcmp(t->tensors[i].name, name) == 0) return t->tensors[i].offset;
  return -1;
}

static void expected_state(const Shape *s, int step, TxlCkptState *st, char *config, size_t n) {
  memset(st, 0, sizeof *st);
  st->step = step;
  st->tokens_seen = (int64_t)step * 1000003 + 7;
  st->data_pos = (int64_t)step * 3;
  st->epoch = step / 10;
  st->best_step = step - 1;
  st->mem_rows = step < s->mem_len ? step : s->mem_len;
  st->adam_t = step;
  st->world_size = g_world;
  st->seed = 0xDEADBEEFu ^ (uint32_t)step;
  st->best_valid_loss = 1.0 / (step + 3);
  st->lr = 1e-3 * step / 7.0;
  snprintf(st->run_id, sizeof st->run_id, "0123456789abcdef%016x", (unsigned)step);
  snprintf(st->vocab_digest, sizeof st->vocab_digest, "%064x", (unsigned)s->dims.n_token);
  snprintf(config, n,
           "[model]\nn_token = %d\nn_layer = %d\nd_model = %d\nd_inner = %d\n\n[train]\n"
           "batch_size = %d\nmem_len = %d\n# step %d, written for the checkpoint tests\n",
           s->dims.n_token, s->dims.n_layer, s->dims.d_model, s->dims.d_inner, s->batch,
           s->mem_len, step);
}

static void fill_expected(World *w, int step, float *p, float *m, float *v, float *mems) {
  const TxlParamTable *t = &w->table;
  /* keyed by the index in the packed view (the file's order); the padding stays zero */
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    for (int64_t e = 0; e < ti->numel; e++) {
      const uint64_t i = (uint64_t)(ti->packed_offset + e);
      const int64_t at = ti->offset + txl_tensor_at(ti, e);
      p[at] = value(1, i, step);
      m[at] = value(2, i, step);
      v[at] = fabsf(value(3, i, step));
    }
  }
  int64_t off = tensor_offset(t, "layers.0.w_ff1");
  if (off >= 0) memcpy(p + off, MARK_P, sizeof MARK_P);
  const TxlCkptBuffers *b = &w->b;
  for (int l = 0; l < b->n_layer; l++)
    for (int r = 0; r < b->mem_len; r++)
      for (int c = 0; c < b->B_local; c++) {
        int gc = b->col0 + c;
        float *dst = mems + (((int64_t)l * b->mem_len + r) * b->B_local + c) * b->d_model;
        for (int f = 0; f < b->d_model; f++) {
          uint64_t gi = (((uint64_t)l * (uint64_t)b->mem_len + (uint64_t)r) * (uint64_t)b->B_global +
                         (uint64_t)gc) * (uint64_t)b->d_model + (uint64_t)f;
          dst[f] = value(4, gi, step);
        }
        if (l == b->n_layer - 1 && r == 0 && gc == b->B_global - 1 && b->d_model >= 4)
          memcpy(dst, MARK_M, sizeof MARK_M);
      }
}

/* Whether a and b (buffers laid out by t) differ in a tensor, or a's padding (between the
 * tensors and inside their padded rows) is not `pad` (every byte): a read writes the tensors'
 * values and nothing else. */
static int tensors_differ(const TxlParamTable *t, const float *a, const float *b, unsigned char pad) {
  int64_t end = 0;
  for (int k = 0; k < t->n_tensors; k++) {
    const TxlTensorInfo *ti = &t->tensors[k];
    const int64_t n = txl_tensor_runs(ti, NULL);
    int64_t *seg = txl_malloc((size_t)n * 2 * sizeof(int64_t), "runs");
    txl_tensor_runs(ti, seg);
    for (int64_t r = 0; r <= n; r++) {
      const int64_t begin = r < n ? seg[2 * r] : (k + 1 < t->n_tensors ? t->tensors[k + 1].offset : t->total);
      for (const unsigned char *q = (const unsigned char *)(a + end); q < (const unsigned char *)(a + begin); q++)
        if (*q != pad) {
          free(seg);
          return 1;
        }
      if (r == n) break;
      if (memcmp(a + seg[2 * r], b + seg[2 * r], (size_t)seg[2 * r + 1] * sizeof(float)) != 0) {
        free(seg);
        return 1;
      }
      end = seg[2 * r] + seg[2 * r + 1];
    }
    free(seg);
    end = k + 1 < t->n_tensors ? t->tensors[k + 1].offset : t->total;
  }
  return 0;
}

static void world_make(World *w, const char *shape, int step) {
  memset(w, 0, sizeof *w);
  w->s = find_shape(shape);
  const TxlDims dims = shape_dims(w->s);
  txl_param_table_build(&w->table, &dims, g_row_align);
  if (w->s->batch % g_world != 0)
    txl_fatal("shape %s: batch %d does not divide by %d ranks", shape, w->s->batch, g_world);
  TxlCkptBuffers *b = &w->b;
  b->table = &w->table;
  b->n_layer = w->s->dims.n_layer;
  b->d_model = w->s->dims.d_model;
  b->mem_len = w->s->mem_len;
  b->B_global = w->s->batch;
  b->B_local = w->s->batch / g_world;
  b->col0 = g_rank * b->B_local;
  size_t n = (size_t)w->table.total;
  b->params = txl_calloc(n, sizeof(float), "params");
  b->adam_m = txl_calloc(n, sizeof(float), "adam_m");
  b->adam_v = txl_calloc(n, sizeof(float), "adam_v");
  size_t nm = (size_t)b->n_layer * (size_t)b->mem_len * (size_t)b->B_local * (size_t)b->d_model;
  b->mems = nm ? txl_malloc(nm * sizeof(float), "mems") : NULL;
  if (step >= 0) fill_expected(w, step, b->params, b->adam_m, b->adam_v, b->mems);
  expected_state(w->s, step, &w->st, w->config, sizeof w->config);
}

static void world_free(World *w) {
  free(w->b.params);
  free(w->b.adam_m);
  free(w->b.adam_v);
  free(w->b.mems);
  txl_param_table_free(&w->table);
}

static size_t mems_count(const TxlCkptBuffers *b) {
  return (size_t)b->n_layer * (size_t)b->mem_len * (size_t)b->B_local * (size_t)b->d_model;
}

/* ---------------------------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------------------------- */

static int n_bad = 0;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL [rank %d] ", g_rank);
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
  n_bad++;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  if (g_rank != 0) return;
  va_list ap;
  va_start(ap, fmt);
  printf("ok   ");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);
  va_end(ap);
}

/* Every rank got the same return code and message. */
static int agreed(int rc, const char *err) {
  uint64_t h = txl_hash_bytes(&rc, sizeof rc);
  if (rc != 0) h = txl_hash_more(h, err, strlen(err));
  if (!txl_dist_all_equal_u64(h)) {
    bad("the ranks disagree: rc %d, message '%s'", rc, rc ? err : "");
    return 0;
  }
  return 1;
}

static void compare_state(const TxlCkptState *got, const TxlCkptState *want, int writer_world) {
  TxlCkptState w = *want;
  w.world_size = writer_world;
  if (got->step != w.step || got->tokens_seen != w.tokens_seen || got->data_pos != w.data_pos ||
      got->epoch != w.epoch || got->best_step != w.best_step || got->mem_rows != w.mem_rows ||
      got->adam_t != w.adam_t || got->seed != w.seed ||
      memcmp(&got->best_valid_loss, &w.best_valid_loss, sizeof(double)) != 0 ||
      memcmp(&got->lr, &w.lr, sizeof(double)) != 0 ||
      (writer_world > 0 && got->world_size != w.world_size) ||
      got->format_version < TXL_CKPT_OLDEST_VERSION || got->format_version > TXL_CKPT_FORMAT_VERSION)
    bad("state differs: step %lld/%lld tokens %lld/%lld data_pos %lld/%lld epoch %lld/%lld "
        "best_step %lld/%lld mem_rows %d/%d adam_t %d/%d seed %u/%u loss %.17g/%.17g lr %.17g/%.17g "
        "world %d/%d", (long long)got->step, (long long)w.step, (long long)got->tokens_seen,
        (long long)w.tokens_seen, (long long)got->data_pos, (long long)w.data_pos,
        (long long)got->epoch, (long long)w.epoch, (long long)got->best_step,
        (long long)w.best_step, got->mem_rows, w.mem_rows, got->adam_t, w.adam_t, got->seed,
        w.seed, got->best_valid_loss, w.best_valid_loss, got->lr, w.lr, got->world_size,
        w.world_size);
  /* version 1 files have neither: both read as "" */
  const int v1 = got->format_version == 1;
  if (strcmp(got->run_id, v1 ? "" : w.run_id) != 0 || strcmp(got->vocab_digest, v1 ? "" : w.vocab_digest) != 0)
    bad("run_id / vocab_digest differ (format version %d): '%s' / '%s', '%s' / '%s'", got->format_version,
        got->run_id, v1 ? "" : w.run_id, got->vocab_digest, v1 ? "" : w.vocab_digest);
}

/* Reads `path` into fresh buffers and compares with the content of `step`. Returns 0 when
 * everything is bit-identical. */
static int read_and_compare(const char *path, const char *shape, int step, int writer_world) {
  World got, want;
  world_make(&got, shape, -1);
  world_make(&want, shape, step);
  size_t n = (size_t)got.table.total, nm = mems_count(&got.b);
  memset(got.b.params, 0xAB, n * sizeof(float));
  memset(got.b.adam_m, 0xAB, n * sizeof(float));
  memset(got.b.adam_v, 0xAB, n * sizeof(float));
  if (nm) memset(got.b.mems, 0xAB, nm * sizeof(float));
  TxlCkptState st;
  char err[1024] = "";
  int rc = txl_ckpt_read(path, &st, &got.b, err, sizeof err);
  int before = n_bad;
  if (!agreed(rc, err)) {
  } else if (rc != 0) {
    bad("reading %s failed: %s", path, err);
  } else {
    const char *names[3] = {"params", "adam_m", "adam_v"};
    float *g[3] = {got.b.params, got.b.adam_m, got.b.adam_v};
    float *e[3] = {want.b.params, want.b.adam_m, want.b.adam_v};
    for (int k = 0; k < 3; k++)
      if (tensors_differ(&got.table, g[k], e[k], 0xAB)) bad("%s: %s differs (or its padding was written)", path, names[k]);
    if (nm && memcmp(got.b.mems, want.b.mems, nm * sizeof(float)) != 0)
      bad("%s: this rank's mems (columns [%d, %d)) differ", path, got.b.col0,
          got.b.col0 + got.b.B_local);
    compare_state(&st, &want.st, writer_world);
    char *config = NULL;
    TxlCkptState pst;
    rc = txl_ckpt_peek(path, &config, &pst, err, sizeof err);
    if (!agreed(rc, err) || rc != 0) {
      bad("peek %s failed: %s", path, err);
    } else {
      if (strcmp(config, want.config) != 0) bad("%s: config text differs:\n%s", path, config);
      compare_state(&pst, &want.st, writer_world);
    }
    free(config);
  }
  world_free(&got);
  world_free(&want);
  int mine = n_bad - before, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all == 0 ? 0 : -1;
}

static int write_step(const char *path, const char *shape, int step, char *err, size_t errlen) {
  World w;
  world_make(&w, shape, step);
  int rc = txl_ckpt_write(path, w.config, &w.st, &w.b, err, errlen);
  world_free(&w);
  return rc;
}

static int file_exists(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0;
}

/* rc must be -1 with the same message everywhere, naming `path` and containing each pattern. */
static int expect_failure(int rc, const char *err, const char *path, const char *patterns,
                          const char *what) {
  int before = n_bad;
  if (!agreed(rc, err)) {
  } else if (rc == 0) {
    bad("%s succeeded, expected a failure (%s)", what, patterns);
  } else {
    if (!strstr(err, path)) bad("%s: the message does not name %s: %s", what, path, err);
    if (strchr(err, '\n')) bad("%s: the message is more than one line: %s", what, err);
    char pats[1024];
    snprintf(pats, sizeof pats, "%s", patterns);
    for (char *save = NULL, *p = strtok_r(pats, "|", &save); p; p = strtok_r(NULL, "|", &save))
      if (!strstr(err, p)) bad("%s: no '%s' in the message: %s", what, p, err);
  }
  int mine = n_bad - before, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (all == 0) say("%s -> %s", what, err);
  return all == 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------------------------------
 * Modes
 * ------------------------------------------------------------------------------------------- */

static int mode_roundtrip(const char *dir) {
  const char *shapes[] = {"small", "big", "mem0", "untied"};
  char path[1024], err[1024];
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    snprintf(path, sizeof path, "%s/rt_%s_np%d.h5", dir, shapes[k], g_world);
    if (g_rank == 0) unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int step = 3; step <= 4; step++) { /* the second write replaces the first */
      int rc = write_step(path, shapes[k], step, err, sizeof err);
      if (!agreed(rc, err) || rc != 0) {
        bad("writing %s failed: %s", path, err);
        continue;
      }
      char tmp[1100];
      snprintf(tmp, sizeof tmp, "%s.tmp", path);
      if (file_exists(tmp)) bad("%s is left behind", tmp);
      if (read_and_compare(path, shapes[k], step, g_world) == 0)
        say("%s: step %d written and read back by %d rank(s), bit-identical", shapes[k], step,
            g_world);
    }
  }
  /* buffers that do not describe one batch: refused on every rank, nothing written */
  {
    World w;
    world_make(&w, "small", 2);
    snprintf(path, sizeof path, "%s/bad_geometry_np%d.h5", dir, g_world);
    if (g_rank == 0) unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    /* every rank claims the first columns (one rank: columns beyond the batch) */
    w.b.col0 = g_world > 1 ? 0 : 1;
    int rc = txl_ckpt_write(path, w.config, &w.st, &w.b, err, sizeof err);
    expect_failure(rc, err, path, "columns", "column shards that do not tile the batch");
    if (file_exists(path)) bad("%s exists after a refused write", path);
    w.b.col0 = g_rank * w.b.B_local;
    w.st.mem_rows = w.b.mem_len + 1;
    rc = txl_ckpt_write(path, w.config, &w.st, &w.b, err, sizeof err);
    expect_failure(rc, err, path, "mem_rows", "mem_rows > mem_len");
    if (file_exists(path)) bad("%s exists after a refused write", path);
    world_free(&w);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int all = 0;
  MPI_Allreduce(&n_bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0) printf("%s\n", all ? "FAILED" : "PASSED");
  return all ? 1 : 0;
}

static int mode_latest(const char *dir) {
  char path[1024], want[1024], lp[1024];
  snprintf(lp, sizeof lp, "%s/latest", dir);
  unlink(lp);
  int fails = 0;
#define CHECK_LATEST(cond, what) do { if (cond) printf("ok   latest: %s\n", what); \
    else { printf("FAIL latest: %s\n", what); fails++; } } while (0)
  CHECK_LATEST(txl_ckpt_latest(dir, path, sizeof path) == -1, "no latest file -> -1");
  FILE *f = fopen(lp, "w");
  fprintf(f, "ckpt_000100.h5\n");
  fclose(f);
  CHECK_LATEST(txl_ckpt_latest(dir, path, sizeof path) == -1, "latest names a missing file -> -1");
  snprintf(want, sizeof want, "%s/ckpt_000100.h5", dir);
  f = fopen(want, "w");
  fclose(f);
  CHECK_LATEST(txl_ckpt_latest(dir, path, sizeof path) == 0 && strcmp(path, want) == 0,
               "latest names an existing file -> its path");
  f = fopen(lp, "w");
  fprintf(f, "  \n");
  fclose(f);
  CHECK_LATEST(txl_ckpt_latest(dir, path, sizeof path) == -1, "empty latest -> -1");
  f = fopen(lp, "w");
  fprintf(f, "%s", want);
  fclose(f);
  if (want[0] == '/')
    CHECK_LATEST(txl_ckpt_latest(dir, path, sizeof path) == 0 && strcmp(path, want) == 0,
                 "absolute path without newline");
  unlink(want);
  unlink(lp);
  printf("%s\n", fails ? "FAILED" : "PASSED");
  return fails ? 1 : 0;
}

/* serial helpers: the default (sec2) driver, rank 0 alone. Each change made through HDF5
 * renews the file's digest (txl_ckpt_seal), as a writer that wrote the file so would have made
 * it: the readers' checks behind the digest are what these files test. A file without a digest
 * (TXL_CKPT_FAULT=no_digest: as an older txl wrote it) stays without. */
static int resealed(const char *path, int rc) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  unsigned char head[8] = {0};
  FILE *f = fopen(path, "rb");
  const int plain = f && fread(head, 1, 8, f) == 8 && memcmp(head, sig, 8) == 0;
  if (f) fclose(f);
  char err[1024];
  if (rc != 0 || plain) return rc;
  if (txl_ckpt_seal(path, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  return 0;
}

static int mode_set_attr(const char *path, const char *name, long long v) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 2;
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  int32_t x = (int32_t)v;
  int rc = a >= 0 && H5Awrite(a, H5T_NATIVE_INT32, &x) >= 0 ? 0 : 2;
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  H5Fclose(f);
  return rc;
}

/* Replaces root attribute `name` by one of type `type` holding *v (serial). */
static int replace_attr(const char *path, const char *name, hid_t type, const void *v) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 2;
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  int rc = a >= 0 && H5Awrite(a, type, v) >= 0 ? 0 : 2;
  if (a >= 0) H5Aclose(a);
  H5Sclose(sp);
  H5Fclose(f);
  return rc;
}

static int mode_set_attr_str(const char *path, const char *name, const char *text) {
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, strlen(text) + 1);
  int rc = replace_attr(path, name, t, text);
  H5Tclose(t);
  return rc;
}

static int mode_set_attr_f64(const char *path, const char *name, double x) {
  return replace_attr(path, name, H5T_NATIVE_DOUBLE, &x);
}

/* Writes x into element `index` (C order) of a float dataset: the chunk is rewritten with a
 * matching checksum, as a writer that computed x would have. */
static int mode_poke(const char *path, const char *dset, long long index, float x) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 2;
  hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
  hid_t fsp = d < 0 ? -1 : H5Dget_space(d);
  int nd = fsp < 0 ? -1 : H5Sget_simple_extent_ndims(fsp);
  hsize_t dims[8], at[8];
  int rc = 2;
  if (nd >= 1 && nd <= 8 && H5Sget_simple_extent_dims(fsp, dims, NULL) == nd) {
    long long rest = index;
    for (int k = nd - 1; k >= 0; k--) {
      at[k] = (hsize_t)(rest % (long long)dims[k]);
      rest /= (long long)dims[k];
    }
    hsize_t one = 1;
    hid_t msp = H5Screate_simple(1, &one, NULL);
    if (rest == 0 && index >= 0 && H5Sselect_elements(fsp, H5S_SELECT_SET, 1, at) >= 0 &&
        H5Dwrite(d, H5T_NATIVE_FLOAT, msp, fsp, H5P_DEFAULT, &x) >= 0)
      rc = 0;
    else
      fprintf(stderr, "poke: cannot write element %lld of %s in %s\n", index, dset, path);
    H5Sclose(msp);
  }
  if (fsp >= 0) H5Sclose(fsp);
  if (d >= 0) H5Dclose(d);
  H5Fclose(f);
  return rc;
}

static int mode_del_attr(const char *path, const char *name) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 2;
  int rc = H5Adelete(f, name) >= 0 ? 0 : 2;
  H5Fclose(f);
  return rc;
}

static int mode_delete(const char *path, const char *dset) {
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return 2;
  int rc = H5Ldelete(f, dset, H5P_DEFAULT) >= 0 ? 0 : 2;
  H5Fclose(f);
  return rc;
}

static int mode_flip(const char *path, const char *which) {
  const float *mark = strcmp(which, "mems") == 0 ? MARK_M : MARK_P;
  FILE *f = fopen(path, "r+b");
  if (!f) return 2;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = txl_malloc((size_t)size, "file");
  if (fread(buf, 1, (size_t)size, f) != (size_t)size) return 2;
  long at = -1;
  int found = 0;
  for (long i = 0; i + 16 <= size; i++)
    if (memcmp(buf + i, mark, 16) == 0) {
      if (at < 0) at = i;
      found++;
    }
  if (found != 1) {
    fprintf(stderr, "flip: the %s marker occurs %d times in %s\n", which, found, path);
    return 2;
  }
  unsigned char byte = buf[at + 6] ^ 0x10;
  fseek(f, at + 6, SEEK_SET);
  fwrite(&byte, 1, 1, f);
  fclose(f);
  free(buf);
  printf("flipped one bit of the byte at offset %ld (inside the %s marker)\n", at + 6, which);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Benchmark
 * ------------------------------------------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int mode_bench(const char *shape, const char *dir, int reps) {
  World w;
  world_make(&w, shape, 7);
  char path[1024], err[1024];
  snprintf(path, sizeof path, "%s/bench_%s_np%d.h5", dir, shape, g_world);
  double data_bytes = 3.0 * (double)w.table.packed * 4.0 +
                      (double)w.b.n_layer * w.b.mem_len * w.b.B_global * w.b.d_model * 4.0;
  if (g_rank == 0)
    printf("bench %s: %lld parameters, %d ranks, data %.1f MB (params + 2 moments + mems)\n",
           shape, (long long)w.table.packed, g_world, data_bytes / 1e6);
  double best_w = 1e30, best_r = 1e30;
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (txl_ckpt_write(path, w.config, &w.st, &w.b, err, sizeof err) != 0) {
      if (g_rank == 0) printf("write failed: %s\n", err);
      return 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t1 = now();
    memset(w.b.params, 0, (size_t)w.table.total * sizeof(float));
    TxlCkptState st;
    if (txl_ckpt_read(path, &st, &w.b, err, sizeof err) != 0) {
      if (g_rank == 0) printf("read failed: %s\n", err);
      return 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t2 = now();
    if (t1 - t0 < best_w) best_w = t1 - t0;
    if (t2 - t1 < best_r) best_r = t2 - t1;
    if (g_rank == 0)
      printf("  rep %d: write %.3f s (%.0f MB/s), read %.3f s (%.0f MB/s)\n", r, t1 - t0,
             data_bytes / 1e6 / (t1 - t0), t2 - t1, data_bytes / 1e6 / (t2 - t1));
  }
  World want;
  world_make(&want, shape, 7);
  if (memcmp(want.b.params, w.b.params, (size_t)w.table.total * sizeof(float)) != 0)
    printf("FAIL [rank %d] parameters read back differ\n", g_rank);
  world_free(&want);
  struct stat sb;
  if (g_rank == 0 && stat(path, &sb) == 0)
    printf("  best: write %.3f s (%.0f MB/s), read %.3f s (%.0f MB/s), file %.1f MB\n", best_w,
           data_bytes / 1e6 / best_w, best_r, data_bytes / 1e6 / best_r, (double)sb.st_size / 1e6);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) unlink(path);
  world_free(&w);
  return 0;
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

static void need(int argc, int n, const char *usage) {
  if (argc < n) txl_fatal("usage: test_ckpt %s", usage);
}

int main(int argc, char **argv) {
  /* the disk-full test runs under a file-size limit: a write past it must fail with EFBIG,
   * not kill the process */
  signal(SIGXFSZ, SIG_IGN);
  TxlDist d;
  txl_dist_init(&d, &argc, &argv);
  g_rank = d.rank;
  g_world = d.world;
  txl_ckpt_fault_from_env(); /* TXL_CKPT_FAULT=after_params: tests/checkpoint/crash.sh */
  /* CKPT_TEST_FSIZE_KB: a file-size limit set after MPI_Init (Open MPI's own shared-memory files
   * at start-up are subject to a limit set before mpirun, which then fails for small limits) */
  const char *lim = getenv("CKPT_TEST_FSIZE_KB");
  if (lim && *lim) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = (rlim_t)atoll(lim) * 1024;
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) txl_fatal("setrlimit: %s", strerror(errno));
  }
  const char *ra = getenv("CKPT_TEST_ROW_ALIGN");
  if (ra && *ra) g_row_align = atoi(ra);
  if (g_row_align < 1) txl_fatal("CKPT_TEST_ROW_ALIGN=%s: not a row alignment (>= 1)", ra);
  need(argc, 2, "MODE ...");
  const char *mode = argv[1];
  int rc = 0;
  char err[1024] = "";
  if (strcmp(mode, "roundtrip") == 0) {
    need(argc, 3, "roundtrip DIR");
    rc = mode_roundtrip(argv[2]);
  } else if (strcmp(mode, "write") == 0) {
    need(argc, 5, "write FILE SHAPE STEP");
    int r = write_step(argv[2], argv[3], atoi(argv[4]), err, sizeof err);
    agreed(r, err);
    if (r != 0 && g_rank == 0) printf("write %s failed: %s\n", argv[2], err);
    else say("wrote %s (%s, step %s) with %d rank(s)", argv[2], argv[3], argv[4], g_world);
    rc = r != 0 || n_bad ? 1 : 0;
  } else if (strcmp(mode, "read") == 0) {
    need(argc, 5, "read FILE SHAPE STEP [WRITER_RANKS]");
    int ww = argc > 5 ? atoi(argv[5]) : 0;
    rc = read_and_compare(argv[2], argv[3], atoi(argv[4]), ww) == 0 ? 0 : 1;
    if (rc == 0)
      say("read %s (%s, step %s) with %d rank(s): bit-identical", argv[2], argv[3], argv[4], g_world);
  } else if (strcmp(mode, "write-fail") == 0) {
    need(argc, 6, "write-fail FILE SHAPE STEP PATTERNS");
    int r = write_step(argv[2], argv[3], atoi(argv[4]), err, sizeof err);
    rc = expect_failure(r, err, argv[2], argv[5], "write");
  } else if (strcmp(mode, "read-fail") == 0) {
    need(argc, 6, "read-fail FILE SHAPE STEP PATTERNS");
    World w;
    world_make(&w, argv[3], -1);
    TxlCkptState st;
    int r = txl_ckpt_read(argv[2], &st, &w.b, err, sizeof err);
    rc = expect_failure(r, err, argv[2], argv[5], "read");
    world_free(&w);
  } else if (strcmp(mode, "read-any") == 0) {
    need(argc, 4, "read-any FILE SHAPE");
    World w;
    world_make(&w, argv[3], -1);
    TxlCkptState st;
    int r = txl_ckpt_read(argv[2], &st, &w.b, err, sizeof err);
    if (agreed(r, err) && r != 0) bad("reading %s failed: %s", argv[2], err);
    else if (r == 0) say("read %s with %d rank(s)", argv[2], g_world);
    rc = r != 0 || n_bad ? 1 : 0;
    world_free(&w);
  } else if (strcmp(mode, "peek-fail") == 0) {
    need(argc, 4, "peek-fail FILE PATTERNS");
    char *config = NULL;
    TxlCkptState st;
    int r = txl_ckpt_peek(argv[2], &config, &st, err, sizeof err);
    free(config);
    rc = expect_failure(r, err, argv[2], argv[3], "peek");
  } else if (strcmp(mode, "latest") == 0) {
    need(argc, 3, "latest DIR");
    rc = mode_latest(argv[2]);
  } else if (strcmp(mode, "set-attr") == 0) {
    need(argc, 5, "set-attr FILE NAME INT");
    rc = resealed(argv[2], mode_set_attr(argv[2], argv[3], atoll(argv[4])));
  } else if (strcmp(mode, "set-attr-str") == 0) {
    need(argc, 5, "set-attr-str FILE NAME TEXT");
    rc = resealed(argv[2], mode_set_attr_str(argv[2], argv[3], argv[4]));
  } else if (strcmp(mode, "set-attr-f64") == 0) {
    need(argc, 5, "set-attr-f64 FILE NAME X");
    rc = resealed(argv[2], mode_set_attr_f64(argv[2], argv[3], atof(argv[4])));
  } else if (strcmp(mode, "poke") == 0) {
    need(argc, 6, "poke FILE DATASET INDEX X");
    rc = resealed(argv[2], mode_poke(argv[2], argv[3], atoll(argv[4]), strtof(argv[5], NULL)));
  } else if (strcmp(mode, "del-attr") == 0) {
    need(argc, 4, "del-attr FILE NAME");
    rc = resealed(argv[2], mode_del_attr(argv[2], argv[3]));
  } else if (strcmp(mode, "delete") == 0) {
    need(argc, 4, "delete FILE DATASET");
    rc = resealed(argv[2], mode_delete(argv[2], argv[3]));
  } else if (strcmp(mode, "flip") == 0) {
    need(argc, 4, "flip FILE params|mems");
    rc = mode_flip(argv[2], argv[3]);
  } else if (strcmp(mode, "seal") == 0) {
    need(argc, 3, "seal FILE");
    rc = txl_ckpt_seal(argv[2], err, sizeof err) == 0 ? 0 : 2;
    if (rc) fprintf(stderr, "%s\n", err);
  } else if (strcmp(mode, "bench") == 0) {
    need(argc, 4, "bench SHAPE DIR [REPS]");
    rc = mode_bench(argv[2], argv[3], argc > 4 ? atoi(argv[4]) : 3);
  } else {
    txl_fatal("unknown mode '%s'", mode);
  }
  txl_dist_finalize();
  return rc;
}
