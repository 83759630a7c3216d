/* The deadline of dist/'s collectives (dist/wait.h) and how a job whose collective some rank
 * does not reach comes to an end.
 *
 * Why polling: a blocking MPI call cannot be given up, so a rank that stops (SIGSTOP, a dead
 * node) left the others in MPI_Allreduce at 100% CPU for ever. Each collective is started
 * non-blocking and tested; past the deadline the rank sends a notice ("waiting in collective #k
 * for t seconds") to every other rank on a communicator of its own. A rank that is itself waiting
 * in a collective sees the notice between two tests and answers with its own; a rank that is
 * stopped, dead or computing does not. After GRACE_S the lowest rank that answered prints the one
 * line naming the ranks that did not (and those waiting in another collective: the numbers tell
 * them apart), tells the others it has, and exits with status 1 without MPI_Finalize, which would
 * wait for the missing ranks; the others exit with status 1 when told, and mpirun kills the rest
 * (a stopped process included). */
#include "dist/wait.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dist/mpi_check.h"
#include "src/base/error.h"
#include "src/base/timer.h"

/* A wait polls without pause (as a blocking call would) until SPIN_S pass with no request
 * completing; only then does it nap. The collectives of a step complete well within that (the
 * ranks reach them together), and so does a bucket of the gradient unless the network moves
 * less than 32 MB/s (8 MiB buckets): MPI advances a non-blocking collective only inside MPI
 * calls, so a transfer that napped would slow down. A rank that waits for minutes for another
 * thus keeps a core busy for a quarter of a second, not for minutes. */
#define SPIN_S 0.25
/* Naps double from NAP_MIN_S to NAP_MAX_S: a rank that waits for minutes (rank 0 writing a long
 * sample) wakes 500 times a second, next to no CPU, and a collective whose last rank arrives
 * during a nap goes on at most 2 ms late per round of its algorithm. */
#define NAP_MIN_S 20e-6
#define NAP_MAX_S 2e-3
/* A wait looks for notices from other ranks once it has lasted this long (the collectives of a
 * step mostly take less, and then pay nothing for it). */
#define NOTICE_AFTER_S 1e-3
/* How long a rank that knows of a passed deadline collects answers. A rank waiting in a
 * collective answers within one nap (2 ms); one silent for a second is not waiting in one. */
#define GRACE_S 1.0
/* How long a rank that does not print waits for the one that does (normally mpirun ends it
 * within a second or two of that rank's exit) before it prints the line itself. */
#define VERDICT_WAIT_S 5.0
/* Ranks named one by one in the line; more are counted. */
#define MAX_LISTED 16

enum { NOTICE_TAG = 1 };
enum { NOTICE_WAITING = 1, NOTICE_END = 2 };

/* What one rank tells the others. */
typedef struct {
  int64_t seq;      /* the collective it waits in: its number in the count every rank keeps */
  double timeout_s; /* its dist.timeout_s */
  int32_t kind;     /* NOTICE_WAITING, NOTICE_END; 0 in a table: no answer */
  int32_t step;     /* the training step under way there (txl_dist_set_step); -1: none */
  int32_t device;   /* 1: it waits for its GPU (txl_dist_wait_device), after collective #seq */
  char what[48];    /* the collective, or what the GPU is waited for, in words */
} Notice;

static struct {
  MPI_Comm comm;    /* notices only: a duplicate of the world, so no collective matches them */
  int rank, world;
  double timeout_s; /* 0: no deadline */
  int64_t seq;      /* collectives waited for so far */
  int step;
  int device;       /* 1 inside txl_dist_wait_device */
  void (*progress)(void); /* txl_dist_wait_set_progress's */
} g = {MPI_COMM_NULL, 0, 1, 0.0, 0, -1, 0, NULL};

void txl_dist_wait_init(int rank, int world) {
  g.rank = rank;
  g.world = world;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm));
}

double txl_dist_wait_set_timeout(double seconds) {
  const double was = g.timeout_s;
  g.timeout_s = seconds > 0.0 ? seconds : 0.0;
  return was;
}

void txl_dist_wait_set_step(int step) { g.step = step; }

void txl_dist_wait_set_progress(void (*fn)(void)) { g.progress = fn; }

static void nap(double seconds) {
  struct timespec ts = {0, (long)(seconds * 1e9)};
  nanosleep(&ts, NULL);
}

static Notice make_notice(int kind, const char *what, double timeout_s) {
  Notice n;
  memset(&n, 0, sizeof n);
  n.seq = g.seq;
  n.timeout_s = timeout_s;
  n.kind = kind;
  n.step = g.step;
  n.device = g.device;
  snprintf(n.what, sizeof n.what, "%s", what);
  return n;
}

/* Sends *n (which must stay in place) to every other rank. A rank that is gone may never take
 * it: the request is kept in req[r] and only the answering ranks' are completed (flush_sends). */
