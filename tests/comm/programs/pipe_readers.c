/* pipe_readers: one writer and N reader processes on one pipe (a pool fed through a pipe).
 * The writer writes 3 MiB in 4 KiB writes; each reader reads 4 KiB at a time, works ~20 us per
 * read, counts its bytes and prints "reader PID BYTES" (the test's oracle); the writer prints
 * "writer PID BYTES". Usage: pipe_readers [N=3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void Work(double us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  volatile unsigned long x = 0;
  do {
    for (int i = 0; i < 200; ++i)
      x += (unsigned long)i;
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3 < us);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3;
  if (n < 1 || n > 64)
    return 2;
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  static char buf[4096];
  for (int k = 0; k < n; ++k) {
    pid_t pid = fork();
    if (pid < 0)
      return 1;
    if (pid == 0) {
      close(fds[1]);
      long total = 0;
      ssize_t got;
      while ((got = read(fds[0], buf, sizeof buf)) > 0) {
        total += got;
        Work(20);
      }
      printf("reader %d %ld\n", (int)getpid(), total);
      fflush(stdout);
      _exit(0);
    }
  }
  close(fds[0]);
  memset(buf, 'x', sizeof buf);
  long total = 0;
  for (int i = 0; i < 768; ++i) {
    ssize_t put = write(fds[1], buf, sizeof buf);
    if (put > 0)
      total += put;
  }
  close(fds[1]);
  int rc = 0;
  for (int k = 0; k < n; ++k) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      rc = 1;
  }
  printf("writer %d %ld\n", (int)getpid(), total);
  return rc;
}
