/* The deadline of dist/'s collectives (dist/wait.h), one case per run; tests/dist/test_timeout.sh
 * runs each under mpirun and checks the exit status, the one "txl: error:" line and the time.
 *
 *   test_timeout absent R KIND   rank R never reaches the KIND collective (sum, max, equal,
 *                                barrier, reducer, agree: txl_fatal_if_any's agreement; device:
 *                                a wait for the GPU, txl_dist_wait_device, whose work is a sum
 *                                across ranks as NCCL's is) and sleeps instead: the others must
 *                                end the job 1 s after they reached it, naming rank R
 *   test_timeout elsewhere R [device]  rank R waits in another collective (one more than the
 *                                others have counted; device: for its GPU, which never
 *                                completes): the line must say so
 *   test_timeout late            every collective under a 1 s deadline, one rank 0.6 s late to
 *                                each: all complete with the right values; exit 0
 *   test_timeout suspended       a 0.5 s deadline suspended (txl_dist_set_timeout(0)) while
 *                                rank 0 is 2 s late to a barrier, then restored; exit 0
 *   test_timeout idle            rank 0 waits 4 s in a sum for the others: it may use 0.5 s of
 *                                CPU (0.25 s of polling, then naps that cost next to nothing; a
 *                                blocking MPI call polls all along: 0.89 s in 2 s on a 2-core
 *                                node shared with 8 other busy processes)
 *   test_timeout fails R         rank R fails in txl_fatal_if_any under a deadline: its line only,
 *                                status 1 everywhere (the agreement goes through dist/ now) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "dist/dist.h"
#include "dist/reduce.h"
#include "dist/wait.h"
#include "src/base/timer.h"

static TxlDist g_d;
/* The emulated GPUs' collectives (as NCCL's communicator): a duplicate of the world, made by
 * main on every rank, not counted by dist/wait.c. */
static MPI_Comm g_gpu_comm = MPI_COMM_NULL;

/* ready() of a wait for the GPU: its work is the request's collective (as cudaEventQuery). */
static int request_done(void *ctx) {
  int done = 0;
  MPI_CHECK(MPI_Test((MPI_Request *)ctx, &done, MPI_STATUS_IGNORE));
  return done;
}

static int never_done(void *ctx) {
  (void)ctx;
  return 0;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One collective of the given kind, on every rank that calls it. Returns the number of wrong
 * results seen on this rank. */
static int collective(const char *kind) {
  const int P = g_d.world, r = g_d.rank;
  if (!strcmp(kind, "sum")) {
    double x[2] = {r + 1.0, 1.0};
    txl_dist_allreduce_sum_f64(x, 2);
    return x[0] != P * (P + 1) / 2.0 || x[1] != P;
  }
  if (!strcmp(kind, "max")) {
    int i = r;
    double f = -r;
    txl_dist_allreduce_max_i32(&i, 1);
    txl_dist_allreduce_max_f64(&f, 1);
    return i != P - 1 || f != 0.0;
  }
  if (!strcmp(kind, "equal")) {
    int same = txl_dist_all_equal_u64(42u);
    int differ = txl_dist_all_equal_u64(r == P - 1 ? 7u : 42u);
    return !same || (P > 1 && differ);
  }
  if (!strcmp(kind, "barrier")) {
    txl_dist_barrier();
    return 0;
  }
  if (!strcmp(kind, "reducer")) {
    float buf[100];
    for (int i = 0; i < 100; i++) buf[i] = (float)(r + i);
    TxlReducer *red = txl_reducer_create(buf, 100, 30, 1);
    txl_reducer_ready(red, 50, 100);
    txl_reducer_ready(red, 0, 50);
    txl_reducer_finish(red);
    txl_reducer_destroy(red);
    int bad = 0;
    for (int i = 0; i < 100; i++) bad |= buf[i] != (float)(P * (P - 1) / 2 + P * i);
    return bad;
  }
  if (!strcmp(kind, "device")) {
    int x = r + 1, y = 0;
    MPI_Request req;
    MPI_CHECK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, g_gpu_comm, &req));
    txl_dist_wait_device(request_done, &req, "a read to the host");
    return y != P * (P + 1) / 2;
  }
  if (!strcmp(kind, "agree")) {
    txl_fatal_if_any(0, "no rank fails here");
    return 0;
  }
  txl_fatal("test_timeout: unknown collective '%s'", kind);
}

/* Rank `who` is absent (asleep, not in MPI) while the others call the collective. */
static int absent(int who, const char *kind) {
  txl_dist_set_timeout(1.0);
  if (g_d.rank == who) {
    sleep_s(120.0); /* mpirun ends this rank when the others exit */
    return 1;
  }
  collective(kind);
  fprintf(stderr, "rank %d: the %s returned without rank %d\n", g_d.rank, kind, who);
  return 1;
}

