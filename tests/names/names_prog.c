/* names_prog: a program whose threads and processes change their names, printing what the
 * kernel says each name is (/proc/.../comm, read by the thread itself) as the tests' oracle.
 *
 *   names_prog exec-static   fork; the child waits 150 ms under this program's name, then execs
 *                            names_static (found next to this program), which prints its own
 *   names_prog exec-true     fork; the child waits 150 ms, prints its pid and execs /bin/true
 *   names_prog setname       two threads spin 100 ms, name themselves worker-1/2 with
 *                            pthread_setname_np, spin 200 ms more and print their kernel names
 *   names_prog setname-quick two threads name themselves quick-1 (pthread_setname_np) and
 *                            quick-2 (prctl PR_SET_NAME), print their kernel names and end at once
 *   names_prog pipe          names itself pipeline-stage, forks; the parent writes 1 MiB into a
 *                            pipe that the child reads (and lives 300 ms more); both print
 *                            their pid, name and bytes
 *
 * Lines: "parent PID COMM", "child PID", "thread TID COMM", "pipe ROLE PID COMM BYTES". */
#define _GNU_SOURCE
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void Spin(double seconds) {
  volatile unsigned long x = 0;
  double end = Now() + seconds;
  while (Now() < end)
    for (int i = 0; i < 10000; ++i)
      x += (unsigned long)i;
}

static void Comm(const char* path, char* out, size_t n) {
  out[0] = '\0';
  FILE* f = fopen(path, "r");
  if (!f)
    return;
  if (fgets(out, (int)n, f))
    out[strcspn(out, "\n")] = '\0';
  fclose(f);
}

static void PrintParent(void) {
  char comm[64];
  Comm("/proc/self/comm", comm, sizeof comm);
  printf("parent %d %s\n", (int)getpid(), comm);
  fflush(stdout);
}

static int Wait(pid_t pid) {
  int status;
  if (waitpid(pid, &status, 0) != pid)
    return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void* Worker(void* arg) {
  int k = (int)(long)arg;
  const int quick = k > 2;
  if (quick)
    k -= 2;
  else
    Spin(0.1);
  char name[32], path[64], comm[64];
  snprintf(name, sizeof name, quick ? "quick-%d" : "worker-%d", k);
  if (quick && k == 2)
    prctl(PR_SET_NAME, name, 0, 0, 0);
  else
    pthread_setname_np(pthread_self(), name);
  if (!quick)
    Spin(0.2);
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)gettid());
  Comm(path, comm, sizeof comm);
  printf("thread %d %s\n", (int)gettid(), comm);
  fflush(stdout);
  return NULL;
}

static int Pipe(void) {
  prctl(PR_SET_NAME, "pipeline-stage", 0, 0, 0);
  int fds[2];
  if (pipe(fds) != 0)
    return 1;
  pid_t pid = fork();
  if (pid < 0)
    return 1;
  char comm[64];
  static char buf[65536];
  if (pid == 0) {
    close(fds[1]);
    long total = 0;
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0)
      total += n;
    // Alive a while after: the recorder reads its name (a process that forked and ended before
    // the recorder saw it, right after its parent renamed itself, can take the parent's former
    // name: see the report of issue 12's names).
    usleep(300000);
    Comm("/proc/self/comm", comm, sizeof comm);
    printf("pipe reader %d %s %ld\n", (int)getpid(), comm, total);
    fflush(stdout);
    _exit(0);
  }
  close(fds[0]);
  long total = 0;
  memset(buf, 'x', sizeof buf);
  for (int i = 0; i < 16; ++i) {
    ssize_t n = write(fds[1], buf, sizeof buf);
    if (n > 0)
      total += n;
  }
  close(fds[1]);
  int rc = Wait(pid);
  Comm("/proc/self/comm", comm, sizeof comm);
  printf("pipe writer %d %s %ld\n", (int)getpid(), comm, total);
  return rc;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: names_prog exec-static|exec-true|setname|setname-quick|pipe\n");
    return 2;
  }
  const char* mode = argv[1];
  if (!strcmp(mode, "exec-static") || !strcmp(mode, "exec-true")) {
    PrintParent();
    pid_t pid = fork();
    if (pid < 0)
      return 1;
    if (pid == 0) {
      Spin(0.15);  // long enough for the recorder to know it under this program's name
      printf("child %d\n", (int)getpid());
      fflush(stdout);
      if (!strcmp(mode, "exec-true")) {
        execl("/bin/true", "true", (char*)NULL);
      } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/names_static", dirname(strdup(argv[0])));
        execl(path, path, (char*)NULL);
      }
      perror("exec");
      _exit(1);
    }
    return Wait(pid);
  }
  if (!strcmp(mode, "setname") || !strcmp(mode, "setname-quick")) {
    PrintParent();
    const long first = strcmp(mode, "setname") ? 3 : 1;
    pthread_t t[2];
    for (long k = 0; k < 2; ++k)
      pthread_create(&t[k], NULL, Worker, (void*)(first + k));
    for (int k = 0; k < 2; ++k)
      pthread_join(t[k], NULL);
    return 0;
  }
  if (!strcmp(mode, "pipe"))
    return Pipe();
  fprintf(stderr, "names_prog: unknown mode %s\n", mode);
  return 2;
}
