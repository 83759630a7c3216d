/* The segment's shape and the loss sum: see segment.h. */
#include "src/model/segment.h"

#include <math.h>

TxlSegment txl_segment(const TxlModel *m, const TxlRun *r, int L, int M) {
  const TxlDims *dm = &m->spec.dims;
  TxlSegment sg;
  sg.L = L;
  sg.M = M;
  sg.K = M + L;
  sg.Mnew = sg.K < r->mem_len ? sg.K : r->mem_len;
  sg.LB = (int64_t)L * r->B;
  sg.KB = (int64_t)sg.K * r->B;
  sg.R_kept = 0;
  sg.cached_kv = 0;
  sg.as.L = L;
  sg.as.M = M;
  sg.as.B = r->B;
  sg.as.H = dm->n_head;
  sg.as.dh = dm->d_head;
  sg.as.col0 = r->col0;
  sg.as.same_length = r->same_length;
  sg.as.same_shift = txl_attn_same_shift(L, sg.K, r->mem_len);
  sg.as.scale = (float)(1.0 / sqrt((double)dm->d_head));
  const int64_t HD = (int64_t)dm->n_head * dm->d_head; /* q, kv, r in padded rows (model.h) */
  sg.as.ldq = txl_model_ld(m, HD);
  sg.as.ldkv = txl_model_ld(m, 2 * HD);
  sg.as.ldr = txl_model_ld(m, HD);
  return sg;
}

void txl_loss_add(const TxlModel *m, TxlRun *r, const float *loss, int64_t n, int add) {
  m->ops->loss_sum(r->loss_out ? r->loss_out + r->group : r->loss_dev, loss, n, add);
}

double txl_loss_result(const TxlModel *m, TxlRun *r) {
  if (r->loss_out) return 0.0;
  double sum = 0.0;
  m->ops->to_host(&sum, r->loss_dev, sizeof sum);
  return sum;
}
