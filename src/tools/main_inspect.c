/* txl-inspect: prints what a checkpoint file holds (src/checkpoint/FORMAT.md; a run folder or its
 * 'latest' / 'best' pointer means the checkpoint they name, src/tools/target.h): the training
 * state, the configuration it was written with, and every dataset with its shape and size.
 * --verify also reads every dataset, which checks every chunk's Fletcher32 checksum.
 * Runs without mpirun (one rank); under mpirun rank 0 prints. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/dist.h"
#include "src/base/cli.h"
#include "src/base/error.h"
#include "src/checkpoint/checkpoint.h"
#include "src/tools/target.h"

enum { OPT_VERIFY, OPT_BEST, OPT_HELP, N_OPTS };
static const TxlToolOption OPTS[N_OPTS] = {
    [OPT_VERIFY] = {"--verify", NULL, NULL, NULL,
                    "also read every dataset, checking every chunk's checksum (Fletcher32)\n"
                    "and every value: NaN, an infinity or a negative /adam_v value is an error"},
    [OPT_BEST] = {"--best", NULL, NULL, NULL,
                  "with a RUN_DIR: the checkpoint its 'best' pointer names instead of the newest"},
    [OPT_HELP] = {"--help", NULL, NULL, NULL, "this text"},
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: txl-inspect [--verify] [--best] CHECKPOINT|RUN_DIR\n"
          "\n"
          "A RUN_DIR means its newest checkpoint that opens (as txl-eval takes it; --best: the one its\n"
          "'best' pointer names), a run folder's 'latest' or 'best' file the checkpoint it names.\n"
          "\n"
          "Prints what a txl checkpoint holds: the file's format version, the run id (lineage)\n"
          "and vocabulary digest, step, tokens seen, epoch and data position, best validation\n"
          "loss and its step, learning rate, the rank count and batch size it was written with,\n"
          "the memory length and valid rows, the configuration text, and a table of every\n"
          "dataset (name, shape, type, bytes of data, bytes stored).\n"
          "Checks the root attributes and that /params, /adam_m and /adam_v hold the same\n"
          "tensors with the same shapes and /mems the shape the attributes give.\n"
          "\n");
  txl_tool_options_help(f, OPTS, N_OPTS, 13);
  fprintf(f,
          "\n"
          "A file that is not a valid checkpoint is one line \"txl: error: FILE: ...\" and exit\n"
          "status 1. The layout is described in src/checkpoint/FORMAT.md.\n");
}

typedef struct {
  char name[256];
  int nd;
  hsize_t dims[8];
  char type[16];
  hsize_t bytes, stored;
} Entry;

typedef struct {
  Entry *e;
  int n, cap;
  int failed;
  char err[512];
} Listing;

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t ObjInfo;
#define VISIT(file, cb, data) H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t ObjInfo;
#define VISIT(file, cb, data) H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#endif

static herr_t visit_cb(hid_t obj, const char *name, const ObjInfo *info, void *data) {
  Listing *l = data;
  if (info->type != H5O_TYPE_DATASET) return 0;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->e = realloc(l->e, sizeof(Entry) * (size_t)l->cap);
    ALLOC_CHECK(l->e);
  }
  Entry *e = &l->e[l->n];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "/%s", name);
  hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
  if (d < 0) {
    snprintf(l->err, sizeof l->err, "cannot open dataset '/%s'", name);
    l->failed = 1;
    return 1;
  }
  hid_t s = H5Dget_space(d), t = H5Dget_type(d);
  e->nd = s < 0 ? 0 : H5Sget_simple_extent_ndims(s);
  if (e->nd < 0 || e->nd > 8) e->nd = 0;
  if (e->nd > 0) H5Sget_simple_extent_dims(s, e->dims, NULL);
  size_t tsize = t < 0 ? 0 : H5Tget_size(t);
  H5T_class_t cls = t < 0 ? H5T_NO_CLASS : H5Tget_class(t);
  if (cls == H5T_FLOAT) snprintf(e->type, sizeof e->type, "float%zu", 8 * tsize);
  else if (cls == H5T_INTEGER) snprintf(e->type, sizeof e->type, "int%zu", 8 * tsize);
  else snprintf(e->type, sizeof e->type, "other");
  hsize_t n = 1;
  for (int i = 0; i < e->nd; i++) n *= e->dims[i];
  e->bytes = n * tsize;
  e->stored = H5Dget_storage_size(d);
  if (t >= 0) H5Tclose(t);
  if (s >= 0) H5Sclose(s);
  H5Dclose(d);
  l->n++;
  return 0;
}

/* Names in "natural" order: layers.2 before layers.10. */
static int natural_cmp(const void *pa, const void *pb) {
  const char *a = ((const Entry *)pa)->name, *b = ((const Entry *)pb)->name;
  while (*a && *b) {
    if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
      char *ea, *eb;
      unsigned long long x = strtoull(a, &ea, 10), y = strtoull(b, &eb, 10);
      if (x != y) return x < y ? -1 : 1;
      a = ea;
      b = eb;
      continue;
    }
    if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
    a++;
    b++;
  }
  return (unsigned char)*a - (unsigned char)*b;
}

