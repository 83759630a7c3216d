/* The adaptive softmax's tail buffers sized by the data (TxlRunShape.tail, src/model/model.c),
 * through the model API on the CPU backend:
 *   - a run whose tail counts are the most each cluster gets in any of its segments trains with
 *     the numbers of a run sized for the worst case, bit for bit (losses, gradient norms, every
 *     gradient, the parameters after Adam);
 *   - its tail logits take sum_i n_i x ld(size of cluster i) activations (the rows padded as
 *     txl_model_ld pads them), the worst case L x B x the widest cluster's ld (the sizing of
 *     before), and txl_run_bytes differs by exactly that and the grouping's slots of the tails;
 *   - a run that never sees targets (generation) holds one row of the widest cluster, and its
 *     log-probabilities are the worst-case run's, bit for bit;
 *   - a segment holding one target more of a cluster than its run was sized for ends the job
 *     with one line naming the cluster and both counts (exit status 1, in a child process run
 *     before any OpenMP region of this one, so that it forks no thread pool).
 * Model: 301 tokens in clusters of 101, 102 and 98 (div_val 2, untied projections), rows padded to
 * 8 (the CUDA backend's layout) and packed. */
#define _POSIX_C_SOURCE 200809L /* fork, dup2, pipe */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/ops.h"
#include "src/model/model.h"
#include "src/optim/adam.h"
#include "tests/lib/test_util.h"

enum { L = 6, B = 4, STEPS = 4 };

static TxlModelSpec spec_of(int row_align) {
  TxlModelSpec s;
  memset(&s, 0, sizeof s);
  TxlDims *m = &s.dims;
  m->n_token = 301;
  m->n_layer = 2;
  m->d_model = 46;
  m->n_head = 3;
  m->d_head = 13;
  m->d_inner = 70;
  m->tie_weight = 1;
  m->n_clusters = 2;
  m->cut[1] = 101;
  m->cut[2] = 203;
  m->cut[3] = 301;
  m->div_val = 2;
  m->d_embed = 38;
  m->tie_projs = 0;
  s.dropout = 0.1f;
  s.dropatt = 0.1f;
  s.seed = 5;
  s.ln_eps = TXL_LAYER_NORM_EPS;
  s.row_align = row_align;
  return s;
}

/* [STEPS][(L + 1) B] tokens: inputs rows 0..L-1, targets rows 1..L; three in four from cluster 0,
 * the rest split between the tails, so the tail counts differ from segment to segment */
static void draw_tokens(int32_t *tok) {
  OtRng rng = ot_rng(31);
  for (int i = 0; i < STEPS * (L + 1) * B; i++) {
    const int u = ot_randint(&rng, 8);
    tok[i] = u < 6 ? ot_randint(&rng, 101) : u == 6 ? 101 + ot_randint(&rng, 102) : 203 + ot_randint(&rng, 98);
  }
}

/* The most targets of each tail cluster in any of the segments, and the segment holding the
 * most of cluster `which` (*at). */
static TxlTailCap most_of(const int32_t *tok, int which, int *at) {
  TxlTailCap cap = TXL_TAIL_NOT_COUNTED;
  cap.known = 1;
  for (int s = 0; s < STEPS; s++) {
    int n[3] = {0, 0, 0};
    for (int i = B; i < (L + 1) * B; i++) {
      const int32_t t = tok[s * (L + 1) * B + i];
      n[t >= 203 ? 2 : t >= 101 ? 1 : 0]++;
    }
    for (int c = 1; c <= 2; c++) {
      if (c == which && n[c] > cap.n[c]) *at = s;
      cap.n[c] = n[c] > cap.n[c] ? n[c] : cap.n[c];
    }
  }
  return cap;
}

/* A run sized one target of `which` short of segment `at`'s count, forward over that segment: it
 * must end the job (child process, stderr into `fd`). */
static void overflow_child(const int32_t *tok, int which, int at, int fd) {
  dup2(fd, 2);
  const TxlOps *ops = txl_ops_cpu();
  const TxlModelSpec spec = spec_of(8);
  TxlModel m;
  txl_model_create(&m, ops, &spec);
  txl_model_init_params(&m, 0.02f, 0.01f, 1234u);
  int ignore;
  TxlRunShape rs = {L, B, 0, 4, -1, 0, 1, 1, TXL_TAIL_NOT_COUNTED};
  rs.tail = most_of(tok, which, &ignore);
  rs.tail.n[which]--;
  TxlRun r;
  txl_run_create(&r, &m, &rs);
  const int32_t *seg = tok + at * (L + 1) * B;
  txl_model_forward(&m, &r, seg, seg + B, L, 0, 1, 1.0f / (float)(L * B));
}

