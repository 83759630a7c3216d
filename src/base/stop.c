/* Stop requests by signal (stop.h). The handler uses only async-signal-safe calls: write(2),
 * sigaction, raise, _exit. */
#include "src/base/stop.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGUSR1};
enum { N_STOP_SIGNALS = sizeof STOP_SIGNALS / sizeof STOP_SIGNALS[0] };

static volatile sig_atomic_t g_signal = 0;    /* the first request's signal */
static volatile sig_atomic_t g_rank = -1;     /* -1: not known yet, every process prints */
static volatile sig_atomic_t g_exit_mode = 0; /* txl_stop_exit_on_request was called */
static char g_saved_line[600];                /* what a request then prints */

/* The name of a stop signal, NULL for any other (async-signal-safe: the handler calls it). */
static const char *stop_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : NULL;
}

const char *txl_stop_signal_name(int sig) {
  static char other[32];
  if (stop_name(sig)) return stop_name(sig);
  snprintf(other, sizeof other, "signal %d", sig);
  return other;
}

static void say(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w, n -= (size_t)w;
  }
}

static void set_action(int sig, void (*handler)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < N_STOP_SIGNALS; i++) sigaddset(&sa.sa_mask, STOP_SIGNALS[i]);
  sa.sa_flags = SA_RESTART; /* a file write or MPI wait interrupted by the request goes on */
  sigaction(sig, &sa, NULL);
}

static void on_stop_signal(int sig) {
  const int saved_errno = errno;
  const int speak = g_rank <= 0;
  if (g_exit_mode) {
    if (speak) say(g_saved_line);
    _exit(TXL_STOP_EXIT);
  }
  if (g_signal && sig == SIGINT) { /* the second Ctrl-C */
    if (speak) say("txl: Ctrl-C again: aborting now; the previous checkpoint and `latest` are intact\n");
    set_action(SIGINT, SIG_DFL);
    raise(SIGINT); /* blocked in this handler: delivered, with the default action, as it returns */
  } else if (!g_signal) {
    g_signal = sig;
    if (speak) {
      say("txl: ");
      say(stop_name(sig));
      say(" received: stopping after this step with a checkpoint, then exit status 75");
      say(sig == SIGINT ? " (Ctrl-C again aborts at once)\n" : "\n");
    }
  }
  errno = saved_errno;
}

void txl_stop_install(void) {
  for (int i = 0; i < N_STOP_SIGNALS; i++) set_action(STOP_SIGNALS[i], on_stop_signal);
}

void txl_stop_set_rank(int rank) { g_rank = rank; }

int txl_stop_requested(void) { return g_signal; }

void txl_stop_exit_on_request(const char *saved) {
  snprintf(g_saved_line, sizeof g_saved_line, "txl: %s\n", saved);
  g_exit_mode = 1; /* after the line is complete: a handler reads it only from now on */
  if (g_signal) {
    fflush(NULL);
    if (g_rank <= 0) say(g_saved_line);
    _exit(TXL_STOP_EXIT);
  }
}

void txl_stop_uninstall(void) {
  for (int i = 0; i < N_STOP_SIGNALS; i++) set_action(STOP_SIGNALS[i], SIG_DFL);
  if (g_signal) {
    fflush(NULL);
    raise(g_signal);
  }
}