static herr_t first_error_cb(unsigned n, const H5E_error2_t *err, void *data) {
  if (n == 0 && err->desc) snprintf((char *)data, 256, "%s", err->desc);
  return 0;
}

/* The values of a slab of float32 dataset e (rows [r0, r0 + rows) along its first dimension,
 * read into v) that no checkpoint may hold (txl_ckpt_check_values). In /mems [n_layer, mem_len,
 * batch, d_model] only the valid rows [0, mem_rows) of each layer count. */
static int check_slab(const char *path, const Entry *e, const float *v, hsize_t r0, hsize_t rows,
                      int mem_rows, char *msg, size_t n) {
  const hsize_t per_row = e->bytes / e->dims[0] / sizeof(float);
  if (strcmp(e->name, "/mems") != 0 || e->nd != 4)
    return txl_ckpt_check_values(path, e->name, v, (int64_t)(rows * per_row), (int64_t)(r0 * per_row), msg, n);
  const hsize_t block = e->dims[2] * e->dims[3]; /* one memory row of every column */
  for (hsize_t l = 0; l < rows; l++)
    for (hsize_t r = 0; r < (hsize_t)mem_rows && r < e->dims[1]; r++) {
      const hsize_t at = (l * e->dims[1] + r) * block;
      if (txl_ckpt_check_values(path, e->name, v + at, (int64_t)block, (int64_t)(r0 * per_row + at), msg, n) != 0)
        return -1;
    }
  return 0;
}

/* Reads the dataset in slabs along its first dimension (each chunk's checksum is checked, and
 * the values of float32 datasets). */
static int verify_dataset(const char *path, hid_t file, const Entry *e, int mem_rows, char *msg, size_t n) {
  hid_t d = H5Dopen2(file, e->name, H5P_DEFAULT);
  if (d < 0) {
    snprintf(msg, n, "cannot open dataset '%s'", e->name);
    return -1;
  }
  int rc = 0;
  if (e->nd > 0 && e->bytes > 0) {
    const int is_f32 = strcmp(e->type, "float32") == 0;
    hsize_t row = e->bytes / e->dims[0];
    hsize_t rows = ((hsize_t)64 << 20) / (row ? row : 1);
    if (rows < 1) rows = 1;
    hid_t t = is_f32 ? H5Tcopy(H5T_NATIVE_FLOAT) : H5Dget_type(d), fsp = H5Dget_space(d);
    char *buf = txl_malloc((size_t)(rows * row), "verify buffer");
    for (hsize_t r0 = 0; r0 < e->dims[0] && rc == 0; r0 += rows) {
      hsize_t start[8] = {0}, count[8];
      memcpy(count, e->dims, sizeof count);
      start[0] = r0;
      count[0] = r0 + rows <= e->dims[0] ? rows : e->dims[0] - r0;
      hid_t msp = H5Screate_simple(e->nd, count, NULL);
      if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
          H5Dread(d, t, msp, fsp, H5P_DEFAULT, buf) < 0) {
        char h5[256] = "";
        H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, first_error_cb, h5);
        snprintf(msg, n, "%s: dataset '%s' is damaged: reading rows [%llu, %llu) failed (HDF5: %s)",
                 path, e->name, (unsigned long long)r0, (unsigned long long)(r0 + count[0]),
                 h5[0] ? h5 : "unknown error");
        rc = -1;
      } else if (is_f32) {
        rc = check_slab(path, e, (const float *)buf, r0, count[0], mem_rows, msg, n);
      }
      if (msp >= 0) H5Sclose(msp);
    }
    free(buf);
    H5Sclose(fsp);
    H5Tclose(t);
  }
  H5Dclose(d);
  return rc;
}

