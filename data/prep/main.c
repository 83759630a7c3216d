/* txl-prep: text files -> one HDF5 corpus file (layout: data/FORMAT.md).
 *
 * Two passes over the three source files: the first counts tokens (and hashes the files), the
 * vocabulary is built, the second maps the tokens to ids and writes them. The output is written
 * to OUT.tmp-<pid>@<host> and renamed to OUT at the end; on any error the temporary file is
 * removed, so no output is left behind. A run that could not remove it (killed by SIGKILL, a
 * crash) leaves it; the next run for OUT on that host removes it (remove_stale_tmps). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/corpus.h"
#include "data/prep/bpe_prep.h"
#include "data/prep/options.h"
#include "data/prep/spm_prep.h"
#include "data/prep/text.h"
#include "data/prep/vocab.h"
#include "data/prep/writer.h"
#include "src/base/cli.h"
#include "src/base/error.h"

#define IDS_CHUNK ((int64_t)1 << 16)   /* elements per stored chunk (see FORMAT.md) */
#define WRITE_BUF ((int64_t)1 << 20)   /* ids buffered before each write */


typedef struct {
  PrepOptions opt;
  TokTable tab;
  int32_t *cp_entry; /* char mode: [0x110000] table entry of each code point, -1 = none yet */
  int64_t eos_entry; /* word mode: the entry of "<eos>" */
  Vocab vocab;
  SpmPrep spm; /* spm mode */
  BpePrep bpe; /* bpe mode */
  TxlBpeIds bpe_ids[N_SPLITS]; /* bpe mode: each split's ids, encoded in pass 1 */
  int64_t n_tokens[N_SPLITS];
  int64_t n_unk[N_SPLITS];
  char sha[N_SPLITS][65];
  /* progress */
  int pass;
  int split;
  int64_t split_bytes, split_done;
  double last_report;
  /* pass 2 output */
  H5Out out;
  hid_t dset;
  uint32_t *buf;
  int64_t buf_n, written;
} Prep;

/* ---------------------------------------------------------------------------------------------
 * The temporary output file: removed at exit (and on SIGINT/SIGTERM/SIGHUP) unless renamed.
 * ------------------------------------------------------------------------------------------- */

static char g_tmp[4096];
static volatile sig_atomic_t g_tmp_live = 0;

static void remove_tmp(void) {
  if (g_tmp_live) {
    unlink(g_tmp);
    g_tmp_live = 0;
  }
}

