/* The checks of the emulator's self-tests (test_emu.cpp, test_capture.cpp, tests/cuda/test_ptx.cu):
 * each prints its line and "ok" or "FAIL"; run_child and expect_fatal run a case that must end
 * the process in a child; selftest_finish says how the program went (its exit status). */
#ifndef TXL_TESTS_CUDA_EMU_SELFTEST_H
#define TXL_TESTS_CUDA_EMU_SELFTEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

static int g_failures = 0;

static void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("%s\n", ok ? "  ok" : "  FAIL");
  if (!ok) g_failures++;
}

/* Runs fn in a child process with its stderr captured; returns the child's wait status. */
static inline int run_child(void (*fn)(void), std::string *err) {
  int fd[2];
  if (pipe(fd) != 0) {
    perror("pipe");
    exit(1);
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
    fn();
    _exit(0); /* not reached when the emulator (or ASan) detects the problem */
  }
  close(fd[1]);
  char buf[512];
  ssize_t got;
  while ((got = read(fd[0], buf, sizeof buf)) > 0) err->append(buf, (size_t)got);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

/* Runs fn in a child process; it must exit with status 1 and a message on stderr that contains
 * each of the given strings. */
static inline void expect_fatal(const char *what, void (*fn)(void), const char *s1, const char *s2) {
  std::string err;
  const int status = run_child(fn, &err);
  const bool exit1 = WIFEXITED(status) && WEXITSTATUS(status) == 1;
  const bool has = err.find(s1) != std::string::npos && err.find(s2) != std::string::npos;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  check(exit1 && has, "%s: exit %d, \"%s\"", what, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        err.c_str());
}

static int selftest_finish(void) {
  if (g_failures) {
    printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}

#endif
