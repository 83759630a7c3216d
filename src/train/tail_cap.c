/* Tail targets per segment, counted in the corpus: see tail_cap.h. */
#include "src/train/tail_cap.h"

#include <stdio.h>
#include <string.h>

#include "data/window_count.h"
#include "dist/shard.h"
#include "src/base/error.h"
#include "src/train/estimate.h"

void txl_tail_cap_measure(TxlTailCap *cap, TxlCorpus *c, const TxlDims *dm, const char *split, int B_global,
                          const TxlRunShape *s) {
  memset(cap, 0, sizeof *cap);
  cap->known = 1;
  cap->inputs = 1;
  if (dm->n_clusters == 0) return;
  int groups, group_cols;
  txl_run_groups(s, &groups, &group_cols);
  int32_t cut[TXL_MAX_CLUSTERS + 1];
  for (int i = 1; i <= dm->n_clusters + 1; i++) cut[i - 1] = dm->cut[i]; /* class k: tail cluster k + 1 */
  int64_t most[TXL_MAX_CLUSTERS] = {0};
  char err[1024] = "";
  const int rc = txl_window_count_split(c, split, B_global, s->col0, s->B, s->L_max, group_cols, dm->n_clusters, cut,
                                        most, err, sizeof err);
  txl_fatal_if_any(rc != 0, "%s", err);
  for (int i = 1; i <= dm->n_clusters; i++) cap->n[i] = (int)most[i - 1]; /* at most L_max x B: an int */
}

void txl_tail_cap_add_segment(TxlTailCap *cap, const TxlDims *dm, const int32_t *tok, int L, int B, int group_cols) {
  cap->known = cap->inputs = 1;
  for (int g0 = 0; g0 < B; g0 += group_cols) {
    int n[TXL_MAX_CLUSTERS] = {0};
    for (int i = 1; i <= L; i++)
      for (int j = g0; j < B && j < g0 + group_cols; j++) {
        const int32_t v = tok[(size_t)i * B + j];
        for (int c = 1; c <= dm->n_clusters; c++) n[c] += v >= dm->cut[c] && v < dm->cut[c + 1];
      }
    for (int c = 1; c <= dm->n_clusters; c++) cap->n[c] = n[c] > cap->n[c] ? n[c] : cap->n[c];
  }
}

void txl_tail_cap_max(TxlTailCap *a, const TxlTailCap *b) {
  a->known = a->known && b->known;
  a->inputs = a->inputs && b->inputs;
  for (int i = 0; i < TXL_MAX_CLUSTERS; i++) a->n[i] = b->n[i] > a->n[i] ? b->n[i] : a->n[i];
}

void txl_tail_caps_of_config(const TxlConfig *c, TxlCorpus *corpus, const TxlDims *dm, int world, int rank,
                             TxlTailCap *train, TxlTailCap *eval) {
  for (int r = rank < 0 ? 0 : rank; r < (rank < 0 ? world : rank + 1); r++) {
    int B, col0;
    TxlTailCap t, v, w;
    if (train) {
      txl_shard(c->batch_size, world, r, &B, &col0);
      const TxlRunShape ts = txl_train_run_shape(c, B, col0);
      txl_tail_cap_measure(&t, corpus, dm, "train", c->batch_size, &ts);
      if (r == (rank < 0 ? 0 : rank)) *train = t;
      else txl_tail_cap_max(train, &t);
    }
    if (eval) {
      txl_shard(c->eval_batch_size, world, r, &B, &col0);
      const TxlRunShape es = txl_eval_run_shape(c, B, col0);
      txl_tail_cap_measure(&v, corpus, dm, "valid", c->eval_batch_size, &es);
      txl_tail_cap_measure(&w, corpus, dm, "test", c->eval_batch_size, &es);
      txl_tail_cap_max(&v, &w);
      if (r == (rank < 0 ? 0 : rank)) *eval = v;
      else txl_tail_cap_max(eval, &v);
    }
  }
}

void txl_tail_cap_format(const TxlTailCap *cap, const TxlDims *dm, char *out, size_t n) {
  if (!cap->known) {
    snprintf(out, n, "not counted");
    return;
  }
  size_t used = 0;
  out[0] = 0;
  for (int i = 1; i <= dm->n_clusters && used < n; i++)
    used += (size_t)snprintf(out + used, n - used, "%s%d", i > 1 ? ", " : "", cap->n[i]);
}
