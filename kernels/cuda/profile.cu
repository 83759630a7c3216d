/* The device profile (profile.h): the profiling table is made from kernels/ops.def by one template
 * that takes any op's signature (Wrap below), so that no op is forwarded by hand. Host code only. */
#include "kernels/cuda/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/count_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "src/base/error.h"
#include "src/base/timer.h"

namespace {

enum OpId {
#define TXL_OP(kind, ret, name, params) OP_##name,
#include "kernels/ops.def"
#undef TXL_OP
  N_OPS
};

struct Profile {
  TxlOps table;
  const TxlOps *inner, *count;
  int max_marks, n;  /* events made; marks taken in this step */
  cudaEvent_t *ev;   /* [max_marks]: ev[i] starts the i-th run of one family's calls */
  double *host;      /* [max_marks]: the host's clock at ev[i] */
  int *fam;          /* [max_marks]: the family of run i */
  int current;       /* the family of the run in progress; -1 before a step's first */
  int in_step, truncated;
  TxlProfileTotals tot;
  double op_launches[N_OPS], op_issued[N_OPS]; /* per op: counted, issued (where counted) */
};

const char *const k_op_names[N_OPS] = {
#define TXL_OP(kind, ret, name, params) #name,
#include "kernels/ops.def"
#undef TXL_OP
};

Profile *g_prof;

/* The profile's family of a call of op `op` that counted first into count family `cf`. */
int family_of(int cf, int op) {
  switch (cf) {
    case TXL_COUNT_GEMM_FFN: return TXL_PROF_GEMM_FFN;
    case TXL_COUNT_GEMM_ATTN_PROJ: return TXL_PROF_GEMM_PROJ;
    case TXL_COUNT_GEMM_IO: return TXL_PROF_GEMM_IO;
    case TXL_COUNT_ATTENTION: return op == OP_rel_attn_backward ? TXL_PROF_ATTN_BWD : TXL_PROF_ATTN_FWD;
    case TXL_COUNT_LAYERNORM: return TXL_PROF_LAYERNORM;
    case TXL_COUNT_FFN_ELEMENTWISE: return TXL_PROF_ELEMENTWISE;
    case TXL_COUNT_EMBEDDING: return TXL_PROF_EMBEDDING;
    case TXL_COUNT_SOFTMAX_XENT: return TXL_PROF_SOFTMAX_XENT;
    case TXL_COUNT_DROPOUT: return TXL_PROF_DROPOUT;
    case TXL_COUNT_OPTIMIZER:
      if (op == OP_sumsq || op == OP_sumsq_segments || op == OP_grad_clip || op == OP_norm_parts || op == OP_sumsq_parts ||
          op == OP_grad_clip_parts)
        return TXL_PROF_GRAD_NORM;
      return op == OP_digest ? TXL_PROF_OTHER : TXL_PROF_OPTIMIZER; /* the digest is the replica check's */
    case TXL_COUNT_OTHER: return op == OP_upload || op == OP_to_device ? TXL_PROF_UPLOAD : TXL_PROF_OTHER;
  }
  txl_fatal("internal: profile: count family %d", cf);
}

/* A run of family f's calls starts here, unless one is in progress. */
void start_run(Profile *p, int f) {
  if (f == p->current) return;
  if (p->n >= p->max_marks - 1) { /* the last event ends the step */
    p->truncated = 1;
    return;
  }
  p->host[p->n] = txl_now_s();
  CUDA_CHECK(cudaEventRecord(p->ev[p->n], (cudaStream_t)txl_cuda_compute_stream()));
  p->fam[p->n++] = f;
  p->current = f;
}

/* Counts the call of op `op` the counting table just made (from `before`, the costs before it);
 * returns its family, TXL_PROF_OTHER for a call that counted nothing (no work, and no launch
 * should come of it: the launches the emulator sees say whether one did). */
int after_count(Profile *p, int op, const TxlCudaCost *before) {
  const int cf = txl_count_call_family();
  if (cf < 0) return TXL_PROF_OTHER;
  const int f = family_of(cf, op);
  start_run(p, f);
  const TxlCudaCost *now = txl_count_costs();
  TxlProfileSums *s = &p->tot.f[f];
  for (int i = 0; i < TXL_COUNT_FAMILIES; i++) {
    s->tensor_flops += now[i].tensor_flops - before[i].tensor_flops;
    s->core_flops += now[i].core_flops - before[i].core_flops;
    s->bytes += now[i].bytes - before[i].bytes;
    s->launches += now[i].launches - before[i].launches;
    p->op_launches[op] += now[i].launches - before[i].launches;
  }
  s->calls += 1.0;
  return f;
}

/* After the real call: what the backend counted of it (the emulator's launches and host
 * synchronisations) goes to its family. */
struct Issued {
  Profile *p;
  int f, op;
  long launches, syncs;
  Issued(Profile *p_, int f_, int op_) : p(p_), f(f_), op(op_), launches(0), syncs(0) {
    if (p && !txl_cuda_api_counts(&launches, &syncs)) p = NULL;
  }
  ~Issued() {
    long l, s;
    if (!p || !txl_cuda_api_counts(&l, &s)) return;
    p->tot.f[f].issued += (double)(l - launches);
    p->tot.f[f].syncs += (double)(s - syncs);
    p->op_issued[op] += (double)(l - launches);
  }
};

/* TxlProfileTotals.mismatch from the per-op sums of the profiled steps. */
void find_mismatches(Profile *p) {
  char *m = p->tot.mismatch;
  const size_t cap = sizeof p->tot.mismatch;
  size_t at = 0;
  m[0] = '\0';
  long l, s;
  if (!txl_cuda_api_counts(&l, &s) || p->tot.steps == 0) return;
  for (int op = 0; op < N_OPS; op++) {
    if (p->op_launches[op] == p->op_issued[op] || at + 1 >= cap) continue;
    const int w = snprintf(m + at, cap - at, "%s%s %.4g/%.4g", at ? ", " : "", k_op_names[op],
                           p->op_launches[op] / p->tot.steps, p->op_issued[op] / p->tot.steps);
    at = w < 0 ? cap : at + (size_t)w;
  }
}

/* The profiling table's op: in a step, counted first (the counting op only reads its arguments'
 * values, and to_host's zeros are written over by the real copy after it), then run. */
template <int Id, auto Member, typename Sig> struct Wrap;
template <int Id, auto Member, typename R, typename... A> struct Wrap<Id, Member, R (*)(A...)> {
  static R call(A... a) {
    Profile *p = g_prof;
    int f = -1;
    if (p->in_step) {
      TxlCudaCost before[TXL_COUNT_FAMILIES];
      memcpy(before, txl_count_costs(), sizeof before);
      txl_count_call_begin();
      (p->count->*Member)(a...);
      f = after_count(p, Id, before);
    }
    const Issued issued(f >= 0 ? p : NULL, f, Id); /* its destructor runs after the call below */
    return (p->inner->*Member)(a...);
  }
};

/* ops->mark: the all-reduce's wait is a run of its own; any later call starts its family's. */
void profile_mark(int region) {
  Profile *p = g_prof;
  if (p->in_step && region == TXL_REGION_ALLREDUCE) start_run(p, TXL_PROF_ALLREDUCE);
}

}  // namespace

