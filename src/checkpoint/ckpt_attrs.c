/* The checkpoint's root attributes (FORMAT.md): "format" and "format_version", then the state
 * and geometry of ROOT_ATTRS below, one table that both the writer and the reader walk, then
 * the config text. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/checkpoint/ckpt_internal.h"

/* What the root attributes describe: the state and the geometry beside it. */
typedef struct {
  TxlCkptState st;
  CkptGeometry g;
} CkptRoot;

/* The C type of a value and its type in the file. */
typedef enum {
  ATTR_I64, /* int64_t, stored as a 64-bit integer                           */
  ATTR_I32, /* int, stored as a 32-bit integer                               */
  ATTR_U32, /* uint32_t, stored as a 32-bit unsigned integer                 */
  ATTR_F64, /* double                                                        */
  ATTR_ID   /* char[TXL_CKPT_ID_LEN], a string; none in version 1 files ("") */
} AttrKind;

typedef struct {
  const char *name;
  AttrKind kind;
  size_t offset;  /* of the value in CkptRoot */
  int64_t lo, hi; /* integers: the range a file's value must lie in */
  const char *absent; /* the value of a file without the attribute, as text (NULL: required) */
  int in_set;     /* an optional set (SET_*): a file holds all of the set or, written before it
                   * existed, none (has_plateau / has_loss_scale = 0) */
} RootAttr;

/* The optional sets of attributes, each added at once to the format. */
enum { SET_NONE = 0, SET_PLATEAU = 1, SET_LOSS_SCALE = 2, SET_PROGRESS = 3, N_SETS = 4 };
static const char *const SET_NAMES[N_SETS] = {"", "plateau_* (dev_perf's state)",
                                              "loss_scale* (the loss scaler's state)",
                                              "progress_* and last_eval_step (the training loop's state)"};

/* ROOT_ATTRS: TXL_CKPT_ROOT_ATTRS (checkpoint.h), where each value lies in CkptRoot. */
#define NAME_ST(name) #name
#define NAME_PROGRESS(name) "progress_" #name
#define NAME_GEO(name) #name
#define OFFSET_ST(name) offsetof(CkptRoot, st.name)
#define OFFSET_PROGRESS(name) offsetof(CkptRoot, st.progress.name)
#define OFFSET_GEO(name) offsetof(CkptRoot, g.name)
#define ROOT_ATTR(where, name, kind, lo, hi, absent, set) \
  {NAME_##where(name), ATTR_##kind, OFFSET_##where(name), lo, hi, absent, SET_##set},
static const RootAttr ROOT_ATTRS[] = {TXL_CKPT_ROOT_ATTRS(ROOT_ATTR)};
#define N_ROOT_ATTRS ((int)(sizeof ROOT_ATTRS / sizeof ROOT_ATTRS[0]))

static void write_attr(CkptCtx *c, hid_t file, const RootAttr *a, const CkptRoot *r) {
  const char *v = (const char *)r + a->offset;
  switch (a->kind) {
  case ATTR_I64: ckpt_attr_i64(c, file, a->name, *(const int64_t *)v); break;
  case ATTR_I32: ckpt_attr_i32(c, file, a->name, *(const int *)v); break;
  case ATTR_U32: ckpt_attr_write(c, file, a->name, H5T_STD_U32LE, H5T_NATIVE_UINT32, v); break;
  case ATTR_F64: ckpt_attr_f64(c, file, a->name, *(const double *)v); break;
  case ATTR_ID: ckpt_attr_write_string(c, file, a->name, v); break;
  }
}

void ckpt_write_root_attrs(CkptCtx *c, hid_t file, const TxlCkptState *st, const CkptGeometry *g,
                           const char *config) {
  CkptRoot r = {*st, *g};
  r.st.world_size = c->world; /* the communicator's size, whatever the caller said */
  ckpt_attr_write_string(c, file, "format", TXL_CKPT_FORMAT);
  ckpt_attr_i32(c, file, "format_version", TXL_CKPT_FORMAT_VERSION);
  for (int i = 0; i < N_ROOT_ATTRS; i++) write_attr(c, file, &ROOT_ATTRS[i], &r);
  ckpt_attr_write_string(c, file, "config", config);
}

/* A string attribute of at most TXL_CKPT_ID_LEN - 1 characters into out; version 1 files have
 * none ("" then). collective */
static void read_id_attr(CkptCtx *c, hid_t file, int64_t version, const char *name, const char *absent,
                         char out[TXL_CKPT_ID_LEN]) {
  out[0] = 0;
  if (absent && H5Aexists(file, name) <= 0) { /* the same file on every rank: the same verdict */
    snprintf(out, TXL_CKPT_ID_LEN, "%s", absent);
    return;
  }
  if ((!absent && version < 2) || !c->ok) return;
  char *v = NULL;
  if (ckpt_attr_read_string(c, file, name, &v) != 0) return;
  if (strlen(v) >= TXL_CKPT_ID_LEN)
    ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' is longer than %d characters", name,
              TXL_CKPT_ID_LEN - 1);
  else
    snprintf(out, TXL_CKPT_ID_LEN, "%s", v);
  free(v);
  ckpt_agree(c);
}