static void on_signal(int sig) {
  if (g_tmp_live) unlink(g_tmp);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* 1 when process `pid` of this host may still run (kill(pid, 0) says so, or it is another
 * user's); 0 when it cannot (no such process, or a number no pid reaches). */
static int pid_may_run(long pid) {
  if (pid <= 0 || pid > INT_MAX) return 0;
  return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* Removes the temporary files OUT.tmp-<pid>@<host> that killed runs for the same output on this
 * host left behind: those whose process no longer runs, each with a notice on stderr. A
 * temporary of a live process, or of another host (whose processes this one cannot see, on a
 * shared file system), is never touched. A folder that cannot be listed is left to the creation
 * of our own temporary to report. */
static void remove_stale_tmps(const char *out, const char *host) {
  char dir[4096];
  const char *slash = strrchr(out, '/'), *base = slash ? slash + 1 : out;
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == out) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
  DIR *d = opendir(dir);
  if (!d) return;
  const size_t blen = strlen(base);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    const char *name = e->d_name;
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp-", 5) != 0) continue;
    const char *num = name + blen + 5;
    if (!isdigit((unsigned char)*num)) continue;
    char *end;
    const long pid = strtol(num, &end, 10); /* LONG_MAX when out of range: no pid */
    if (*end != '@' || strcmp(end + 1, host) != 0 || pid == (long)getpid() || pid_may_run(pid)) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (unlink(path) == 0) {
      fprintf(stderr, "txl-prep: removed %s, the temporary file of a run that ended without removing "
              "it (process %ld on this host no longer runs)\n", path, pid);
      fflush(stderr);
    }
  }
  closedir(d);
}


/* ---------------------------------------------------------------------------------------------
 * Progress
 * ------------------------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_read(void *ctx, size_t n) {
  Prep *P = ctx;
  P->split_done += (int64_t)n;
  if (P->opt.quiet) return;
  double t = now_s();
  if (t - P->last_report < 1.0) return;
  P->last_report = t;
  fprintf(stderr, "txl-prep: pass %d/2 (%s) %s: %.1f of %.1f MB\n", P->pass,
          P->pass == 1 ? "counting" : "writing ids", PREP_SPLIT[P->split], 1e-6 * (double)P->split_done,
          1e-6 * (double)P->split_bytes);
  fflush(stderr);
}

/* ---------------------------------------------------------------------------------------------
 * The two passes
 * ------------------------------------------------------------------------------------------- */

static void changed(const Prep *P, int k) {
  txl_fatal("%s: the %s file changed while txl-prep was reading it", P->opt.path[k], PREP_SPLIT[k]);
}

static void flush_ids(Prep *P, int k) {
  h5out_write(&P->out, P->dset, PREP_SPLIT[k], H5T_NATIVE_UINT32, P->written, P->buf_n, P->buf);
  P->written += P->buf_n;
  P->buf_n = 0;
}

/* pass 2: one id */
static inline void emit(Prep *P, int k, int64_t id) {
  if (P->written + P->buf_n >= P->n_tokens[k]) changed(P, k);
  P->buf[P->buf_n++] = (uint32_t)id;
  if (P->buf_n == WRITE_BUF) flush_ids(P, k);
}

/* One token given by its table entry (-1: not in the table, possible only if the file changed). */
static inline void token(Prep *P, int k, int64_t entry, int counted) {
  if (P->pass == 1) {
    tok_occur(&P->tab, entry, counted);
    P->n_tokens[k]++;
    return;
  }
  int64_t id = entry >= 0 ? P->tab.e[entry].id : -1;
  if (id < 0) {
    if (P->vocab.unk_id < 0) changed(P, k);
    id = P->vocab.unk_id;
    P->n_unk[k]++;
  }
  emit(P, k, id);
}

/* spm mode: one SentencePiece id (the end of a line is the model's end-of-sentence piece). */
static inline void spm_token(Prep *P, int k, int sid) {
  if (P->pass == 1) {
    if (k == 0) P->spm.count[sid]++;
    P->n_tokens[k]++;
    return;
  }
  if (sid == P->spm.unk) P->n_unk[k]++;
  emit(P, k, P->spm.txl_id[sid]);
}

/* spm mode: one line's content, encoded, then the end of the line. */
static void spm_line(Prep *P, int k, const LineReader *r, unsigned char *line, size_t clen) {
  lr_check_utf8(r, line, clen);
  const int *ids;
  const size_t n = spm_prep_encode(&P->spm, r, line, clen, &ids);
  for (size_t i = 0; i < n; i++) spm_token(P, k, ids[i]);
  spm_token(P, k, P->spm.eos);
}

/* bpe mode, pass 1: the whole file as one text, as Python's text mode reads it (UTF-8 checked
 * line by line, every line end as "\n"), encoded into P->bpe_ids[k]. */
static void bpe_split(Prep *P, int k, LineReader *r) {
  unsigned char *line;
  size_t clen, tlen, n = 0, cap = 1 << 16;
  char *text = txl_malloc(cap, "the text");
  while (lr_next(r, &line, &clen, &tlen)) {
    lr_check_utf8(r, line, clen);
    if (n + clen + 1 > cap) {
      while (n + clen + 1 > cap) cap *= 2;
      text = realloc(text, cap);
      ALLOC_CHECK(text);
    }
    memcpy(text + n, line, clen);
    n += clen;
    if (tlen > clen) text[n++] = '\n';
  }
  TxlBpeIds *ids = &P->bpe_ids[k];
  if (txl_bpe_encode(P->bpe.bpe, text, n, ids) != 0)
    txl_fatal("%s: out of memory encoding the %s file", P->opt.path[k], PREP_SPLIT[k]);
  free(text);
  P->n_tokens[k] = (int64_t)ids->n;
}

static void process_split(Prep *P, int k) {
  const PrepOptions *o = &P->opt;
  char what[32];
  snprintf(what, sizeof what, "%s file", PREP_SPLIT[k]);
  struct stat st;
  P->split = k;
  P->split_bytes = stat(o->path[k], &st) == 0 ? (int64_t)st.st_size : 0;
  P->split_done = 0;
  LineReader r;
  lr_open(&r, o->path[k], what);
  r.on_read = on_read;
  r.ctx = P;
  const int counted = !o->vocab_train_only || k == 0;
  const int pass1 = P->pass == 1;

  if (o->mode == MODE_BPE) {
    bpe_split(P, k, &r);
  } else if (o->mode == MODE_BYTE) {
    unsigned char *data;
    size_t len;
    while (lr_next_raw(&r, &data, &len)) {
      if (pass1) {
        P->n_tokens[k] += (int64_t)len;
        continue;
      }
      for (size_t i = 0; i < len; i++)
        emit(P, k, o->lower ? tolower(data[i]) : data[i]);
    }
  } else {
    unsigned char *line;
    size_t clen, tlen;
    while (lr_next(&r, &line, &clen, &tlen)) {
      if (o->lower) lower_ascii(line, tlen);
      if (o->mode == MODE_SPM) {
        spm_line(P, k, &r, line, clen);
      } else if (o->mode == MODE_WORD) {
        size_t i = 0, start = 0;
        int in_word = 0;
        while (i < clen) {
          uint32_t cp = line[i];
          int l = 1;
          if (cp >= 0x80 && (l = utf8_decode(line + i, clen - i, &cp)) == 0) lr_bad_utf8(&r, i, line[i]);
          if (py_isspace(cp)) {
            if (in_word) {
              const char *w = (const char *)line + start;
              token(P, k, pass1 ? tok_add(&P->tab, w, i - start) : tok_find(&P->tab, w, i - start),
                    counted);
              in_word = 0;
            }
          } else if (!in_word) {
            in_word = 1;
            start = i;
          }
          i += (size_t)l;
        }
        if (in_word) {
          const char *w = (const char *)line + start;
          token(P, k, pass1 ? tok_add(&P->tab, w, clen - start) : tok_find(&P->tab, w, clen - start),
                counted);
        }
        token(P, k, P->eos_entry, counted);
      } else { /* MODE_CHAR: every code point of the line, its terminator included */
        size_t i = 0;
        while (i < tlen) {
          uint32_t cp = line[i];
          int l = 1;
          if (cp >= 0x80 && (l = utf8_decode(line + i, tlen - i, &cp)) == 0) lr_bad_utf8(&r, i, line[i]);
          int32_t e = P->cp_entry[cp];
          if (pass1 && e < 0) P->cp_entry[cp] = e = (int32_t)tok_add(&P->tab, (const char *)line + i, (size_t)l);
          token(P, k, e, counted);
          i += (size_t)l;
        }
      }
    }
  }
  char sha[65];
  lr_close(&r, sha);
  if (pass1) {
    memcpy(P->sha[k], sha, sizeof sha);
    if (P->n_tokens[k] == 0)
      txl_fatal("%s: the %s split has no tokens (the file is empty)", o->path[k], PREP_SPLIT[k]);
  } else {
    if (P->buf_n > 0) flush_ids(P, k);
    if (strcmp(sha, P->sha[k]) != 0 || P->written != P->n_tokens[k]) changed(P, k);
  }
}

/* ---------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------- */

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* The bytes of token `id` (vocab_size tokens in all). */
static const char *token_bytes(const Prep *P, int64_t id, size_t *len, unsigned char *byte) {
  if (P->opt.mode == MODE_BYTE) {
    *byte = (unsigned char)id;
    *len = 1;
    return (const char *)byte;
  }
  if (P->opt.mode == MODE_SPM) return spm_prep_piece(&P->spm, id, len);
  if (P->opt.mode == MODE_BPE) {
    *len = P->bpe.tok_len[id];
    return P->bpe.tok[id];
  }
  int64_t e = P->vocab.entry[id];
  if (e < 0) {
    *len = 5;
    return "<unk>";
  }
  *len = P->tab.e[e].len;
  return tok_bytes(&P->tab, e);
}

static void write_output(Prep *P, const char *tmp) {
  const PrepOptions *o = &P->opt;
  const int64_t V = P->vocab.size;
  hid_t id_type;
  int64_t cap;
  const char *dtype = o->dtype;
  if (!strcmp(dtype, "auto")) dtype = V <= 256 ? "uint8" : V <= 65536 ? "uint16" : "uint32";
  if (!strcmp(dtype, "uint8")) { id_type = H5T_STD_U8LE; cap = 256; }
  else if (!strcmp(dtype, "uint16")) { id_type = H5T_STD_U16LE; cap = 65536; }
  else { id_type = H5T_STD_U32LE; cap = MAX_VOCAB; }
  if (V > cap)
    txl_fatal("%s: a vocabulary of %lld tokens does not fit in --dtype %s (at most %lld tokens)",
              o->out, (long long)V, dtype, (long long)cap);

  H5Out *out = &P->out;
  h5out_create(out, tmp, o->out);
  h5out_attr_string(out, "format", TXL_CORPUS_FORMAT);
  h5out_attr_int32(out, "format_version", TXL_CORPUS_FORMAT_VERSION);
  h5out_attr_string(out, "mode", o->mode_name);
  h5out_attr_int32(out, "lower", o->lower);
  h5out_attr_int32(out, "add_eos", o->mode == MODE_WORD || o->mode == MODE_SPM);
  h5out_attr_int64(out, "min_freq", o->min_freq);
  h5out_attr_int64(out, "max_size", o->max_size);
  h5out_attr_string(out, "vocab_from", o->mode == MODE_BPE ? "tokenizer" : o->vocab_train_only ? "train" : "all");
  h5out_attr_int64(out, "vocab_size", V);
  h5out_attr_int64(out, "unk_id", P->vocab.unk_id);
  h5out_attr_int64(out, "eos_id", P->vocab.eos_id);
  for (int k = 0; k < N_SPLITS; k++) {
    char name[32];
    snprintf(name, sizeof name, "%s_source", PREP_SPLIT[k]);
    h5out_attr_string(out, name, base_name(o->path[k]));
    snprintf(name, sizeof name, "%s_sha256", PREP_SPLIT[k]);
    h5out_attr_string(out, name, P->sha[k]);
  }
  if (o->mode == MODE_BPE) {
    h5out_attr_int32(out, "bpe_prefix_space", P->bpe.prefix_space);
    h5out_attr_int32(out, "bpe_use_regex", P->bpe.use_regex);
  }

  /* the vocabulary: /vocab (all token bytes, concatenated) and /vocab_offsets [V + 1] */
  int64_t *off = txl_malloc((size_t)(V + 1) * sizeof *off, "vocabulary offsets");
  off[0] = 0;
  for (int64_t i = 0; i < V; i++) {
    size_t len;
    unsigned char b;
    token_bytes(P, i, &len, &b);
    off[i + 1] = off[i] + (int64_t)len;
  }
  unsigned char *bytes = txl_malloc((size_t)off[V], "vocabulary bytes");
  for (int64_t i = 0; i < V; i++) {
    size_t len;
    unsigned char b;
    const char *s = token_bytes(P, i, &len, &b);
    memcpy(bytes + off[i], s, len);
  }
  hid_t d = h5out_dataset(out, "vocab", H5T_STD_U8LE, off[V], IDS_CHUNK);
  h5out_write(out, d, "vocab", H5T_NATIVE_UCHAR, 0, off[V], bytes);
  h5out_close_dataset(out, d, "vocab");
  d = h5out_dataset(out, "vocab_offsets", H5T_STD_I64LE, V + 1, IDS_CHUNK);
  h5out_write(out, d, "vocab_offsets", H5T_NATIVE_INT64, 0, V + 1, off);
  h5out_close_dataset(out, d, "vocab_offsets");
  free(bytes);
  free(off);
  if (o->mode == MODE_SPM) { /* the model, its bytes as they are */
    d = h5out_dataset(out, "spm_model", H5T_STD_U8LE, (int64_t)P->spm.model_len, IDS_CHUNK);
    h5out_write(out, d, "spm_model", H5T_NATIVE_UCHAR, 0, (int64_t)P->spm.model_len, P->spm.model);
    h5out_close_dataset(out, d, "spm_model");
  }
  if (o->mode == MODE_BPE) { /* the merges [n, 2] by rank, the added tokens' ids */
    d = h5out_dataset_2d(out, "bpe_merges", H5T_STD_I32LE, P->bpe.n_merges, 2, IDS_CHUNK / 2);
    h5out_write_all(out, d, "bpe_merges", H5T_NATIVE_INT32, 2 * P->bpe.n_merges, P->bpe.merges);
    h5out_close_dataset(out, d, "bpe_merges");
    d = h5out_dataset(out, "bpe_special", H5T_STD_I64LE, P->bpe.n_special, IDS_CHUNK);
    h5out_write_all(out, d, "bpe_special", H5T_NATIVE_INT64, P->bpe.n_special, P->bpe.special);
    h5out_close_dataset(out, d, "bpe_special");
  }

  /* pass 2: the ids */
  P->pass = 2;
  P->buf = txl_malloc((size_t)WRITE_BUF * sizeof *P->buf, "id buffer");
  for (int k = 0; k < N_SPLITS; k++) {
    P->dset = h5out_dataset(out, PREP_SPLIT[k], id_type, P->n_tokens[k], IDS_CHUNK);
    P->buf_n = P->written = 0;
    if (o->mode == MODE_BPE) { /* encoded in pass 1 */
      for (size_t i = 0; i < P->bpe_ids[k].n; i++) emit(P, k, P->bpe_ids[k].id[i]);
      if (P->buf_n > 0) flush_ids(P, k);
    } else {
      process_split(P, k);
    }
    h5out_close_dataset(out, P->dset, PREP_SPLIT[k]);
  }
  free(P->buf);
  h5out_close(out);
  if (!o->quiet) {
    printf("txl-prep: wrote %s: %s mode, vocabulary %lld tokens (ids %s", o->out, o->mode_name,
           (long long)V, dtype);
    if (P->vocab.eos_id >= 0) printf(", <eos> = %lld", (long long)P->vocab.eos_id);
    if (P->vocab.unk_id >= 0) printf(", <unk> = %lld", (long long)P->vocab.unk_id);
    printf(")\n");
    for (int k = 0; k < N_SPLITS; k++)
      printf("  %-5s %12lld tokens (%lld mapped to <unk>)  %s\n", PREP_SPLIT[k],
             (long long)P->n_tokens[k], (long long)P->n_unk[k], o->path[k]);
    if (o->mode == MODE_SPM && o->spm_model)
      printf("  SentencePiece model of %d pieces (%zu bytes) from %s\n", P->spm.size, P->spm.model_len,
             o->spm_model);
    else if (o->mode == MODE_BPE)
      printf("  byte-level BPE of %lld tokens, %lld merges, %lld added tokens, add_prefix_space %d, from %s%s%s\n",
             (long long)P->bpe.size, (long long)P->bpe.n_merges, (long long)P->bpe.n_special, P->bpe.prefix_space,
             o->bpe_tokenizer ? o->bpe_tokenizer : o->bpe_vocab, o->bpe_tokenizer ? "" : " and ",
             o->bpe_tokenizer ? "" : o->bpe_merges);
    else if (o->mode == MODE_SPM)
      printf("  SentencePiece %s model of %d pieces (%zu bytes) trained on %s in %.2f s\n", o->spm_type,
             P->spm.size, P->spm.model_len, o->path[0], P->spm.train_s);
  }
}

/* Creates the temporary output first (g_tmp, removed at exit unless renamed): an unwritable
 * destination fails before any work. */
static void create_tmp_output(const PrepOptions *o) {
  struct stat st;
  if (stat(o->out, &st) == 0) {
    if (S_ISDIR(st.st_mode)) txl_fatal("%s: cannot write the output file: it is a directory", o->out);
    for (int k = 0; k < N_SPLITS; k++) {
      struct stat in;
      if (stat(o->path[k], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino)
        txl_fatal("%s: the output file is the %s file; refusing to overwrite an input", o->out, PREP_SPLIT[k]);
    }
  }
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  int n = snprintf(g_tmp, sizeof g_tmp, "%s.tmp-%ld@%s", o->out, (long)getpid(), host);
  if (n < 0 || (size_t)n >= sizeof g_tmp) txl_fatal("%s: output path too long", o->out);
  remove_stale_tmps(o->out, host);
  atexit(remove_tmp);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  signal(SIGHUP, on_signal);
  g_tmp_live = 1; /* before the file exists: a signal right after its creation still removes it */
  FILE *f = fopen(g_tmp, "wb");
  if (!f) {
    int err = errno;
    g_tmp_live = 0;
    txl_fatal("%s: cannot create the output file (%s): %s", o->out, g_tmp, strerror(err));
  }
  fclose(f);
}

/* Pass 1: counts the tokens of every split, then builds the vocabulary. */
static void build_vocab(Prep *P) {
  const PrepOptions *o = &P->opt;
  tok_init(&P->tab);
  P->eos_entry = -1;
  if (o->mode == MODE_WORD) P->eos_entry = tok_add(&P->tab, "<eos>", 5);
  if (o->mode == MODE_CHAR) {
    P->cp_entry = txl_malloc(0x110000 * sizeof *P->cp_entry, "character table");
    for (int i = 0; i < 0x110000; i++) P->cp_entry[i] = -1;
  }
  char train_sha[65] = "";
  if (o->mode == MODE_BPE && o->bpe_tokenizer) {
    bpe_prep_load_tokenizer(&P->bpe, o->bpe_tokenizer);
  } else if (o->mode == MODE_BPE) {
    bpe_prep_load_files(&P->bpe, o->bpe_vocab, o->bpe_merges, o->bpe_prefix_space);
  } else if (o->mode == MODE_SPM && o->spm_model) {
    spm_prep_load(&P->spm, o->spm_model);
  } else if (o->mode == MODE_SPM) {
    if (!o->quiet) {
      fprintf(stderr, "txl-prep: training a %s SentencePiece model of %lld pieces on %s\n", o->spm_type,
              (long long)o->spm_vocab, o->path[0]);
      fflush(stderr);
    }
    spm_prep_train(&P->spm, o->spm_type, o->spm_vocab, o->path[0], o->lower, train_sha);
  }
  P->pass = 1;
  P->last_report = now_s();
  for (int k = 0; k < N_SPLITS; k++) process_split(P, k);
  if (train_sha[0] && strcmp(train_sha, P->sha[0]) != 0) changed(P, 0);

  if (o->mode == MODE_SPM) {
    spm_prep_order(&P->spm);
    P->vocab.size = P->spm.size;
    P->vocab.eos_id = P->spm.txl_id[P->spm.eos];
    P->vocab.unk_id = P->spm.txl_id[P->spm.unk];
  } else if (o->mode == MODE_BPE) {
    P->vocab.size = P->bpe.size;
    P->vocab.eos_id = P->bpe.eos_id;
    P->vocab.unk_id = -1;
  } else if (o->mode == MODE_BYTE) {
    P->vocab.size = 256;
    P->vocab.eos_id = P->vocab.unk_id = -1;
  } else {
    VocabRules rules = {.min_freq = o->min_freq, .max_size = o->max_size,
                        .sorted_by_bytes = o->mode == MODE_CHAR, .eos_entry = P->eos_entry};
    char err[256];
    vocab_build(&P->tab, &rules, &P->vocab, err, sizeof err);
    if (err[0]) txl_fatal("%s: %s", o->out, err);
  }
  if (P->vocab.size > MAX_VOCAB)
    txl_fatal("%s: a vocabulary of %lld tokens is more than txl supports (2^31 - 1)", o->out,
              (long long)P->vocab.size);
}

int main(int argc, char **argv) {
  /* No HDF5 clean-up at exit: after a failed write (a full disk) HDF5 1.10 crashes closing the
   * file there, and the temporary file is removed anyway (remove_tmp); a finished file is
   * closed before. Must come before any other HDF5 call. */
  H5dont_atexit();
  Prep *P = txl_calloc(1, sizeof *P, "txl-prep state");
  PrepOptions *o = &P->opt;
  txl_prep_parse_args(argc, argv, o);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported by us, in one line */
  create_tmp_output(o);
  build_vocab(P);
  write_output(P, g_tmp);
  if (rename(g_tmp, o->out) != 0)
    txl_fatal("%s: cannot rename %s to it: %s", o->out, g_tmp, strerror(errno));
  g_tmp_live = 0;

  vocab_free(&P->vocab);
  spm_prep_free(&P->spm);
  bpe_prep_free(&P->bpe);
  for (int k = 0; k < N_SPLITS; k++) free(P->bpe_ids[k].id);
  tok_free(&P->tab);
  free(P->cp_entry);
  free(P);
  return 0;
}