static void test_overflow(const int32_t *tok) {
  for (int which = 1; which <= 2; which++) {
    int at = 0;
    const TxlTailCap cap = most_of(tok, which, &at);
    int fds[2];
    if (pipe(fds) != 0) {
      check_fail("pipe");
      return;
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      overflow_child(tok, which, at, fds[1]);
      _exit(0); /* returned: no error */
    }
    close(fds[1]);
    char err[2048];
    size_t n = 0;
    ssize_t got;
    while (n + 1 < sizeof err && (got = read(fds[0], err + n, sizeof err - 1 - n)) > 0) n += (size_t)got;
    err[n] = 0;
    close(fds[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    char want[256], what[128];
    snprintf(want, sizeof want,
             "txl: error: output layer: this segment (%d targets) holds %d targets of tail cluster %d (ids %d to %d), "
             "more than the %d the run's tail buffers were sized for",
             L * B, cap.n[which], which, which == 1 ? 101 : 203, which == 1 ? 202 : 300, cap.n[which] - 1);
    const char *nl = strchr(err, '\n');
    snprintf(what, sizeof what, "tail cluster %d one target short: one line, exit status 1", which);
    ot_check_true(what, pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(err, want) == err &&
                            nl && nl[1] == 0,
                  "exit %d, stderr: %s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, err);
  }
}

/* Elements an activation row of f features takes (txl_model_ld). */
static int64_t ld_of(int row_align, int f) { return (f + row_align - 1) / row_align * row_align; }

static void test_training(const int32_t *tok, int row_align) {
  const TxlOps *ops = txl_ops_cpu();
  const TxlModelSpec spec = spec_of(row_align);
  int ignore;
  const TxlTailCap cap = most_of(tok, 1, &ignore);
  TxlModel mw, mc; /* worst case, counted */
  txl_model_create(&mw, ops, &spec);
  txl_model_create(&mc, ops, &spec);
  txl_model_init_params(&mw, 0.02f, 0.01f, 1234u);
  txl_model_init_params(&mc, 0.02f, 0.01f, 1234u);
  const TxlRunShape ws = {L, B, 0, 4, -1, 0, 1, 1, TXL_TAIL_NOT_COUNTED};
  TxlRunShape cs = ws;
  cs.tail = cap;
  char what[200];

  const int64_t A = (int64_t)txl_dtype_size(ops->act);
  const int64_t ld1 = ld_of(row_align, 102), ld2 = ld_of(row_align, 98), widest = ld1 > ld2 ? ld1 : ld2;
  const int64_t want_c = A * (cap.n[1] * ld1 + cap.n[2] * ld2), want_w = A * L * B * widest;
  const int64_t got_c = (int64_t)txl_run_tail_bytes(&mc, &cs), got_w = (int64_t)txl_run_tail_bytes(&mw, &ws);
  snprintf(what, sizeof what, "rows of %d: tail logits of %d + %d targets: %lld bytes; the worst case %lld",
           row_align, cap.n[1], cap.n[2], (long long)got_c, (long long)got_w);
  ot_check_true(what, got_c == want_c && got_w == want_w && cap.n[1] + cap.n[2] < L * B, "want %lld and %lld",
                (long long)want_c, (long long)want_w);
  /* and the tail clusters' slots of the grouping (rows and ids, int32 each): every target's in
   * each cluster in the worst case */
  const int64_t slots = 2 * (int64_t)sizeof(int32_t) * (2 * L * B - cap.n[1] - cap.n[2]);
  const int64_t diff = (int64_t)txl_run_bytes(&mw, &ws) - (int64_t)txl_run_bytes(&mc, &cs);
  snprintf(what, sizeof what, "rows of %d: txl_run_bytes smaller by the tail's and the slots' difference", row_align);
  ot_check_true(what, diff == got_w - got_c + slots, "%lld, want %lld", (long long)diff,
                (long long)(got_w - got_c + slots));

  TxlRun rw, rc;
  txl_run_create(&rw, &mw, &ws);
  txl_run_create(&rc, &mc, &cs);
  TxlAdam aw, ac;
  txl_adam_create(&aw, ops, mw.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
  txl_adam_create(&ac, ops, mc.table.total, 0.9f, 0.999f, 1e-8f, 0.25f);
  TxlModel *ms[2] = {&mw, &mc};
  TxlRun *rs[2] = {&rw, &rc};
  TxlAdam *ad[2] = {&aw, &ac};
  const size_t bytes = (size_t)mw.table.total * sizeof(float);
  float *g[2] = {ot_alloc(mw.table.total), ot_alloc(mw.table.total)};
  for (int s = 0; s < STEPS; s++) {
    const int32_t *seg = tok + s * (L + 1) * B;
    double loss[2], norm[2];
    for (int k = 0; k < 2; k++) {
      ops->zero(ms[k]->grad_buf, bytes);
      loss[k] = txl_model_forward(ms[k], rs[k], seg, seg + B, L, s, 1, 1.0f / (float)(L * B));
      txl_model_backward(ms[k], rs[k], NULL, NULL);
      norm[k] = txl_grad_norm(ops, ms[k]->grad_buf, &ms[k]->table);
      ops->to_host(g[k], ms[k]->grad_buf, bytes);
    }
    snprintf(what, sizeof what, "rows of %d, step %d: loss %.6f and gradient norm the same bits", row_align, s,
             loss[0]);
    ot_check_true(what, memcmp(loss, loss + 1, sizeof loss[0]) == 0 && memcmp(norm, norm + 1, sizeof norm[0]) == 0,
                  "loss %.17g / %.17g, norm %.17g / %.17g", loss[0], loss[1], norm[0], norm[1]);
    snprintf(what, sizeof what, "rows of %d, step %d: gradients", row_align, s);
    ot_check_same(what, g[1], g[0], bytes);
    for (int k = 0; k < 2; k++) {
      txl_adam_step(ad[k], ms[k]->param_buf, ms[k]->grad_buf, norm[k], 1.0, 1e-3f);
      txl_model_params_changed(ms[k]);
    }
  }
  for (int k = 0; k < 2; k++) ops->to_host(g[k], ms[k]->param_buf, bytes);
  snprintf(what, sizeof what, "rows of %d: parameters after %d steps", row_align, STEPS);
  ot_check_same(what, g[1], g[0], bytes);

  /* generation: no targets, log-probabilities of every row */
  const TxlRunShape gw = {L, B, 0, 4, -1, 0, 0, 1, TXL_TAIL_NOT_COUNTED};
  TxlRunShape gc = gw;
  const TxlTailCap none = TXL_TAIL_NO_TARGETS;
  gc.tail = none;
  snprintf(what, sizeof what, "rows of %d: a run without targets holds one row of the widest cluster", row_align);
  ot_check_true(what, (int64_t)txl_run_tail_bytes(&mc, &gc) == A * widest, "%lld bytes",
                (long long)txl_run_tail_bytes(&mc, &gc));
  TxlRun iw, ic;
  txl_run_create(&iw, &mw, &gw);
  txl_run_create(&ic, &mc, &gc);
  const int V = spec.dims.n_token;
  float *lw = ot_alloc(V), *lc = ot_alloc(V);
  int same = 1;
  for (int s = 0; s < 2; s++) {
    const int32_t *seg = tok + s * (L + 1) * B;
    txl_model_forward(&mw, &iw, seg, NULL, L, 0, 0, 0.0f);
    txl_model_forward(&mc, &ic, seg, NULL, L, 0, 0, 0.0f);
    for (int row = 0; row < L * B; row++) {
      txl_model_logprobs(&mw, &iw, row, lw);
      txl_model_logprobs(&mc, &ic, row, lc);
      same &= memcmp(lw, lc, (size_t)V * sizeof(float)) == 0;
    }
  }
  snprintf(what, sizeof what, "rows of %d: log-probabilities of 2 segments the same bits", row_align);
  ot_check_true(what, same, NULL);
  free(lw);
  free(lc);
  free(g[0]);
  free(g[1]);
  txl_run_destroy(&iw, &mw);
  txl_run_destroy(&ic, &mc);
  txl_adam_destroy(&aw);
  txl_adam_destroy(&ac);
  txl_run_destroy(&rw, &mw);
  txl_run_destroy(&rc, &mc);
  txl_model_destroy(&mw);
  txl_model_destroy(&mc);
}

int main(void) {
  static int32_t tok[STEPS * (L + 1) * B];
  draw_tokens(tok);
  test_overflow(tok); /* first: before any OpenMP region of this process */
  test_training(tok, 8);
  test_training(tok, 1);
  return ot_finish("test_tail_cap");
}