/* One attribute of the table into r, its range checked. collective */
static void read_attr(CkptCtx *c, hid_t file, int64_t version, const RootAttr *a, CkptRoot *r) {
  char *v = (char *)r + a->offset;
  if (a->kind == ATTR_ID) {
    read_id_attr(c, file, version, a->name, a->absent, v);
    return;
  }
  if (a->kind == ATTR_F64) {
    ckpt_attr_read_num(c, file, a->name, H5T_FLOAT, H5T_NATIVE_DOUBLE, v);
    return;
  }
  int64_t x = 0;
  if (a->absent && H5Aexists(file, a->name) <= 0) /* the same file on every rank: the same verdict */
    x = strtoll(a->absent, NULL, 10);
  else if (ckpt_attr_read_num(c, file, a->name, H5T_INTEGER, H5T_NATIVE_INT64, &x) != 0)
    return;
  if (x < a->lo || x > a->hi) {
    ckpt_fail(c, "not a valid txl checkpoint: root attribute '%s' is %lld, outside [%lld, %lld]",
              a->name, (long long)x, (long long)a->lo, (long long)a->hi);
    return;
  }
  switch (a->kind) {
  case ATTR_I64: *(int64_t *)v = x; break;
  case ATTR_I32: *(int *)v = (int)x; break;
  case ATTR_U32: *(uint32_t *)v = (uint32_t)x; break;
  default: break;
  }
}

void ckpt_read_root_attrs(CkptCtx *c, hid_t file, TxlCkptState *st, CkptGeometry *g, char **config) {
  char *format = NULL;
  if (config) *config = NULL;
  if (H5Aexists(file, "format") <= 0) ckpt_fail(c, "not a txl checkpoint (no 'format' attribute)");
  if (!ckpt_agree(c) || ckpt_attr_read_string(c, file, "format", &format) < 0) return;
  if (strcmp(format, TXL_CKPT_FORMAT) != 0)
    ckpt_fail(c, "not a txl checkpoint (format is '%.100s', expected '%s')", format, TXL_CKPT_FORMAT);
  free(format);
  int64_t version = 0;
  if (ckpt_attr_read_num(c, file, "format_version", H5T_INTEGER, H5T_NATIVE_INT64, &version) == 0 &&
      (version < TXL_CKPT_OLDEST_VERSION || version > TXL_CKPT_FORMAT_VERSION))
    ckpt_fail(c, "checkpoint format version %lld is not supported (this build reads versions %d to %d)",
              (long long)version, TXL_CKPT_OLDEST_VERSION, TXL_CKPT_FORMAT_VERSION);
  CkptRoot r;
  memset(&r, 0, sizeof r);
  int set_attrs[N_SETS] = {0}, set_found[N_SETS] = {0}; /* each optional set: all or none */
  for (int i = 0; i < N_ROOT_ATTRS && c->ok; i++) {
    const int s = ROOT_ATTRS[i].in_set;
    if (s != SET_NONE) {
      set_attrs[s]++;
      if (H5Aexists(file, ROOT_ATTRS[i].name) <= 0) continue;
      set_found[s]++;
    }
    read_attr(c, file, version, &ROOT_ATTRS[i], &r);
  }
  for (int s = 1; s < N_SETS && c->ok; s++)
    if (set_found[s] > 0 && set_found[s] < set_attrs[s])
      ckpt_fail(c, "not a valid txl checkpoint: it holds %d of the %d root attributes %s", set_found[s], set_attrs[s],
                SET_NAMES[s]);
  r.st.has_plateau = set_found[SET_PLATEAU] == set_attrs[SET_PLATEAU];
  r.st.has_loss_scale = set_found[SET_LOSS_SCALE] == set_attrs[SET_LOSS_SCALE];
  r.st.has_progress = set_found[SET_PROGRESS] == set_attrs[SET_PROGRESS];
  if (c->ok && r.st.mem_rows > r.g.mem_len)
    ckpt_fail(c, "not a valid txl checkpoint: mem_rows %d outside [0, mem_len = %d]", r.st.mem_rows,
              r.g.mem_len);
  if (!ckpt_agree(c)) return;
  r.st.format_version = (int)version;
  *st = r.st;
  *g = r.g;
  /* read on every rank whatever the caller asked for: the calls stay the same everywhere */
  char *text = NULL;
  if (ckpt_attr_read_string(c, file, "config", &text) == 0 && config) *config = text;
  else free(text);
}
