/* The harnesses' shared support (fuzz.h): the project's error calls ending a run instead of the
 * process, the resources of the code under test tracked and given back, scratch files. */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/error.h"

/* ---------------------------------------------------------------------------------------------
 * A set of pointers (open addressing, linear probing, 0 = empty slot)
 * ------------------------------------------------------------------------------------------- */

typedef struct {
  uintptr_t *slot;
  size_t cap, n; /* cap: a power of two, or 0 before the first insertion */
} PtrSet;

static size_t home(const PtrSet *s, uintptr_t p) {
  return (size_t)(((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 17) & (s->cap - 1);
}

static void set_add(PtrSet *s, uintptr_t p);

static void set_grow(PtrSet *s) {
  PtrSet old = *s;
  s->cap = old.cap ? 2 * old.cap : 1024;
  s->n = 0;
  s->slot = calloc(s->cap, sizeof *s->slot);
  if (!s->slot) {
    fprintf(stderr, "fuzz: out of memory for the tracking table\n");
    abort();
  }
  for (size_t i = 0; i < old.cap; i++)
    if (old.slot[i]) set_add(s, old.slot[i]);
  free(old.slot);
}

/* (Keys are addresses as integers: the blocks themselves are never looked at.) */
static void set_add(PtrSet *s, uintptr_t p) {
  if (2 * (s->n + 1) > s->cap) set_grow(s);
  size_t i = home(s, p);
  while (s->slot[i]) i = (i + 1) & (s->cap - 1);
  s->slot[i] = p;
  s->n++;
}

/* Removes ptr; returns whether it was there. Backward-shift deletion keeps every probe chain
 * unbroken without tombstones. */
static int set_remove(PtrSet *s, uintptr_t p) {
  if (!s->n) return 0;
  size_t i = home(s, p);
  while (s->slot[i] && s->slot[i] != p) i = (i + 1) & (s->cap - 1);
  if (!s->slot[i]) return 0;
  s->slot[i] = 0;
  s->n--;
  for (size_t j = (i + 1) & (s->cap - 1); s->slot[j]; j = (j + 1) & (s->cap - 1)) {
    size_t h = home(s, s->slot[j]);
    /* the entry at j may move to the hole at i when its home is not in (i, j] (cyclically) */
    int stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (!stays) {
      s->slot[i] = s->slot[j];
      s->slot[j] = 0;
      i = j;
    }
  }
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Tracking: active inside fuzz_run only
 * ------------------------------------------------------------------------------------------- */

static int g_active;  /* inside fuzz_run */
static PtrSet g_mem;  /* blocks the code under test allocated in this run and still holds */
static PtrSet g_files;

void *fuzz_malloc(size_t n) {
  void *p = malloc(n);
  if (g_active && p) set_add(&g_mem, (uintptr_t)p);
  return p;
}

void *fuzz_calloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (g_active && p) set_add(&g_mem, (uintptr_t)p);
  return p;
}

void *fuzz_realloc(void *p, size_t n) {
  /* a block of the run stays one (under its new address); one from outside stays outside */
  const int ours = p ? set_remove(&g_mem, (uintptr_t)p) : g_active;
  void *q = realloc(p, n);
  if (!q && n) { /* p is still valid and still the caller's */
    if (p && ours) set_add(&g_mem, (uintptr_t)p);
    return NULL;
  }
  if (q && ours && g_active) set_add(&g_mem, (uintptr_t)q);
  return q;
}

char *fuzz_strdup(const char *s) {
  char *p = strdup(s);
  if (g_active && p) set_add(&g_mem, (uintptr_t)p);
  return p;
}

void fuzz_free(void *p) {
  if (p) set_remove(&g_mem, (uintptr_t)p);
  free(p);
}

FILE *fuzz_fopen(const char *path, const char *mode) {
  FILE *f = fopen(path, mode);
  if (g_active && f) set_add(&g_files, (uintptr_t)f);
  return f;
}

FILE *fuzz_fmemopen(void *buf, size_t size, const char *mode) {
  FILE *f = fmemopen(buf, size, mode);
  if (g_active && f) set_add(&g_files, (uintptr_t)f);
  return f;
}

int fuzz_fclose(FILE *f) {
  if (f) set_remove(&g_files, (uintptr_t)f);
  return fclose(f);
}

int fuzz_atexit(void (*fn)(void)) {
  static void (*done[16])(void);
  static int n_done;
  for (int i = 0; i < n_done; i++)
    if (done[i] == fn) return 0;
  if (n_done == (int)(sizeof done / sizeof *done)) return -1;
  done[n_done++] = fn;
  return atexit(fn);
}

fuzz_sighandler fuzz_signal(int sig, fuzz_sighandler fn) {
  (void)sig;
  (void)fn;
  return SIG_DFL;
}

/* ---------------------------------------------------------------------------------------------
 * HDF5 objects open at a point of time (HDF5 1.10 counts open files, datasets, groups, committed
 * datatypes and attributes; it has no public count of dataspaces or property lists)
 * ------------------------------------------------------------------------------------------- */

static const unsigned H5_KINDS[] = {H5F_OBJ_FILE, H5F_OBJ_DATASET, H5F_OBJ_GROUP, H5F_OBJ_DATATYPE, H5F_OBJ_ATTR};
static const char *const H5_KIND_NAMES[] = {"files", "datasets", "groups", "datatypes", "attributes"};
enum { N_H5_KINDS = sizeof H5_KINDS / sizeof *H5_KINDS };

static void h5_counts(ssize_t n[N_H5_KINDS]) {
  for (int k = 0; k < N_H5_KINDS; k++) n[k] = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5_KINDS[k]);
}

/* ---------------------------------------------------------------------------------------------
 * The project's error calls (src/base/error.h)
 * ------------------------------------------------------------------------------------------- */

static jmp_buf g_jmp;
static int g_armed;
static char g_msg[2048];

/* Keeps the message of an error exit (or a printed error) in g_msg. */
#define RECORD_MESSAGE(fmt)                       \
  do {                                            \
    va_list ap_;                                  \
    va_start(ap_, fmt);                           \
    vsnprintf(g_msg, sizeof g_msg, fmt, ap_);     \
    va_end(ap_);                                  \
  } while (0)

static int verbose(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("TXL_FUZZ_VERBOSE");
    v = e && *e && strcmp(e, "0") != 0;
  }
  return v;
}

