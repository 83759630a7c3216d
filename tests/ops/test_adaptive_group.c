/* adaptive_group (kernels/ops.def): every slot, count, head target and drop against a naive
 * reference (one scan of all the tokens per cluster, as src/model once grouped on the host), for
 * the input's grouping (clusters 0..last) and the tails' (1..last), with caps above, at and below
 * the counts, an empty call and ids in no cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/ops/op_test.h"

static void naive(const TxlGroupSpec *g, const int32_t *tok, int64_t n, int32_t *rows, int32_t *ids, int32_t *head,
                  int32_t *count, int32_t *dropped) {
  for (int64_t t = 0; t < n; t++) {
    int c = -1;
    for (int i = 0; i <= g->last; i++)
      if (tok[t] >= g->cut[i] && tok[t] < g->cut[i + 1]) c = i;
    head[t] = c < 0 ? -1 : c == 0 ? tok[t] : g->head_size - c;
  }
  for (int i = g->first; i <= g->last; i++) {
    int32_t k = 0;
    for (int64_t t = 0; t < n; t++) {
      if (tok[t] < g->cut[i] || tok[t] >= g->cut[i + 1]) continue;
      if (k < g->cap[i]) {
        rows[g->base[i] + k] = (int32_t)t;
        ids[g->base[i] + k] = tok[t] - g->cut[i];
      } else {
        (*dropped)++;
      }
      k++;
    }
    for (int32_t s = k; s < g->cap[i]; s++) rows[g->base[i] + s] = ids[g->base[i] + s] = -1;
    count[i] = k;
  }
}

/* cuts 0 < c1 < c2 < c3 = V; cap_of: the cap of cluster i given its count (slack may be < 0) */
static void test_case(const char *what, int64_t n, int first, int slack, int with_head, OtRng *rng) {
  const int V = 1000;
  TxlGroupSpec g = {0};
  g.first = first;
  g.last = 3;
  g.head_size = 100 + 3;
  const int32_t cut[5] = {0, 100, 300, 700, V};
  memcpy(g.cut, cut, sizeof cut);
  int32_t *tok = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
  int32_t k[TXL_GROUP_MAX] = {0};
  for (int64_t t = 0; t < n; t++) {
    tok[t] = ot_uniform(rng) < 0.6 ? ot_randint(rng, 100) : ot_randint(rng, V); /* the head most */
    if (t % 97 == 5) tok[t] = V + 3;                                             /* in no cluster */
    for (int i = 0; i <= 3; i++)
      if (tok[t] >= cut[i] && tok[t] < cut[i + 1]) k[i]++;
  }
  int32_t slots = 0;
  for (int i = first; i <= 3; i++) {
    g.base[i] = slots;
    g.cap[i] = k[i] + slack < 0 ? 0 : k[i] + slack;
    slots += g.cap[i] + 2; /* gaps between the clusters' slots: never written */
  }
  const size_t sb = (size_t)(slots ? slots : 1) * sizeof(int32_t), nb = (size_t)(n ? n : 1) * sizeof(int32_t);
  int32_t *rows = malloc(sb), *ids = malloc(sb), *wrows = malloc(sb), *wids = malloc(sb);
  int32_t *head = malloc(nb), *whead = malloc(nb);
  memset(rows, 0x5a, sb), memset(ids, 0x5a, sb), memset(wrows, 0x5a, sb), memset(wids, 0x5a, sb);
  memset(head, 0x5a, nb), memset(whead, 0x5a, nb);
  int32_t count[TXL_GROUP_MAX] = {0}, wcount[TXL_GROUP_MAX] = {0}, dropped = 7, wdropped = 7;
  txl_cpu_adaptive_group(rows, ids, with_head ? head : NULL, count, &dropped, tok, n, g);
  naive(&g, tok, n, wrows, wids, whead, wcount, &wdropped);
  char name[128];
  printf("%s: n=%lld clusters %d..3, caps = counts %+d%s\n", what, (long long)n, first, slack,
         with_head ? ", head targets" : "");
  snprintf(name, sizeof name, "rows (and the gaps untouched)");
  ot_check_same(name, rows, wrows, sb);
  ot_check_same("ids", ids, wids, sb);
  ot_check_same("counts", count + first, wcount + first, (size_t)(4 - first) * sizeof(int32_t));
  ot_check_true("dropped (accumulated onto 7)", dropped == wdropped, "%d, want %d", dropped, wdropped);
  if (with_head) ot_check_same("head targets", head, whead, nb);
  free(tok), free(rows), free(ids), free(wrows), free(wids), free(head), free(whead);
}

int main(void) {
  OtRng rng = ot_rng(36);
  test_case("input", 1000, 0, 3, 0, &rng);
  test_case("input, caps exact", 1000, 0, 0, 0, &rng);
  test_case("tails", 2500, 1, 5, 1, &rng);
  test_case("tails, caps short (drops)", 2500, 1, -4, 1, &rng);
  test_case("empty", 0, 1, 2, 1, &rng);
  return ot_finish("test_op_adaptive_group");
}
