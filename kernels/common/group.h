/* The adaptive input's and softmax's grouping of tokens by cluster (the op adaptive_group,
 * kernels/ops.def): its spec, which cluster a token is of, and the check of a spec, shared by the
 * CPU and CUDA kernels. */
#ifndef TXL_KERNELS_COMMON_GROUP_H
#define TXL_KERNELS_COMMON_GROUP_H

#include <stdint.h>

#include "src/base/philox.h" /* TXL_HD */

/* What a grouping groups, and where: token id v is of cluster i when cut[i] <= v < cut[i + 1]
 * (0 <= i <= last); clusters first..last are grouped (a token of another is in no group).
 * Cluster i owns the slots [base[i], base[i] + cap[i]) of the op's rows and ids, after the slots
 * of cluster i - 1. */
#define TXL_GROUP_MAX 8
typedef struct {
  int first, last;                 /* 0 <= first <= last < TXL_GROUP_MAX                    */
  int head_size;                   /* the head's target of a token of cluster i > 0: head_size - i */
  int32_t cut[TXL_GROUP_MAX + 1];  /* non-decreasing                                        */
  int32_t base[TXL_GROUP_MAX];     /* cluster i's first slot                                */
  int32_t cap[TXL_GROUP_MAX];      /* its slots: the most tokens of it a call may hold       */
} TxlGroupSpec;

/* The cluster i (0 <= i <= g->last) with cut[i] <= v < cut[i + 1], or -1 for an id outside
 * [cut[0], cut[last + 1]). */
static inline TXL_HD int txl_group_cluster(const TxlGroupSpec *g, int32_t v) {
  if (v < g->cut[0] || v >= g->cut[g->last + 1]) return -1;
  int i = 0;
  while (v >= g->cut[i + 1]) i++;
  return i;
}

/* NULL for a spec the op takes, else what is wrong with it (an internal error of the caller's). */
static inline const char *txl_group_spec_error(const TxlGroupSpec *g, int64_t n) {
  if (n < 0 || n > INT32_MAX) return "the token count is outside [0, 2^31)";
  if (g->first < 0 || g->first > g->last || g->last >= TXL_GROUP_MAX) return "first..last is not a range of clusters";
  for (int i = 0; i <= g->last; i++)
    if (g->cut[i] > g->cut[i + 1]) return "the cuts decrease";
  for (int i = g->first; i <= g->last; i++) {
    if (g->cap[i] < 0 || g->base[i] < 0) return "a cluster's slots start or count below 0";
    if (i > g->first && g->base[i] < g->base[i - 1] + g->cap[i - 1]) return "two clusters' slots overlap";
  }
  return 0;
}

#endif
