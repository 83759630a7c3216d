/* The adaptive input's and softmax's grouping by cluster, as the CPU backend
 * (kernels/cpu/adaptive_group.c; the op in kernels/ops.def, TxlGroupSpec in kernels/common/group.h):
 * stable, so every slot holds what the CPU's pass in token order puts there, bit for bit.
 *
 * One block of TXL_CUDA_THREADS threads (a segment's tokens: thousands, a few microseconds):
 * thread k owns the k-th run of ceil(n / threads) consecutive tokens. It counts its tokens per
 * cluster (and writes their head targets); the counts go to shared memory, where one thread per
 * cluster turns them into exclusive prefix sums over the threads in order; then each thread walks
 * its run again and writes its tokens of each cluster from its prefix on, those beyond the cap
 * not at all. All threads then fill the slots after each cluster's tokens with -1, and thread 0
 * writes the counts and adds the tokens that found no slot to *dropped. */
#include "kernels/common/group.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

static __global__ void adaptive_group_kernel(int32_t *rows, int32_t *ids, int32_t *head, int32_t *count,
                                             int32_t *dropped, const int32_t *tok, int64_t n, TxlGroupSpec g) {
  __shared__ int32_t before[TXL_GROUP_MAX][TXL_CUDA_THREADS]; /* this thread's count, then its prefix */
  __shared__ int32_t total[TXL_GROUP_MAX];
  const int k = (int)threadIdx.x;
  const int64_t per = (n + TXL_CUDA_THREADS - 1) / TXL_CUDA_THREADS;
  const int64_t t0 = per * k < n ? per * k : n, t1 = t0 + per < n ? t0 + per : n;
  int32_t mine[TXL_GROUP_MAX];
  for (int i = 0; i < TXL_GROUP_MAX; i++) mine[i] = 0;
  for (int64_t t = t0; t < t1; t++) {
    const int c = txl_group_cluster(&g, tok[t]);
    if (head) head[t] = c < 0 ? -1 : c == 0 ? tok[t] : g.head_size - c;
    if (c >= g.first) mine[c]++;
  }
  for (int i = 0; i < TXL_GROUP_MAX; i++) before[i][k] = mine[i];
  __syncthreads();
  if (k >= g.first && k <= g.last) { /* thread k scans cluster k (TXL_GROUP_MAX <= threads) */
    int32_t acc = 0;
    for (int j = 0; j < TXL_CUDA_THREADS; j++) {
      const int32_t v = before[k][j];
      before[k][j] = acc;
      acc += v;
    }
    total[k] = acc;
  }
  __syncthreads();
  for (int i = 0; i < TXL_GROUP_MAX; i++) mine[i] = before[i][k]; /* the slot of this thread's next token */
  for (int64_t t = t0; t < t1; t++) {
    const int c = txl_group_cluster(&g, tok[t]);
    if (c < g.first) continue;
    const int32_t s = mine[c]++;
    if (s < g.cap[c]) {
      rows[g.base[c] + s] = (int32_t)t;
      ids[g.base[c] + s] = tok[t] - g.cut[c];
    }
  }
  for (int i = g.first; i <= g.last; i++)
    for (int32_t s = (total[i] < g.cap[i] ? total[i] : g.cap[i]) + k; s < g.cap[i]; s += TXL_CUDA_THREADS)
      rows[g.base[i] + s] = ids[g.base[i] + s] = -1;
  if (k == 0) {
    int32_t lost = 0;
    for (int i = g.first; i <= g.last; i++) {
      count[i] = total[i];
      lost += total[i] > g.cap[i] ? total[i] - g.cap[i] : 0;
    }
    *dropped += lost;
  }
}

static_assert(TXL_GROUP_MAX <= TXL_CUDA_THREADS, "adaptive_group_kernel: one scanning thread per cluster");

extern "C" void txl_cuda_adaptive_group(int32_t *rows, int32_t *ids, int32_t *head, int32_t *count, int32_t *dropped,
                                        const int32_t *tok, int64_t n, TxlGroupSpec g) {
  const char *bad = txl_group_spec_error(&g, n);
  if (bad) txl_fatal("internal: adaptive_group: %s", bad);
  TXL_LAUNCH(adaptive_group_kernel, 1, TXL_CUDA_THREADS, 0)(rows, ids, head, count, dropped, tok, n, g);
  CUDA_LAUNCH_CHECK();
}
