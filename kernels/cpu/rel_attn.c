/* Relative multi-head attention of Transformer-XL on the CPU: attn_type 0 (u, vb, r), Shaw et
 * al.'s learnable relative embeddings (attn_type 1: u, r, the per-key bias rb, no vb) and plain
 * attention (attn_type 2 and 3: no u, no r: only the AC product). The optional parts are NULL.
 *
 * Per (column c, head h) the work is three small GEMMs forward (AC = (q+u) k^T, BD = (q+vb) r^T,
 * vec = P v) and six backward, run in parallel over (c, h); OpenBLAS (the OpenMP build) runs
 * each GEMM on the calling thread inside the parallel region. The "rel-shift" of the original code is a gather here:
 * score[i, j] uses BD[i, L-1-i+j], the row of r for relative distance M+i-j.
 *
 * Gradients: dq, dkv, dr, drb are overwritten; du, dvb accumulate (parameters).
 * Strides (kernels/ops.h): the rows of q, vec, dq, dvec lie s.ldq apart, those of kv, dkv s.ldkv,
 * those of r, dr s.ldr; so the L rows of one (c, h) lie B ldq apart in q, its K keys B ldkv apart
 * in kv. Every GEMM reads and writes the dh columns of its head only: the gaps between rows are
 * neither read nor written.
 * Determinism: every output element is written by exactly one thread; the reductions over
 * columns (dr, du, dvb) run after the parallel part, in column order.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/attn_check.h"
#include "kernels/common/dropout.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/vmath.h"
#include "src/base/error.h"

/* Per-thread scratch: qu, qv [L, dh]; s, p2, t [L, K]. */
static size_t thread_floats(int L, int K, int dh) { return (size_t)2 * L * dh + (size_t)3 * L * K; }

size_t txl_cpu_rel_attn_saved_floats(int L, int K, int B, int H) { return (size_t)B * H * L * K; }

/* The forward needs the per-thread scratch only; the backward also the shared part. */
size_t txl_cpu_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward) {
  size_t per_thread = thread_floats(L, K, dh);
  size_t shared = !backward ? 0
                            : (size_t)B * H * L * K      /* dBD of every (h, c):   [H, B, L, K]   */
                                  + (size_t)H * B * L * dh /* q + vb of every (h, c): [H, B, L, dh] */
                                  + (size_t)2 * B * H * dh; /* du, dvb partials:      [2, B, H, dh]  */
  return ((size_t)omp_get_max_threads() * per_thread + shared) * sizeof(float) + 64;
}

/* The keep-and-scale factor of dropatt for row i of (c, h): m[j] for j < K. */
static void dropatt_row(float *m, TxlDropout drop, int i, int column, int h, int K) {
  const uint32_t thr = txl_dropout_threshold(drop.p);
  const float scale = txl_dropout_scale(drop.p);
  uint32_t f0 = (uint32_t)h * (uint32_t)K;
  TxlPhilox4 w = txl_dropout_words(drop, (uint32_t)i, (uint32_t)column, f0);
  for (int j = 0; j < K; j++) {
    uint32_t f = f0 + (uint32_t)j;
    if (j > 0 && (f & 3u) == 0) w = txl_dropout_words(drop, (uint32_t)i, (uint32_t)column, f);
    m[j] = (w.v[f & 3u] >> 8) >= thr ? scale : 0.0f;
  }
}

/* Keys visible to query i: j in [lo, hi]. */
static inline void visible(const TxlAttnShape *s, int i, int *lo, int *hi) {
  *hi = s->M + i;
  *lo = s->same_length ? i - s->same_shift + 1 : 0;
  if (*lo < 0) *lo = 0;
}

/* qu = q + u, qv = q + vb for the L rows of (c, h); a NULL bias adds nothing (qv is not
 * written when r is NULL: there is no BD term). */
static void add_biases(float *qu, float *qv, const float *q, const float *u, const float *vb, const float *r,
                       const TxlAttnShape *s, int c, int h) {
  for (int i = 0; i < s->L; i++) {
    const float *qi = q + ((size_t)i * s->B + c) * s->ldq + (size_t)h * s->dh;
    for (int e = 0; e < s->dh; e++) {
      qu[(size_t)i * s->dh + e] = u ? qi[e] + u[h * s->dh + e] : qi[e];
      if (r) qv[(size_t)i * s->dh + e] = vb ? qi[e] + vb[h * s->dh + e] : qi[e];
    }
  }
}

