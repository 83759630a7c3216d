/* The adaptive input's and softmax's grouping by cluster (kernels/ops.def: adaptive_group), one
 * pass in token order: stable by construction. */
#include "kernels/common/group.h"
#include "kernels/cpu/cpu_kernels.h"
#include "src/base/error.h"

void txl_cpu_adaptive_group(int32_t *rows, int32_t *ids, int32_t *head, int32_t *count, int32_t *dropped,
                            const int32_t *tok, int64_t n, TxlGroupSpec g) {
  const char *bad = txl_group_spec_error(&g, n);
  if (bad) txl_fatal("internal: adaptive_group: %s", bad);
  int32_t k[TXL_GROUP_MAX] = {0};
  int64_t lost = 0;
  for (int64_t t = 0; t < n; t++) {
    const int c = txl_group_cluster(&g, tok[t]);
    if (head) head[t] = c < 0 ? -1 : c == 0 ? tok[t] : g.head_size - c;
    if (c < g.first) continue; /* no cluster (-1), or one not grouped */
    if (k[c] < g.cap[c]) {
      rows[g.base[c] + k[c]] = (int32_t)t;
      ids[g.base[c] + k[c]] = tok[t] - g.cut[c];
    } else {
      lost++;
    }
    k[c]++;
  }
  for (int i = g.first; i <= g.last; i++) {
    for (int32_t s = k[i]; s < g.cap[i]; s++) rows[g.base[i] + s] = ids[g.base[i] + s] = -1;
    count[i] = k[i];
  }
  *dropped += (int32_t)lost;
}
