/* The double-precision reference of relative attention (see ref_rel_attn.h). */
#include "tests/lib/ref_rel_attn.h"

#include <math.h>
#include <stdlib.h>

#include "tests/lib/test_util.h"

void ref_attn_forward(RefAttn *a) {
  const TxlAttnShape *s = &a->s;
  const int K = a->K, dh = s->dh;
  const double dscale = a->drop.p > 0.0f ? (double)txl_dropout_scale(a->drop.p) : 1.0;
  double *sc = ot_alloc_d(K);
  for (int c = 0; c < s->B; c++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->L; i++) {
        const int64_t row = row_at(s, c, h, i);
        const double *qi = a->q + q_at(s, i, c, h);
        double mx = -INFINITY, serr = 0.0, sabs = 0.0;
        for (int j = 0; j < K; j++) {
          if (!attn_visible(s, i, j)) continue;
          const double *kj = a->kv + k_at(s, j, c, h);
          const double *rt = a->r + r_at(s, K - 1 - (s->M + i - j), h); /* distance M + i - j */
          double ac = 0.0, bd = 0.0, mag = 0.0;
          for (int e = 0; e < dh; e++) {
            const double qu = qi[e] + a->u[h * dh + e], qv = qi[e] + a->vb[h * dh + e];
            ac += qu * kj[e];
            bd += qv * rt[e];
            if (a->serr) mag += fabs(qu) * fabs(kj[e]) + fabs(qv) * fabs(rt[e]);
          }
          if (a->rb) {
            const double rbj = a->rb[(int64_t)(K - 1 - (s->M + i - j)) * s->H + h];
            bd += rbj;
            mag += fabs(rbj);
          }
          sc[j] = (ac + bd) * s->scale;
          serr = fmax(serr, (2.0 * dh + 4.0) * OT_U * mag * s->scale);
          sabs = fmax(sabs, fabs(sc[j]));
          if (sc[j] > mx) mx = sc[j];
        }
        double sum = 0.0;
        for (int j = 0; j < K; j++)
          if (attn_visible(s, i, j)) sum += exp(sc[j] - mx);
        if (a->lse) a->lse[row] = sum > 0.0 ? mx + log(sum) : -INFINITY;
        if (a->serr) a->serr[row] = serr;
        if (a->sabs) a->sabs[row] = sabs;
        if (a->any) a->any[row] = sum > 0.0;
        double *p = a->prob + row * K, *df = a->drop_factor + row * K;
        for (int j = 0; j < K; j++) {
          p[j] = attn_visible(s, i, j) ? exp(sc[j] - mx) / sum : 0.0;
          df[j] = a->drop.p > 0.0f
                      ? (txl_dropout_keep(a->drop, (uint32_t)i, (uint32_t)(s->col0 + c), (uint32_t)(h * K + j)) ? dscale : 0.0)
                      : 1.0;
        }
        if (!a->vec) continue;
        double *o = a->vec + q_at(s, i, c, h);
        for (int e = 0; e < dh; e++) {
          double acc = 0.0;
          for (int j = 0; j < K; j++) acc += p[j] * df[j] * a->kv[v_at(s, j, c, h) + e];
          o[e] = acc;
        }
      }
  free(sc);
}

void ref_attn_backward(double *dq, double *dkv, double *dr, double *du, double *dvb, double *drb,
                       const RefAttn *a, int absolute, const double *dD) {
  const TxlAttnShape *s = &a->s;
  const int K = a->K, dh = s->dh;
#define A(x) (absolute ? fabs(x) : (x))
  double *dp = ot_alloc_d(K);
  for (int c = 0; c < s->B; c++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->L; i++) {
        const int64_t row = row_at(s, c, h, i);
        const double *p = a->prob + row * K, *df = a->drop_factor + row * K;
        const double *g = a->dvec + q_at(s, i, c, h), *qi = a->q + q_at(s, i, c, h);
        double dot = 0.0;
        if (!dD) /* dP, D and dv */
          for (int j = 0; j < K; j++) {
            double t = 0.0;
            for (int e = 0; e < dh; e++) {
              t += A(g[e]) * A(a->kv[v_at(s, j, c, h) + e]);
              dkv[v_at(s, j, c, h) + e] += p[j] * df[j] * A(g[e]);
            }
            dp[j] = t * df[j];
            dot += p[j] * dp[j];
          }
        for (int j = 0; j < K; j++) {
          if (!attn_visible(s, i, j)) continue;
          const double ds = p[j] * (dD ? dD[row] : absolute ? dp[j] + dot : dp[j] - dot) * s->scale;
          const int t = K - 1 - (s->M + i - j);
          if (drb) drb[(int64_t)t * s->H + h] += ds;
          for (int e = 0; e < dh; e++) {
            const double kj = A(a->kv[k_at(s, j, c, h) + e]), rt = A(a->r[r_at(s, t, h) + e]);
            dq[q_at(s, i, c, h) + e] += ds * (kj + rt);
            du[h * dh + e] += ds * kj;
            dvb[h * dh + e] += ds * rt;
            dkv[k_at(s, j, c, h) + e] += ds * (absolute ? fabs(qi[e]) + fabs(a->u[h * dh + e]) : qi[e] + a->u[h * dh + e]);
            dr[r_at(s, t, h) + e] += ds * (absolute ? fabs(qi[e]) + fabs(a->vb[h * dh + e]) : qi[e] + a->vb[h * dh + e]);
          }
        }
      }
#undef A
  free(dp);
}