/* Rank `who` waits in a collective of its own (a receive nobody sends), one further in the
 * count, or (device) for its GPU, which never completes, while the others wait in a sum. */
static int elsewhere(int who, int device) {
  txl_dist_set_timeout(1.0);
  if (g_d.rank == who && device) {
    txl_dist_wait_device(never_done, NULL, "work that never completes");
  } else if (g_d.rank == who) {
    int x = 0, y = 0;
    MPI_Request req[2];
    MPI_CHECK(MPI_Irecv(&y, 1, MPI_INT, who, 5, MPI_COMM_WORLD, &req[0]));
    MPI_CHECK(MPI_Isend(&x, 1, MPI_INT, who, 5, MPI_COMM_WORLD, &req[1]));
    txl_dist_wait(2, req, "an exchange with itself");
    MPI_CHECK(MPI_Irecv(&y, 1, MPI_INT, who, 6, MPI_COMM_WORLD, &req[0]));
    txl_dist_wait(1, req, "a receive nobody sends");
  } else {
    collective("sum");
  }
  fprintf(stderr, "rank %d: returned from a collective that cannot complete\n", g_d.rank);
  return 1;
}

static const char *const KINDS[] = {"sum", "max", "equal", "barrier", "reducer", "device", "agree"};
#define N_KINDS (int)(sizeof KINDS / sizeof KINDS[0])

/* Each collective with one rank (a different one each time) 0.6 s late under a 1 s deadline. */
static int late(void) {
  txl_dist_set_timeout(1.0);
  int bad = 0;
  for (int k = 0; k < N_KINDS; k++) {
    if (g_d.rank == k % g_d.world) sleep_s(0.6);
    if (collective(KINDS[k])) {
      fprintf(stderr, "rank %d: wrong result of the %s\n", g_d.rank, KINDS[k]);
      bad++;
    }
  }
  return bad;
}

static int suspended(void) {
  txl_dist_set_timeout(0.5);
  const double was = txl_dist_set_timeout(0.0);
  if (g_d.rank == 0) sleep_s(2.0);
  txl_dist_barrier();
  txl_dist_set_timeout(was);
  int bad = collective("sum");
  if (was != 0.5) {
    fprintf(stderr, "rank %d: txl_dist_set_timeout returned %g, expected 0.5\n", g_d.rank, was);
    bad++;
  }
  return bad;
}

static int idle(void) {
  txl_dist_set_timeout(30.0);
  if (g_d.rank != 0) sleep_s(4.0);
  const double w0 = txl_now_s(), c0 = cpu_s();
  int bad = collective("sum");
  const double wall = txl_now_s() - w0, cpu = cpu_s() - c0;
  if (g_d.rank == 0) {
    printf("idle: waited %.2f s in a sum, %.3f s on the CPU\n", wall, cpu);
    if (wall < 3.5 || cpu > 0.5) {
      fprintf(stderr, "rank 0: %.3f s of CPU in a wait of %.2f s (at most 0.5 s expected)\n", cpu, wall);
      bad++;
    }
  }
  return bad;
}

static int fails(int who) {
  txl_dist_set_timeout(1.0);
  txl_fatal_if_any(g_d.rank == who, "rank %d failed on purpose", who);
  fprintf(stderr, "rank %d: txl_fatal_if_any returned\n", g_d.rank);
  return 1;
}

static int rank_arg(int argc, char **argv) {
  int who = argc > 2 ? atoi(argv[2]) : -1;
  if (who < 0 || who >= g_d.world) txl_fatal_all("test_timeout: rank %d is not in [0, %d)", who, g_d.world);
  return who;
}

int main(int argc, char **argv) {
  txl_dist_init(&g_d, &argc, &argv);
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g_gpu_comm));
  const char *mode = argc > 1 ? argv[1] : "";
  int bad;
  if (!strcmp(mode, "absent") && argc == 4) bad = absent(rank_arg(argc, argv), argv[3]);
  else if (!strcmp(mode, "elsewhere") && (argc == 3 || (argc == 4 && !strcmp(argv[3], "device"))))
    bad = elsewhere(rank_arg(argc, argv), argc == 4);
  else if (!strcmp(mode, "late")) bad = late();
  else if (!strcmp(mode, "suspended")) bad = suspended();
  else if (!strcmp(mode, "idle")) bad = idle();
  else if (!strcmp(mode, "fails") && argc == 3) bad = fails(rank_arg(argc, argv));
  else txl_fatal_all("usage: test_timeout absent R KIND | elsewhere R [device] | late | suspended | idle | fails R");
  txl_dist_allreduce_max_i32(&bad, 1);
  if (g_d.rank == 0) printf("%s: %s\n", mode, bad ? "FAIL" : "PASS");
  txl_dist_finalize();
  return bad ? 1 : 0;
}
