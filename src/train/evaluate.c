#include "src/train/evaluate.h"

#include "dist/shard.h"
#include "data/stream.h"
#include "src/train/tail_cap.h"

double txl_evaluate(TxlModel *m, TxlCorpus *c, const char *split, const TxlEvalShape *s, const TxlDist *d,
                    int max_segments, double *tokens_out) {
  int B_local, col0;
  txl_shard(s->batch_size, d->world, d->rank, &B_local, &col0);
  TxlRunShape rs = {s->tgt_len, B_local, col0, s->mem_len, s->clamp_len, s->same_length, 0, 1,
                    TXL_TAIL_NOT_COUNTED};
  TxlStream st;
  txl_stream_open(&st, c, split, s->batch_size, B_local, rs.col0, s->tgt_len, 1);
  if (s->tail) rs.tail = *s->tail;
  else txl_tail_cap_measure(&rs.tail, c, &m->spec.dims, split, s->batch_size, &rs);
  TxlRun run;
  txl_run_create(&run, m, &rs);
  double sums[2] = {0.0, 0.0}; /* loss, tokens */
  const int32_t *in, *tg;
  int n, seg = 0;
  while ((max_segments < 0 || seg < max_segments) && (n = txl_stream_next(&st, &in, &tg)) > 0) {
    sums[0] += txl_model_forward(m, &run, in, tg, n, 0, 0, 0.0f);
    sums[1] += (double)n * B_local;
    seg++;
  }
  txl_stream_close(&st);
  txl_run_check_dropped(m, &run);
  txl_run_destroy(&run, m);
  txl_dist_allreduce_sum_f64(sums, 2);
  if (tokens_out) *tokens_out = sums[1];
  return sums[0] / sums[1];
}