static void send_all(const Notice *n, MPI_Request *req) {
  for (int r = 0; r < g.world; r++) {
    req[r] = MPI_REQUEST_NULL;
    if (r != g.rank && MPI_Isend(n, (int)sizeof *n, MPI_BYTE, r, NOTICE_TAG, g.comm, &req[r]) != MPI_SUCCESS)
      req[r] = MPI_REQUEST_NULL; /* a lost connection: that rank is gone */
  }
}

/* A notice from another rank, if one has arrived: 1 with *from and *n, else 0. */
static int next_notice(int *from, Notice *n) {
  int flag = 0;
  MPI_Status st;
  MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, g.comm, &flag, &st));
  if (!flag) return 0;
  MPI_CHECK(MPI_Recv(n, (int)sizeof *n, MPI_BYTE, st.MPI_SOURCE, NOTICE_TAG, g.comm, MPI_STATUS_IGNORE));
  *from = st.MPI_SOURCE;
  return 1;
}

/* Takes the notices that arrived into heard[] (by sender); a rank that printed the line ends
 * this one without another. */
static void collect(Notice *heard) {
  int from;
  Notice n;
  while (next_notice(&from, &n)) {
    if (n.kind == NOTICE_END) txl_exit_unfinalized();
    heard[from] = n;
  }
}

/* "1", "1, 3" or "1, 3, ... and 5 more" for the ranks r with pick(heard[r]). */
static int list_ranks(const Notice *heard, int (*pick)(const Notice *, const Notice *), char *out, size_t len) {
  int n = 0;
  size_t used = 0;
  out[0] = 0;
  for (int r = 0; r < g.world; r++) {
    if (!pick(&heard[r], &heard[g.rank])) continue;
    if (n < MAX_LISTED && used < len)
      used += (size_t)snprintf(out + used, len - used, "%s%d", n ? ", " : "", r);
    n++;
  }
  if (n > MAX_LISTED && used < len) snprintf(out + used, len - used, " and %d more", n - MAX_LISTED);
  return n;
}

static int silent(const Notice *n, const Notice *mine) { (void)mine; return n->kind == 0; }
static int elsewhere(const Notice *n, const Notice *mine) {
  return n->kind != 0 && (n->seq != mine->seq || n->device != mine->device);
}

/* Where a rank waits, after "waiting in" / "waiting for" (see describe): "collective #7 (a sum
 * across ranks, step 3)", or "its GPU (a read to the host, step 3, after collective #6)". */
static void place(const Notice *n, char *out, size_t len) {
  char step[32] = "";
  if (n->step >= 0) snprintf(step, sizeof step, ", step %d", n->step);
  if (n->device)
    snprintf(out, len, "its GPU (%s%s, after collective #%lld)", n->what, step, (long long)n->seq);
  else
    snprintf(out, len, "collective #%lld (%s%s)", (long long)n->seq, n->what, step);
}

/* The one line: the ranks that did not answer, then those waiting elsewhere. A rank that waits
 * for its GPU waits for NCCL's collectives (the only GPU work that needs other ranks): a rank that
 * does not answer then is the one they wait for. */
static void describe(const Notice *heard, double timeout_s, char *out, size_t len) {
  const Notice *me = &heard[g.rank];
  char where[200], gone[200], other[200];
  place(me, where, sizeof where);
  const int n_gone = list_ranks(heard, silent, gone, sizeof gone);
  const int n_other = list_ranks(heard, elsewhere, other, sizeof other);
  size_t used = 0;
  if (n_gone && me->device)
    used = (size_t)snprintf(out, len, "rank%s %s did not answer within dist.timeout_s = %g s while rank %d waited for "
                            "%s, whose NCCL collectives need every rank (no answer: stopped, dead or still computing)",
                            n_gone > 1 ? "s" : "", gone, timeout_s, g.rank, where);
  else if (n_gone)
    used = (size_t)snprintf(out, len, "rank%s %s did not reach %s within dist.timeout_s = %g s (no answer: "
                            "stopped, dead or still computing)", n_gone > 1 ? "s" : "", gone, where, timeout_s);
  if (n_other && used < len) {
    /* one rank's place is named: with several, the first */
    const Notice *o = NULL;
    for (int r = 0; r < g.world && !o; r++)
      if (elsewhere(&heard[r], me)) o = &heard[r];
    char there[200];
    place(o, there, sizeof there);
    used += (size_t)snprintf(out + used, len - used, "%srank%s %s %s waiting %s %s instead of %s",
                             n_gone ? "; " : "", n_other > 1 ? "s" : "", other, n_other > 1 ? "are" : "is",
                             o->device ? "for" : "in", there, where);
  }
  if (!n_gone && !n_other)
    snprintf(out, len, "every rank %s %s, but it did not complete within dist.timeout_s = %g s",
             me->device ? "waited for" : "reached", where, timeout_s);
}

