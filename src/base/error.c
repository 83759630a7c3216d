/* Errors: the message line, then the end of the job through the hooks dist/ installs (MPI is
 * dist/'s: nothing here knows it). */
#include "src/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank = 0;
static int g_world = 1;
static char g_host[64] = "";
static TxlErrorJob g_job = {NULL, NULL, NULL}; /* none: one process, no MPI */

void txl_error_set_rank(int rank, int world_size, const char *host) {
  g_rank = rank;
  g_world = world_size;
  snprintf(g_host, sizeof g_host, "%s", host ? host : "");
}

void txl_error_set_job(const TxlErrorJob *job) { g_job = *job; }

static void vreport(const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (g_world > 1)
    fprintf(stderr, "txl: error: [rank %d@%s] %s\n", g_rank, g_host, msg);
  else
    fprintf(stderr, "txl: error: %s\n", msg);
  fflush(stderr);
}

static void finalize(void) {
  if (g_job.finalize) g_job.finalize();
}

void txl_fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
  if (g_world > 1 && g_job.abort_all) g_job.abort_all();
  finalize();
  exit(1);
}

void txl_fatal_all(const char *fmt, ...) {
  if (g_rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "txl: error: %s\n", msg);
    fflush(stderr);
  }
  finalize();
  exit(1);
}

void txl_fatal_if_any(int failed, const char *fmt, ...) {
  int first = failed ? g_rank : g_world;
  if (g_world > 1 && g_job.min_over_ranks) first = g_job.min_over_ranks(first);
  if (first == g_world) return;
  if (first == g_rank) {
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
  }
  finalize();
  exit(1);
}

void txl_error_print(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(fmt, ap);
  va_end(ap);
}

void txl_exit_unfinalized(void) {
  fflush(NULL);
  _exit(1);
}

void *txl_malloc(size_t bytes, const char *what) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) txl_fatal("out of memory allocating %zu bytes for %s", bytes, what);
  return p;
}

void *txl_calloc(size_t count, size_t size, const char *what) {
  void *p = calloc(count ? count : 1, size ? size : 1);
  if (!p) txl_fatal("out of memory allocating %zu x %zu bytes for %s", count, size, what);
  return p;
}
