/* Test helper: the collective reads of data/stream.h on P ranks, without the start-up check
 * of the splits (so that a read during the walk meets a damage, as when a file changes under a
 * running job).
 *
 *   mpirun -n P stream_tool FILE SPLIT B_GLOBAL L
 *
 * Every rank opens FILE (txl_stream_corpus_open) and walks its own columns of SPLIT (the
 * dist/shard.h rule) L rows at a time with txl_stream_next; rank 0 then prints
 * "segments N". A read that fails on any rank ends every rank as the trainer's do. */
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"
#include "dist/shard.h"
#include "data/stream.h"

int main(int argc, char **argv) {
  TxlDist d;
  txl_dist_init(&d, &argc, &argv);
  if (argc != 5) txl_fatal_all("usage: stream_tool FILE SPLIT B_GLOBAL L");
  const int B = atoi(argv[3]), L = atoi(argv[4]);
  if (B < d.world || L < 1) txl_fatal_all("stream_tool: B_GLOBAL must be >= the ranks and L >= 1");
  TxlCorpus *c = txl_stream_corpus_open(argv[1]);
  int n_cols, col0;
  txl_shard(B, d.world, d.rank, &n_cols, &col0);
  TxlStream s;
  txl_stream_open(&s, c, argv[2], B, n_cols, col0, L, 1);
  const int32_t *in, *tg;
  long long segments = 0;
  while (txl_stream_next(&s, &in, &tg) > 0) segments++;
  if (d.rank == 0) printf("segments %lld\n", segments);
  txl_stream_close(&s);
  txl_corpus_close(c);
  txl_dist_finalize();
  return 0;
}