extern "C" const TxlOps *txl_cuda_profile_create(const TxlOps *inner, int tf32, int max_marks) {
  if (g_prof) txl_fatal("internal: a second device profile");
  if (max_marks < 16) txl_fatal("internal: a device profile of %d events", max_marks);
  Profile *p = (Profile *)txl_calloc(1, sizeof *p, "device profile");
  p->inner = inner;
  p->count = txl_count_ops(inner->act, tf32);
  p->max_marks = max_marks;
  p->ev = (cudaEvent_t *)txl_calloc((size_t)max_marks, sizeof *p->ev, "profile events");
  p->host = (double *)txl_calloc((size_t)max_marks, sizeof *p->host, "profile clock");
  p->fam = (int *)txl_calloc((size_t)max_marks, sizeof *p->fam, "profile families");
  for (int i = 0; i < max_marks; i++) CUDA_CHECK(cudaEventCreate(&p->ev[i]));
  TxlOps t = *inner; /* name, act, row_align */
#define TXL_OP(kind, ret, name, params) t.name = &Wrap<OP_##name, &TxlOps::name, decltype(TxlOps::name)>::call;
#include "kernels/ops.def"
#undef TXL_OP
  /* memory management and sizes are no step's work: the backend's own (the counting table's
   * memory is address space only) */
  t.alloc = inner->alloc;
  t.free = inner->free;
  t.reserve = inner->reserve;
  t.upload_reserve = inner->upload_reserve;
  t.rel_attn_saved_floats = inner->rel_attn_saved_floats;
  t.rel_attn_workspace = inner->rel_attn_workspace;
  t.mark = profile_mark;
  p->table = t;
  g_prof = p;
  return &p->table;
}

extern "C" void txl_cuda_profile_set_model(TxlGemmOfFn fn, void *ctx, const void *grad, size_t grad_bytes) {
  txl_count_set_gemm_family(fn, ctx);
  txl_count_set_gradients(grad, grad_bytes);
}

extern "C" void txl_cuda_profile_step(int begin) {
  Profile *p = g_prof;
  if (!p) txl_fatal("internal: a profiled step without a profile");
  if (begin) {
    p->n = 0;
    p->current = -1;
    p->truncated = 0;
    p->in_step = 1;
    return;
  }
  p->in_step = 0;
  if (p->n == 0) return;
  const int n = p->n;
  p->host[n] = txl_now_s();
  CUDA_CHECK(cudaEventRecord(p->ev[n], (cudaStream_t)txl_cuda_compute_stream()));
  txl_cuda_wait_event(p->ev[n], "the profiled step's end");
  for (int i = 0; i < n; i++) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]));
    p->tot.f[p->fam[i]].device_s += 1e-3 * (double)ms;
    p->tot.f[p->fam[i]].host_s += p->host[i + 1] - p->host[i];
  }
  float all = 0.0f;
  CUDA_CHECK(cudaEventElapsedTime(&all, p->ev[0], p->ev[n]));
  p->tot.step_device_s += 1e-3 * (double)all;
  p->tot.step_host_s += p->host[n] - p->host[0];
  p->tot.steps++;
  long l, sy;
  if (!txl_cuda_api_counts(&l, &sy)) /* a GPU: nothing counts them */
    for (int f = 0; f < TXL_PROF_FAMILIES; f++) p->tot.f[f].issued = p->tot.f[f].syncs = -1.0;
  p->tot.truncated += p->truncated;
  find_mismatches(p);
}

extern "C" const TxlProfileTotals *txl_cuda_profile_totals(void) {
  if (!g_prof) txl_fatal("internal: the totals of no device profile");
  return &g_prof->tot;
}

extern "C" void txl_cuda_profile_destroy(void) {
  Profile *p = g_prof;
  if (!p) return;
  for (int i = 0; i < p->max_marks; i++) CUDA_CHECK(cudaEventDestroy(p->ev[i]));
  free(p->ev);
  free(p->host);
  free(p->fam);
  free(p);
  g_prof = NULL;
  txl_count_set_gemm_family(NULL, NULL);
  txl_count_set_gradients(NULL, 0);
}