void txl_cpu_rel_attn_forward(void *vec_, float *prob, const void *q_, const void *kv_,
                              const void *r_, const float *u, const float *vb, const float *rb,
                              TxlAttnShape s, TxlDropout drop, void *work) {
  txl_attn_check_call(&s, r_, vb, rb);
  float *vec = vec_;
  const float *q = q_;
  const float *kv = kv_;
  const float *r = r_;
  const int L = s.L, K = s.M + s.L, B = s.B, H = s.H, dh = s.dh, HD = H * dh;
  const int ldq = B * s.ldq, ldkv = B * s.ldkv; /* between the rows of one (c, h) */
  const int nthreads = omp_get_max_threads();
  float *ws = (float *)work;
#pragma omp parallel num_threads(nthreads)
  {
    float *qu = ws + (size_t)omp_get_thread_num() * thread_floats(L, K, dh);
    float *qv = qu + (size_t)L * dh;
    float *ac = qv + (size_t)L * dh; /* [L, K] */
    float *bd = ac + (size_t)L * K;  /* [L, K] */
    float *pd = bd + (size_t)L * K;  /* [L, K] probabilities after dropatt */
#pragma omp for schedule(static)
    for (int ch = 0; ch < B * H; ch++) {
      const int c = ch / H, h = ch % H;
      add_biases(qu, qv, q, u, vb, r, &s, c, h);
      const float *k = kv + (size_t)c * s.ldkv + (size_t)h * dh;
      const float *v = k + HD;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, K, dh, 1.0f, qu, dh, k, ldkv, 0.0f, ac, K);
      if (r) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, K, dh, 1.0f, qv, dh, r + (size_t)h * dh, s.ldr,
                    0.0f, bd, K);
        if (rb) /* BD[i, p] += rb[p, h] before the shift (the original's B_ + D_) */
          for (int i = 0; i < L; i++)
            for (int p = 0; p < K; p++) bd[(size_t)i * K + p] += rb[(size_t)p * H + h];
      } else {
        memset(bd, 0, (size_t)L * K * sizeof(float)); /* no BD term: adding +0 leaves AC's bits */
      }
      float *P = prob + (size_t)ch * L * K; /* [L, K] of (c, h) */
      for (int i = 0; i < L; i++) {
        int lo, hi;
        visible(&s, i, &lo, &hi);
        float *pi = P + (size_t)i * K;
        const float *aci = ac + (size_t)i * K;
        const float *bdi = bd + (size_t)i * K + (L - 1 - i); /* bdi[j] = BD[i, L-1-i+j] */
        float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
        for (int j = lo; j <= hi; j++) {
          const float sc = (aci[j] + bdi[j]) * s.scale;
          pi[j] = sc;
          mx = sc > mx ? sc : mx;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = lo; j <= hi; j++) {
          const float e = txl_expf(pi[j] - mx);
          pi[j] = e;
          sum += e;
        }
        const float inv = 1.0f / sum;
        for (int j = 0; j < lo; j++) pi[j] = 0.0f;
        for (int j = lo; j <= hi; j++) pi[j] *= inv;
        for (int j = hi + 1; j < K; j++) pi[j] = 0.0f;
        if (drop.p > 0.0f) {
          float *pdi = pd + (size_t)i * K;
          dropatt_row(pdi, drop, i, s.col0 + c, h, K);
          for (int j = 0; j < K; j++) pdi[j] *= pi[j];
        }
      }
      const float *Pv = drop.p > 0.0f ? pd : P;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, K, 1.0f, Pv, K, v, ldkv, 0.0f,
                  vec + (size_t)c * s.ldq + (size_t)h * dh, ldq);
    }
  }
}

