#include "src/train/embed_gather.h"

#include <stdlib.h>

#include "dist/dist.h"
#include "src/base/error.h"
#include "src/config/config.h"

struct TxlEmbedGather {
  TxlReducer *reducer;
  int world, rank;
  int64_t *cols;        /* [world] host: each rank's columns in its last column group (the rows' B) */
  int L_max;
  int64_t rows_max;     /* L_max x the largest cols: the rows of a block */
  int64_t rows_bytes;   /* a block's rows, [rows_max, ld] act type, rounded up to TXL_ACT_ALIGN */
  int64_t block;        /* bytes of a block: the rows, then the tokens [rows_max] int32 (rounded up) */
  char *send;           /* [block] device */
  char *recv;           /* [world, block] device */
};

static int64_t round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

/* A block's rows: [rows, ld] in the act type, rounded up to TXL_ACT_ALIGN bytes. */
static int64_t rows_bytes(const TxlModel *m, int64_t rows) {
  const int64_t ld = txl_model_ld(m, m->spec.dims.d_model);
  return round_up(rows * ld * (int64_t)txl_dtype_size(m->ops->act), TXL_ACT_ALIGN);
}

int64_t txl_embed_gather_block_for(const TxlModel *m, int L_max, int64_t cols) {
  const int64_t rows = (int64_t)L_max * cols;
  return rows_bytes(m, rows) + round_up(rows * (int64_t)sizeof(int32_t), TXL_ACT_ALIGN);
}

int txl_embed_gather_pays(const TxlModel *m, int L_max, int64_t cols, int world) {
  return (double)world * (double)txl_embed_gather_block_for(m, L_max, cols) <
         (double)txl_model_word_emb_end(m) * sizeof(float);
}

TxlEmbedGather *txl_embed_gather_create(const TxlModel *m, const TxlRun *r, TxlReducer *reducer, int mode) {
  if (!reducer || mode == TXL_EMBED_ROWS_OFF || !txl_model_has_embed_rows(m) || !r->training) return NULL;
  const int world = txl_dist_world();
  int64_t *cols = txl_calloc((size_t)world, sizeof *cols, "embedding row gather: columns per rank");
  const int64_t mine = r->cols - (int64_t)(r->n_groups - 1) * r->group_cols; /* the last group's */
  txl_dist_allgather_i64_blocking(&mine, 1, cols);
  int64_t widest = 0;
  for (int k = 0; k < world; k++) widest = cols[k] > widest ? cols[k] : widest;
  if (mode == TXL_EMBED_ROWS_AUTO && !txl_embed_gather_pays(m, r->L_max, widest, world)) { /* the same on every rank */
    free(cols);
    return NULL;
  }
  TxlEmbedGather *g = txl_calloc(1, sizeof *g, "embedding row gather");
  g->reducer = reducer;
  g->world = world;
  g->rank = txl_dist_rank();
  g->cols = cols;
  g->L_max = r->L_max;
  g->rows_max = (int64_t)r->L_max * widest;
  g->rows_bytes = rows_bytes(m, g->rows_max);
  g->block = txl_embed_gather_block_for(m, r->L_max, widest);
  m->ops->reserve(g->rows_max, 0, 0); /* the largest rank's rows in one embedding_backward */
  g->send = m->ops->alloc((size_t)g->block, "embedding rows to send");
  g->recv = m->ops->alloc((size_t)g->block * (size_t)g->world, "embedding rows of every rank");
  return g;
}

void txl_embed_gather_add(TxlEmbedGather *g, TxlModel *m, const TxlEmbedRows *rows, int L) {
  const TxlOps *o = m->ops;
  const int64_t mine = (int64_t)L * g->cols[g->rank];
  if (L < 1 || L > g->L_max || rows->n != mine)
    txl_fatal("internal: %lld embedding rows of a segment of %d rows, %lld expected", (long long)rows->n, L,
              (long long)mine);
  /* the rows and tokens of this rank into its block (a larger rank's block has more: the rest of
   * a smaller one's is sent and never read) */
  o->copy(g->send, rows->rows, (size_t)(rows->n * rows->ld) * txl_dtype_size(o->act));
  o->copy(g->send + g->rows_bytes, rows->tok, (size_t)rows->n * sizeof(int32_t));
  txl_reducer_gather(g->reducer, g->send, g->recv, g->block);
  for (int k = 0; k < g->world; k++) { /* rank order, then position order within each rank */
    const char *b = g->recv + (int64_t)k * g->block;
    o->embedding_backward(m->g.word_emb, TXL_F32, b, (const int32_t *)(b + g->rows_bytes), rows->scale,
                          (int64_t)L * g->cols[k], rows->d, rows->ld, rows->ld);
  }
}

int64_t txl_embed_gather_block_bytes(const TxlEmbedGather *g) { return g ? g->block : 0; }

void txl_embed_gather_destroy(TxlEmbedGather *g, const TxlModel *m) {
  if (!g) return;
  m->ops->free(g->send);
  m->ops->free(g->recv);
  free(g->cols);
  free(g);
}