static const Entry *find_entry(const Listing *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->e[i].name, name) == 0) return &l->e[i];
  return NULL;
}

static int same_shape(const Entry *a, const Entry *b) {
  if (a->nd != b->nd) return 0;
  for (int i = 0; i < a->nd; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

/* The file's own consistency (txl-inspect does not know the model's parameter table): the three
 * groups hold the same tensors with the same shapes, and /mems matches the root attributes.
 * Returns 0, or -1 with a message. */
static int check_layout(const Listing *l, const int64_t geo[4], char *msg, size_t n) {
  static const char *const groups[3] = {"/params/", "/adam_m/", "/adam_v/"};
  int count[3] = {0, 0, 0};
  for (int i = 0; i < l->n; i++) {
    const Entry *e = &l->e[i];
    for (int g = 0; g < 3; g++)
      if (strncmp(e->name, groups[g], strlen(groups[g])) == 0) {
        count[g]++;
        if (strcmp(e->type, "float32") != 0) {
          snprintf(msg, n, "dataset '%s' is %s, not float32", e->name, e->type);
          return -1;
        }
        const char *tail = e->name + strlen(groups[g]);
        for (int h = 0; h < 3; h++) {
          char other[300];
          snprintf(other, sizeof other, "%s%s", groups[h], tail);
          const Entry *o = find_entry(l, other);
          if (!o) {
            snprintf(msg, n, "dataset '%s' is missing (there is '%s')", other, e->name);
            return -1;
          }
          if (!same_shape(e, o)) {
            snprintf(msg, n, "datasets '%s' and '%s' differ in shape", e->name, other);
            return -1;
          }
        }
      }
  }
  if (count[0] == 0) {
    snprintf(msg, n, "no parameters ('/params' is empty or missing)");
    return -1;
  }
  const Entry *m = find_entry(l, "/mems");
  /* geo: mem_len, batch_size, n_layer, d_model */
  hsize_t want[4] = {(hsize_t)geo[2], (hsize_t)geo[0], (hsize_t)geo[1], (hsize_t)geo[3]};
  if (!m) {
    snprintf(msg, n, "dataset '/mems' is missing");
    return -1;
  }
  if (m->nd != 4 || m->dims[0] != want[0] || m->dims[1] != want[1] || m->dims[2] != want[2] ||
      m->dims[3] != want[3]) {
    snprintf(msg, n, "dataset '/mems' does not have the shape [n_layer, mem_len, batch_size, "
             "d_model] = [%llu, %llu, %llu, %llu] of the root attributes",
             (unsigned long long)want[0], (unsigned long long)want[1],
             (unsigned long long)want[2], (unsigned long long)want[3]);
    return -1;
  }
  return 0;
}

static void print_bytes(char *buf, size_t n, double b) {
  if (b >= 1e9) snprintf(buf, n, "%.2f GB", b / 1e9);
  else if (b >= 1e6) snprintf(buf, n, "%.2f MB", b / 1e6);
  else if (b >= 1e3) snprintf(buf, n, "%.1f kB", b / 1e3);
  else snprintf(buf, n, "%.0f B", b);
}

/* The command line: returns 0 with the target (and --verify, --best) set, or the exit status. */
static int parse_args(int argc, char **argv, const char **path, int *verify, int *best) {
  int bad_arg = 0;
  for (int i = 1; i < argc; i++) {
    const int o = txl_tool_option_find(OPTS, N_OPTS, argv[i]);
    if (o == OPT_HELP || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (o == OPT_VERIFY) {
      *verify = 1;
    } else if (o == OPT_BEST) {
      *best = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "txl: error: unknown option '%s' (txl-inspect --help)\n", argv[i]);
      return 1;
    } else if (*path) {
      bad_arg = 1;
    } else {
      *path = argv[i];
    }
  }
  if (!*path || bad_arg) {
    fprintf(stderr, "txl: error: txl-inspect takes one checkpoint file, run folder, or a run folder's 'latest' or "
            "'best' (txl-inspect --help)\n");
    return 1;
  }
  return 0;
}

/* The root attributes of the memory's geometry and the model's attention type: geo = {mem_len,
 * batch_size, n_layer, d_model, attn_type} (0 where missing: attn_type 0 in files older than it). */
static void read_geometry(hid_t file, int64_t geo[5]) {
  const char *names[5] = {"mem_len", "batch_size", "n_layer", "d_model", "attn_type"};
  hid_t a;
  for (int i = 0; i < 5; i++) {
    geo[i] = 0;
    if ((a = H5Aopen(file, names[i], H5P_DEFAULT)) >= 0) {
      H5Aread(a, H5T_NATIVE_INT64, &geo[i]);
      H5Aclose(a);
    }
  }
}

/* The training state, the geometry and the config text. */
static void print_state(const char *path, const TxlCkptState *st, const int64_t geo[5], const char *config) {
  const int64_t mem_len = geo[0], batch = geo[1], n_layer = geo[2], d_model = geo[3], attn_type = geo[4];
  printf("checkpoint      %s\n", path);
  printf("format          %s, version %d\n", TXL_CKPT_FORMAT, st->format_version);
  const char *none = st->format_version < 2 ? "none (a version 1 file)" : "(empty)";
  printf("run id          %s\n", st->run_id[0] ? st->run_id : none);
  printf("vocab digest    %s\n", st->vocab_digest[0] ? st->vocab_digest : none);
  printf("step            %lld\n", (long long)st->step);
  printf("tokens seen     %lld\n", (long long)st->tokens_seen);
  printf("epoch           %lld, data position %lld\n", (long long)st->epoch, (long long)st->data_pos);
  if (st->best_step >= 0)
    printf("best valid loss %.6f at step %lld\n", st->best_valid_loss, (long long)st->best_step);
  else
    printf("best valid loss none yet\n");
  printf("lr              %.6e\n", st->lr);
  printf("optimizer       %s (train.optim; /adam_m, /adam_v hold its state)\n", st->optim);
  if (st->has_plateau)
    printf("dev_perf state  rate %.6e, best valid loss %.6f, %d validation%s without improvement\n", st->plateau_rate,
           st->plateau_best, st->plateau_bad, st->plateau_bad == 1 ? "" : "s");
  else
    printf("dev_perf state  none (a file written before it)\n");
  printf("adam updates    %d\n", st->adam_t);
  printf("seed            %u\n", st->seed);
  printf("written by      %d rank%s\n", st->world_size, st->world_size == 1 ? "" : "s");
  const char *kind = attn_type >= 0 && attn_type < TXL_ATTN_N_TYPES ? txl_attn_name((int)attn_type) : NULL;
  printf("model           n_layer %lld, d_model %lld, attn_type %lld (model.attn_type = %s)\n", (long long)n_layer,
         (long long)d_model, (long long)attn_type, kind ? kind : "none of its choices");
  printf("batch size      %lld columns\n", (long long)batch);
  printf("memory          mem_len %lld, valid rows %d\n", (long long)mem_len, st->mem_rows);
  printf("\nconfig:\n");
  const char *p = config;
  while (p && *p) {
    const char *nl = strchr(p, '\n');
    int len = nl ? (int)(nl - p) : (int)strlen(p);
    printf("  %.*s\n", len, p);
    p += len + (nl ? 1 : 0);
  }
}

/* The table of datasets (each read back and checked with --verify) and the totals. Returns 1
 * when a dataset failed its check, else 0. */
static int print_datasets(const char *path, hid_t file, const Listing *l, int verify, int mem_rows) {
  struct stat sb;
  double file_bytes = stat(path, &sb) == 0 ? (double)sb.st_size : 0;
  printf("\ndatasets:\n");
  size_t w = 4;
  for (int i = 0; i < l->n; i++)
    if (strlen(l->e[i].name) > w) w = strlen(l->e[i].name);
  printf("  %-*s  %-24s  %-8s  %14s  %14s\n", (int)w, "name", "shape", "type", "bytes", "stored");
  double tot_bytes = 0, tot_stored = 0;
  int bad = 0;
  for (int i = 0; i < l->n; i++) {
    const Entry *e = &l->e[i];
    char shape[128];
    size_t k = (size_t)snprintf(shape, sizeof shape, "[");
    for (int j = 0; j < e->nd && k < sizeof shape; j++)
      k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%llu", j ? ", " : "",
                            (unsigned long long)e->dims[j]);
    if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
    printf("  %-*s  %-24s  %-8s  %14llu  %14llu\n", (int)w, e->name, shape, e->type,
           (unsigned long long)e->bytes, (unsigned long long)e->stored);
    tot_bytes += (double)e->bytes;
    tot_stored += (double)e->stored;
    if (verify) {
      char msg[6144]; /* the path (up to 4095 bytes), the dataset and HDF5's reason */
      if (verify_dataset(path, file, e, mem_rows, msg, sizeof msg) != 0) {
        fflush(stdout);
        fprintf(stderr, "txl: error: %s\n", msg);
        bad = 1;
        break;
      }
    }
  }
  char b1[32], b2[32], b3[32];
  print_bytes(b1, sizeof b1, tot_bytes);
  print_bytes(b2, sizeof b2, tot_stored);
  print_bytes(b3, sizeof b3, file_bytes);
  if (!bad)
    printf("\ntotal           %d datasets, %.0f bytes of data (%s), %.0f stored (%s), file %.0f bytes (%s)\n",
           l->n, tot_bytes, b1, tot_stored, b2, file_bytes, b3);
  if (verify && !bad) printf("verified        every dataset read back, every checksum matches, no NaN, infinity or negative second moment\n");
  return bad;
}

int main(int argc, char **argv) {
  const char *target = NULL;
  int verify = 0, best = 0;
  const int rc = parse_args(argc, argv, &target, &verify, &best);
  if (rc) return rc;

  TxlDist dist;
  txl_dist_init(&dist, &argc, &argv);
  char path[4096];
  txl_tool_checkpoint(target, best, path, sizeof path, dist.rank == 0 ? stdout : NULL);
  char err[1024];
  char *config = NULL;
  TxlCkptState st;
  if (txl_ckpt_peek(path, &config, &st, err, sizeof err) != 0) txl_fatal_all("%s", err);
  if (dist.rank != 0) {
    free(config);
    txl_dist_finalize();
    return 0;
  }

  /* the listing: rank 0 alone, with HDF5's default (serial) file driver */
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) txl_fatal("%s: cannot open the checkpoint for listing", path);
  Listing l;
  memset(&l, 0, sizeof l);
  if (VISIT(file, visit_cb, &l) < 0 && !l.failed)
    txl_fatal("%s: cannot list the datasets", path);
  if (l.failed) txl_fatal("%s: %s", path, l.err);
  qsort(l.e, (size_t)l.n, sizeof(Entry), natural_cmp);

  int64_t geo[5];
  read_geometry(file, geo);
  char msg[768];
  if (check_layout(&l, geo, msg, sizeof msg) != 0) txl_fatal("%s: not a consistent checkpoint: %s", path, msg);

  print_state(path, &st, geo, config);
  free(config);
  const int bad = print_datasets(path, file, &l, verify, st.mem_rows);
  free(l.e);
  H5Fclose(file);
  txl_dist_finalize();
  return bad ? 1 : 0;
}