/* Where the program would exit with its message: the end of the run. */
static void end_run(void) __attribute__((noreturn));
static void end_run(void) {
  if (verbose() || !g_armed) fprintf(stderr, "txl: error: %s\n", g_msg);
  if (!g_armed) exit(1); /* outside a run (a harness's setup): as the program would */
  longjmp(g_jmp, 1);
}

void txl_error_set_rank(int rank, int world_size, const char *host) {
  (void)rank;
  (void)world_size;
  (void)host;
}

/* One rank: no agreement to set up, and no other rank to end for. */
void txl_error_set_job(const TxlErrorJob *job) { (void)job; }

void txl_error_print(const char *fmt, ...) {
  RECORD_MESSAGE(fmt);
}

void txl_exit_unfinalized(void) { end_run(); }

void txl_fatal(const char *fmt, ...) {
  RECORD_MESSAGE(fmt);
  end_run();
}

void txl_fatal_all(const char *fmt, ...) {
  RECORD_MESSAGE(fmt);
  end_run();
}

void txl_fatal_if_any(int failed, const char *fmt, ...) {
  if (!failed) return; /* one rank: nobody else can have failed */
  RECORD_MESSAGE(fmt);
  end_run();
}

void *txl_malloc(size_t bytes, const char *what) {
  void *p = fuzz_malloc(bytes ? bytes : 1);
  if (!p) txl_fatal("out of memory allocating %zu bytes for %s", bytes, what);
  return p;
}

void *txl_calloc(size_t count, size_t size, const char *what) {
  void *p = fuzz_calloc(count ? count : 1, size ? size : 1);
  if (!p) txl_fatal("out of memory allocating %zu x %zu bytes for %s", count, size, what);
  return p;
}

void fuzz_note(const char *fmt, ...) {
  if (!verbose()) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

void fuzz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

/* ---------------------------------------------------------------------------------------------
 * One run
 * ------------------------------------------------------------------------------------------- */

/* What an exit would have given back: the run's memory and streams, every HDF5 object. */
static void give_back(void) {
  for (size_t i = 0; i < g_files.cap; i++)
    if (g_files.slot[i]) fclose((FILE *)g_files.slot[i]);
  for (size_t i = 0; i < g_mem.cap; i++)
    if (g_mem.slot[i]) free((void *)g_mem.slot[i]);
  if (g_files.cap) memset(g_files.slot, 0, g_files.cap * sizeof *g_files.slot);
  if (g_mem.cap) memset(g_mem.slot, 0, g_mem.cap * sizeof *g_mem.slot);
  g_files.n = g_mem.n = 0;
  H5close(); /* closes every open object; the next HDF5 call opens the library again */
}

static void check_given_back(const ssize_t before[N_H5_KINDS]) {
  if (g_mem.n) fuzz_fail("leak: %zu memory blocks allocated by the code under test were not freed", g_mem.n);
  if (g_files.n) fuzz_fail("leak: %zu FILE streams opened by the code under test were not closed", g_files.n);
  ssize_t after[N_H5_KINDS];
  h5_counts(after);
  for (int k = 0; k < N_H5_KINDS; k++)
    if (after[k] > before[k])
      fuzz_fail("leak: %zd HDF5 %s opened by the code under test were not closed", after[k] - before[k],
                H5_KIND_NAMES[k]);
}

int fuzz_run(void (*fn)(void *), void *arg, int on_exit) {
  ssize_t before[N_H5_KINDS];
  h5_counts(before);
  g_msg[0] = '\0';
  g_active = 1;
  if (setjmp(g_jmp) == 0) {
    g_armed = 1;
    fn(arg);
    g_armed = g_active = 0;
    check_given_back(before);
    return 0;
  }
  g_armed = g_active = 0;
  if (on_exit == FUZZ_EXIT_CRASH)
    fuzz_fail("the code under test exited where it promises to return its errors: %s", g_msg);
  give_back();
  return 1;
}

/* ---------------------------------------------------------------------------------------------
 * Scratch files
 * ------------------------------------------------------------------------------------------- */

static char g_dir[4096];

static void remove_dir(void) {
  DIR *d = opendir(g_dir);
  if (!d) return;
  struct dirent *e;
  char p[8192];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(g_dir);
}

static void make_dir(void) {
  const char *base = getenv("TXL_FUZZ_TMP");
  struct stat st;
  if (!base || !*base) base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/txl-fuzz-XXXXXX", base);
  if (!mkdtemp(g_dir)) {
    fprintf(stderr, "fuzz: cannot make a scratch folder in %s: %s\n", base, strerror(errno));
    abort();
  }
  atexit(remove_dir);
}

const char *fuzz_path(const char *name) {
  if (!g_dir[0]) make_dir();
  size_t n = strlen(g_dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) abort();
  snprintf(p, n, "%s/%s", g_dir, name);
  return p;
}

void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) fuzz_fail("cannot create %s: %s", path, strerror(errno));
  while (size > 0) {
    ssize_t w = write(fd, data, size);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fuzz_fail("cannot write %s: %s", path, strerror(errno));
    data += w;
    size -= (size_t)w;
  }
  close(fd);
}