/* This rank knows of a passed deadline: its own, or (from >= 0) the one `first` came with from
 * rank `from`. Collects the answers, and the lowest rank that answered prints the line. */
__attribute__((noreturn)) static void end_job(const char *what, int from, const Notice *first) {
  Notice *heard = txl_calloc((size_t)g.world, sizeof *heard, "collective timeout answers");
  MPI_Request *req = txl_calloc((size_t)g.world, sizeof *req, "collective timeout notices");
  const double timeout_s = first ? first->timeout_s : g.timeout_s;
  static Notice waiting, end; /* in place until the sends complete */
  waiting = make_notice(NOTICE_WAITING, what, timeout_s);
  heard[g.rank] = waiting;
  if (first) heard[from] = *first;
  send_all(&waiting, req);
  for (double until = txl_now_s() + GRACE_S; txl_now_s() < until; nap(NAP_MAX_S)) collect(heard);
  int lowest = 0;
  while (heard[lowest].kind == 0) lowest++; /* heard[g.rank] is set */
  if (lowest != g.rank) /* that rank prints and says so (collect exits then) */
    for (double until = txl_now_s() + VERDICT_WAIT_S; txl_now_s() < until; nap(NAP_MAX_S)) collect(heard);
  char msg[1024];
  describe(heard, timeout_s, msg, sizeof msg);
  txl_error_print("%s", msg);
  /* only now may the others exit: mpirun ends the job at the first exit */
  end = make_notice(NOTICE_END, what, timeout_s);
  send_all(&end, req);
  for (double until = txl_now_s() + GRACE_S; txl_now_s() < until; nap(NAP_MAX_S)) {
    int pending = 0;
    for (int r = 0; r < g.world; r++) {
      int done = 1;
      if (heard[r].kind && req[r] != MPI_REQUEST_NULL && MPI_Test(&req[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        done = 1; /* gone after all */
      pending += !done;
    }
    if (!pending) break;
  }
  txl_exit_unfinalized();
}

/* Between two tests of a long wait: another rank's deadline passed, or the job already ends. */
static void check_notices(const char *what) {
  int from;
  Notice n;
  if (!next_notice(&from, &n)) return;
  if (n.kind == NOTICE_END) txl_exit_unfinalized();
  end_job(what, from, &n);
}

/* One wait's test (wait_for): 1 once what it waits for is complete; *moved = 1 when part of it
 * completed since the last test (every rank takes part then). */
typedef int (*Poll)(void *ctx, int *moved);

/* Polls until done, first without pause, then with naps, answering other ranks' notices, and ends
 * the job once nothing moved for dist.timeout_s. */
static void wait_for(Poll poll, void *ctx, const char *what) {
  int moved = 0;
  if (poll(ctx, &moved)) return;
  /* Both clocks restart whenever part of the wait completes: a long transfer (many buckets on a
   * slow network) neither naps nor counts as a missing rank. */
  double since = txl_now_s(), sleep_s = NAP_MIN_S;
  for (;;) {
    moved = 0;
    if (g.progress) g.progress();
    if (poll(ctx, &moved)) return;
    if (moved) {
      since = txl_now_s();
      sleep_s = NAP_MIN_S;
      continue;
    }
    const double waited = txl_now_s() - since;
    if (waited >= NOTICE_AFTER_S) check_notices(what);
    if (waited < SPIN_S) continue;
    if (g.timeout_s > 0.0 && waited >= g.timeout_s) end_job(what, -1, NULL);
    nap(sleep_s);
    sleep_s = 2.0 * sleep_s < NAP_MAX_S ? 2.0 * sleep_s : NAP_MAX_S;
  }
}

/* The requests of one collective, completed in order. */
typedef struct {
  int n, first;
  MPI_Request *req;
} Requests;

/* Completes req[first], req[first + 1], ... while they are done (one MPI_Test each: every test
 * also advances all the others). */
static int poll_requests(void *ctx, int *moved) {
  Requests *r = (Requests *)ctx;
  const int was = r->first;
  while (r->first < r->n) {
    int done = 0;
    MPI_CHECK(MPI_Test(&r->req[r->first], &done, MPI_STATUS_IGNORE));
    if (!done) break;
    r->first++;
  }
  *moved = r->first > was;
  return r->first == r->n;
}

void txl_dist_wait(int n, MPI_Request *req, const char *what) {
  g.seq++;
  Requests r = {n, 0, req};
  wait_for(poll_requests, &r, what);
}

typedef struct {
  int (*ready)(void *ctx);
  void *ctx;
} Device;

static int poll_device(void *ctx, int *moved) {
  const Device *d = (const Device *)ctx;
  *moved = 0; /* the GPU's work says nothing of its progress */
  return d->ready(d->ctx);
}

void txl_dist_wait_device(int (*ready)(void *ctx), void *ctx, const char *what) {
  Device d = {ready, ctx};
  g.device = 1;
  wait_for(poll_device, &d, what);
  g.device = 0;
}
