#include "src/model/gemm_of.h"

#include <string.h>

#include "src/model/model.h"

/* The tensor of m's table that p points into (the compute copy of the weights, the fp32 master
 * weights or the gradients), or NULL. */
static const TxlTensorInfo *tensor_at(const TxlModel *m, const void *p) {
  const char *c = p;
  const int64_t n = m->table.total;
  const size_t A = txl_dtype_size(m->ops->act);
  int64_t off = -1;
  if (c >= (const char *)m->param_act && c < (const char *)m->param_act + (size_t)n * A)
    off = (int64_t)((size_t)(c - (const char *)m->param_act) / A);
  else if (c >= (const char *)m->param_buf && c < (const char *)(m->param_buf + n))
    off = (const float *)p - m->param_buf;
  else if (c >= (const char *)m->grad_buf && c < (const char *)(m->grad_buf + n))
    off = (const float *)p - m->grad_buf;
  if (off < 0) return NULL;
  for (int i = 0; i < m->table.n_tensors; i++) {
    const TxlTensorInfo *t = &m->table.tensors[i];
    if (off >= t->offset && off < t->offset + t->span) return t;
  }
  return NULL;
}

TxlGemmOf txl_model_gemm_of(void *model, const void *A, const void *B, const void *C, int *weight) {
  const TxlModel *m = model;
  const void *operands[3] = {B, A, C};
  static const int index[3] = {1, 0, 2}; /* operands[i] is GEMM operand index[i] */
  *weight = -1;
  for (int i = 0; i < 3; i++) {
    const TxlTensorInfo *t = tensor_at(m, operands[i]);
    if (!t) continue;
    *weight = index[i];
    const char *dot = strrchr(t->name, '.'), *base = dot ? dot + 1 : t->name;
    if (!strcmp(base, "w_ff1") || !strcmp(base, "w_ff2")) return TXL_GEMM_OF_FFN;
    if (!strcmp(base, "w_qkv") || !strcmp(base, "w_r") || !strcmp(base, "w_o")) return TXL_GEMM_OF_PROJ;
    return TXL_GEMM_OF_IO;
  }
  return TXL_GEMM_OF_IO;
}