void txl_cpu_rel_attn_backward(void *dq_, void *dkv_, void *dr_, float *du, float *dvb, float *drb,
                               const void *dvec_, const void *vec_, const void *q_, const void *kv_,
                               const void *r_, const float *u, const float *vb, const float *rb,
                               const float *prob, TxlAttnShape s, TxlDropout drop, void *work) {
  txl_attn_check_call(&s, r_, vb, rb);
  (void)rb; /* the saved probabilities already hold its contribution */
  float *dq = dq_;
  float *dkv = dkv_;
  float *dr = dr_;
  const float *dvec = dvec_;
  const float *vec = vec_;
  const float *q = q_;
  const float *kv = kv_;
  const float *r = r_;
  (void)vec; /* the saved probabilities give everything the backward needs */
  const int L = s.L, K = s.M + s.L, B = s.B, H = s.H, dh = s.dh, HD = H * dh;
  const int ldq = B * s.ldq, ldkv = B * s.ldkv; /* between the rows of one (c, h) */
  const int nthreads = omp_get_max_threads();
  float *ws = (float *)work;
  float *dbd_all = ws + (size_t)nthreads * thread_floats(L, K, dh); /* [H, B, L, K] */
  float *qv_all = dbd_all + (size_t)B * H * L * K;                   /* [H, B, L, dh] */
  float *du_part = qv_all + (size_t)H * B * L * dh;                  /* [B, H, dh] */
  float *dvb_part = du_part + (size_t)B * H * dh;                    /* [B, H, dh] */
#pragma omp parallel num_threads(nthreads)
  {
    float *qu = ws + (size_t)omp_get_thread_num() * thread_floats(L, K, dh);
    float *qvt = qu + (size_t)L * dh; /* [L, dh] dqv scratch */
    float *pd = qvt + (size_t)L * dh; /* [L, K] probabilities after dropatt */
    float *dp = pd + (size_t)L * K;   /* [L, K] d(probabilities after dropatt) -> d score */
    float *mk = dp + (size_t)L * K;   /* [L, K] dropatt factors */
#pragma omp for schedule(static)
    for (int ch = 0; ch < B * H; ch++) {
      const int c = ch / H, h = ch % H;
      float *qv = qv_all + ((size_t)h * B + c) * L * dh;
      add_biases(qu, qv, q, u, vb, r, &s, c, h);
      const float *k = kv + (size_t)c * s.ldkv + (size_t)h * dh;
      const float *v = k + HD;
      float *dk = dkv + (size_t)c * s.ldkv + (size_t)h * dh;
      float *dv = dk + HD;
      const float *dveci = dvec + (size_t)c * s.ldq + (size_t)h * dh;
      float *dqi = dq + (size_t)c * s.ldq + (size_t)h * dh;
      const float *P = prob + (size_t)ch * L * K;
      const float *Pv = P;
      if (drop.p > 0.0f) {
        for (int i = 0; i < L; i++) {
          dropatt_row(mk + (size_t)i * K, drop, i, s.col0 + c, h, K);
          for (int j = 0; j < K; j++) pd[(size_t)i * K + j] = P[(size_t)i * K + j] * mk[(size_t)i * K + j];
        }
        Pv = pd;
      }
      /* dv = Pd^T dvec;  dPd = dvec v^T */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, dh, L, 1.0f, Pv, K, dveci, ldq, 0.0f, dv, ldkv);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, K, dh, 1.0f, dveci, ldq, v, ldkv, 0.0f, dp, K);
      /* softmax backward, then the score scale; dBD[i, L-1-i+j] = dscore[i, j] */
      float *dbd = dbd_all + ((size_t)h * B + c) * L * K;
      memset(dbd, 0, (size_t)L * K * sizeof(float));
      for (int i = 0; i < L; i++) {
        int lo, hi;
        visible(&s, i, &lo, &hi);
        const float *pi = P + (size_t)i * K;
        float *dpi = dp + (size_t)i * K;
        if (drop.p > 0.0f)
          for (int j = lo; j <= hi; j++) dpi[j] *= mk[(size_t)i * K + j];
        float dot = 0.0f;
        for (int j = lo; j <= hi; j++) dot += pi[j] * dpi[j];
        for (int j = 0; j < lo; j++) dpi[j] = 0.0f;
        for (int j = lo; j <= hi; j++) dpi[j] = pi[j] * (dpi[j] - dot) * s.scale;
        for (int j = hi + 1; j < K; j++) dpi[j] = 0.0f;
        float *dbdi = dbd + (size_t)i * K + (L - 1 - i);
        if (r)
          for (int j = lo; j <= hi; j++) dbdi[j] = dpi[j];
      }
      /* AC part: dq = dS k; dk = dS^T (q + u) */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, K, 1.0f, dp, K, k, ldkv, 0.0f, dqi, ldq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, dh, L, 1.0f, dp, K, qu, dh, 0.0f, dk, ldkv);
      float *dup = du_part + (size_t)ch * dh, *dvp = dvb_part + (size_t)ch * dh;
      memset(dup, 0, (size_t)dh * sizeof(float));
      memset(dvp, 0, (size_t)dh * sizeof(float));
      if (r) {
        /* BD part: dq += dBD r */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, K, 1.0f, dbd, K, r + (size_t)h * dh, s.ldr, 0.0f,
                    qvt, dh);
        for (int i = 0; i < L; i++) {
          float *dqr = dqi + (size_t)i * ldq;
          const float *t = qvt + (size_t)i * dh;
          for (int e = 0; e < dh; e++) {
            dup[e] += dqr[e];
            dvp[e] += t[e];
            dqr[e] += t[e];
          }
        }
      } else {
        for (int i = 0; i < L; i++) {
          const float *dqr = dqi + (size_t)i * ldq;
          for (int e = 0; e < dh; e++) dup[e] += dqr[e];
        }
      }
    }
    if (r) {
      /* dr[:, h, :] = sum_c dBD[h, c]^T (q + vb)[h, c]: one GEMM over all columns per head. */
#pragma omp for schedule(static)
      for (int h = 0; h < H; h++)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, dh, B * L, 1.0f, dbd_all + (size_t)h * B * L * K, K,
                    qv_all + (size_t)h * B * L * dh, dh, 0.0f, dr + (size_t)h * dh, s.ldr);
    }
    if (drb) {
      /* drb[p, h] = sum over (c, i) of dBD[h, c, i, p], in (c, i) order */
#pragma omp for schedule(static)
      for (int h = 0; h < H; h++)
        for (int p = 0; p < K; p++) {
          float sum = 0.0f;
          for (int ci = 0; ci < B * L; ci++) sum += dbd_all[((size_t)h * B * L + ci) * K + p];
          drb[(size_t)p * H + h] = sum;
        }
    }
  }
  for (int c = 0; c < B; c++)
    for (int h = 0; h < H; h++)
      for (int e = 0; e < dh; e++) {
        if (du) du[h * dh + e] += du_part[((size_t)c * H + h) * dh + e];
        if (dvb) dvb[h * dh + e] += dvb_part[((size_t)c * H + h) * dh + e];
      }
}
