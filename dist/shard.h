/* How B columns are split among P ranks: contiguous shards in rank order, the first B % P ranks
 * one column more than the others (so every rank holds floor(B / P) or ceil(B / P) columns).
 * Training, evaluation and checkpoints all use this one rule. Needs 1 <= P <= B. */
#ifndef TXL_DIST_SHARD_H
#define TXL_DIST_SHARD_H

/* Columns [*col0, *col0 + *n) of B belong to rank r of P. */
static inline void txl_shard(int B, int P, int r, int *n, int *col0) {
  const int base = B / P, extra = B % P;
  *n = base + (r < extra ? 1 : 0);
  *col0 = r * base + (r < extra ? r : extra);
}

/* The most columns any rank holds (what each rank's buffers are sized for in an estimate). */
static inline int txl_shard_max(int B, int P) { return (B + P - 1) / P; }

#endif
