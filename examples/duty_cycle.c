// duty_cycle: threads whose behaviour is known by construction, for checking what the system
// monitor (`parmon record` sampler and context switches) says about them. Uninstrumented: it
// makes no parmon call, so it behaves the same under any monitor, and builds static as well.
//
//   duty_cycle [--seconds S] basic    spinner; sleeper (busy 10 ms, sleeps 10 ms of each 20 ms);
//                                     pipe reader fed every 100 ms; two threads
//                                     contending for one mutex (hold 5 ms, 1 ms outside)
//   duty_cycle [--seconds S] oversub  four spinners (on a 2-CPU machine each is queued ~half)
//   duty_cycle [--seconds S] spin     one spinner (a target for `parmon record -p`)
//   duty_cycle [--rounds N] [--one-cpu] pingpong
//                                     two threads bounce a byte through two pipes N times
//                                     (default 100,000), a few microseconds of work each turn:
//                                     each switches out and in once per round, 10,000s of times
//                                     a second (--one-cpu: both on the CPU main started on, where
//                                     a wake-up switches at once, ~100,000 times a second; on two
//                                     CPUs of a virtual machine each wake-up waits for an IPI)
//   duty_cycle [--seconds S] yield    four threads calling sched_yield in a loop (on 2 CPUs,
//                                     each call switches: 100,000s of switches a second); half
//                                     way through, a child process starts two more (role
//                                     late_yielder) for the rest of the time
//   duty_cycle churn                  100 threads one after another, each on a CPU for 1 ms and
//                                     gone 2 ms later: most live and die between two samples.
//                                     Prints "churn threads=100 cpu=NS" (their CPU time summed)
//
// Each thread also measures its own truth, which the tests compare with parmon: wall time of its
// loop (CLOCK_MONOTONIC, the session clock of parmon on machines without a perf TSC clock), CPU
// time (CLOCK_THREAD_CPUTIME_ID), time spent waiting for what it blocked on (until the timer's
// deadline, the feeder's write, the holder's unlock: once that has happened the thread is only
// waiting for a CPU, which is runnable time, not waiting), and at the end of the loop its
// voluntary/involuntary context-switch counters from /proc with the time they were read, and the
// kernel's schedstat of the thread (time on a CPU and time queued for one, since its creation:
// what is left of its life was spent blocked). One line per thread on stdout:
//   thread role=R tid=T start=NS end=NS cpu=NS blocked=NS read_begin=NS read_end=NS cpu_at_read=NS
//          voluntary=N involuntary=N sched_run=NS sched_delay=NS
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull

static uint64_t Now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void SpinUntil(uint64_t deadline) {
  while (Now(CLOCK_MONOTONIC) < deadline) {
  }
}

struct Truth {
  const char* role;
  pid_t tid;
  uint64_t start, end, cpu, blocked;
  uint64_t read_begin, read_end, cpu_at_read, voluntary, involuntary;
  uint64_t sched_run, sched_delay;  // /proc/.../schedstat at the read (0 when absent)
};

static uint64_t g_seconds_ns = 3000ull * MS;
static uint64_t g_stop;  // CLOCK_MONOTONIC deadline for every loop
static int g_pipe[2];
// Priority-inheritance mutex: unlock hands the lock to the waiter (FUTEX_UNLOCK_PI), so a woken
// waiter never finds it taken again and its wait ends exactly at the holder's unlock.
static pthread_mutex_t g_mutex;
static uint64_t g_released;  // when the mutex was last unlocked (written under the mutex)

// The part of [entry, now] spent before the awaited event happened at event_ns.
static uint64_t WaitedFor(uint64_t entry, uint64_t event_ns) {
  return event_ns > entry ? event_ns - entry : 0;
}

struct Feed {  // what the feeder writes: atomic on a pipe (< PIPE_BUF)
  uint64_t written_ns;
  uint64_t last;
};

static void Begin(struct Truth* t, const char* role) {
  t->role = role;
  t->tid = (pid_t)syscall(SYS_gettid);
  t->start = Now(CLOCK_MONOTONIC);
}

// The thread's own /proc counters, read as the last act of its loop.
static void Finish(struct Truth* t) {
  t->end = Now(CLOCK_MONOTONIC);
  t->cpu = Now(CLOCK_THREAD_CPUTIME_ID);
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)t->tid);
  t->read_begin = Now(CLOCK_MONOTONIC);
  FILE* f = fopen(path, "r");
  if (f) {
    while (fgets(buf, sizeof buf, f)) {
      unsigned long long v;
      if (sscanf(buf, "voluntary_ctxt_switches: %llu", &v) == 1)
        t->voluntary = v;
      if (sscanf(buf, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
        t->involuntary = v;
    }
    fclose(f);
  }
  snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)t->tid);
  f = fopen(path, "r");
  if (f) {
    unsigned long long run = 0, delay = 0;
    if (fscanf(f, "%llu %llu", &run, &delay) == 2) {
      t->sched_run = run;
      t->sched_delay = delay;
    }
    fclose(f);
  }
  t->cpu_at_read = Now(CLOCK_THREAD_CPUTIME_ID);
  t->read_end = Now(CLOCK_MONOTONIC);
}

static void* Spinner(void* arg) {
  struct Truth* t = arg;
  Begin(t, "spinner");
  SpinUntil(g_stop);
  Finish(t);
  return NULL;
}

static void* Yielder(void* arg) {
  struct Truth* t = arg;
  Begin(t, t->role ? t->role : "yielder");
  while (Now(CLOCK_MONOTONIC) < g_stop)
    sched_yield();
  Finish(t);
  return NULL;
}

static void PrintTruth(const struct Truth* t) {
  printf(
      "thread role=%s tid=%d start=%llu end=%llu cpu=%llu blocked=%llu read_begin=%llu "
      "read_end=%llu cpu_at_read=%llu voluntary=%llu involuntary=%llu sched_run=%llu "
      "sched_delay=%llu\n",
      t->role, (int)t->tid, (unsigned long long)t->start, (unsigned long long)t->end,
      (unsigned long long)t->cpu, (unsigned long long)t->blocked,
      (unsigned long long)t->read_begin, (unsigned long long)t->read_end,
      (unsigned long long)t->cpu_at_read, (unsigned long long)t->voluntary,
      (unsigned long long)t->involuntary, (unsigned long long)t->sched_run,
      (unsigned long long)t->sched_delay);
}

// yield: half way through, a child process yields on two threads of its own until the end.
static pid_t LateYielders(void) {
  struct timespec half = {(time_t)(g_seconds_ns / 2 / 1000000000ull),
                          (long)(g_seconds_ns / 2 % 1000000000ull)};
  nanosleep(&half, NULL);
  fflush(stdout);
  pid_t child = fork();
  if (child != 0)
    return child;
  struct Truth truth[2];
  pthread_t th[2];
  memset(truth, 0, sizeof truth);
  for (int i = 0; i < 2; ++i) {
    truth[i].role = "late_yielder";
    pthread_create(&th[i], NULL, Yielder, &truth[i]);
  }
  for (int i = 0; i < 2; ++i)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 2; ++i)
    PrintTruth(&truth[i]);
  fflush(stdout);
  _exit(0);
}

static void* Sleeper(void* arg) {
  struct Truth* t = arg;
  Begin(t, "sleeper");
  for (uint64_t cycle = t->start; cycle + 20 * MS <= g_stop; cycle += 20 * MS) {
    SpinUntil(cycle + 10 * MS);
    struct timespec until = {(time_t)((cycle + 20 * MS) / 1000000000ull),
                             (long)((cycle + 20 * MS) % 1000000000ull)};
    uint64_t b = Now(CLOCK_MONOTONIC);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
    t->blocked += WaitedFor(b, cycle + 20 * MS);
  }
  Finish(t);
  return NULL;
}

static void* PipeReader(void* arg) {
  struct Truth* t = arg;
  Begin(t, "pipe_reader");
  for (;;) {
    struct Feed f;
    uint64_t b = Now(CLOCK_MONOTONIC);
    ssize_t n = read(g_pipe[0], &f, sizeof f);
    if (n != sizeof f)
      break;
    t->blocked += WaitedFor(b, f.written_ns);
    if (f.last)
      break;
  }
  Finish(t);
  return NULL;
}

static void* PipeFeeder(void* arg) {
  (void)arg;
  uint64_t next = Now(CLOCK_MONOTONIC);
  for (;;) {
    next += 100 * MS;
    int last = next + 100 * MS > g_stop;
    struct timespec until = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
    struct Feed f = {Now(CLOCK_MONOTONIC), (uint64_t)last};
    if (write(g_pipe[1], &f, sizeof f) != sizeof f || last)
      break;
  }
  return NULL;
}

static void* Contender(void* arg) {
  struct Truth* t = arg;
  Begin(t, "mutex");
  while (Now(CLOCK_MONOTONIC) < g_stop) {
    uint64_t b = Now(CLOCK_MONOTONIC);
    pthread_mutex_lock(&g_mutex);
    uint64_t got = Now(CLOCK_MONOTONIC);
    t->blocked += WaitedFor(b, g_released);
    SpinUntil(got + 5 * MS);
    g_released = Now(CLOCK_MONOTONIC);
    pthread_mutex_unlock(&g_mutex);
    SpinUntil(Now(CLOCK_MONOTONIC) + 1 * MS);  // lets the other one take the lock
  }
  Finish(t);
  return NULL;
}

static uint64_t g_rounds = 100000;
static int g_ping[2], g_pong[2];
static volatile uint64_t g_sink;

// A little CPU work, the same each turn (a few microseconds).
static void Work(void) {
  uint64_t x = g_sink;
  for (int i = 0; i < 2000; ++i)
    x = x * 6364136223846793005ull + 1442695040888963407ull;
  g_sink = x;
}

// Reads a byte from in, works, writes it to out, g_rounds times; the pinger serves first.
static void Bounce(struct Truth* t, int in, int out, int serve) {
  char c = 'x';
  for (uint64_t i = 0; i < g_rounds; ++i) {
    if (!serve || i > 0) {
      if (read(in, &c, 1) != 1)
        break;
    }
    Work();
    if (write(out, &c, 1) != 1)
      break;
  }
  if (serve && read(in, &c, 1) != 1)  // the last byte back
    fprintf(stderr, "duty_cycle: the last byte did not come back\n");
  Finish(t);
}

static int g_one_cpu = -1;  // --one-cpu: the CPU both ping-pong threads are bound to

static void BindPingPong(void) {
  if (g_one_cpu < 0)
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(g_one_cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    fprintf(stderr, "duty_cycle: could not bind to CPU %d\n", g_one_cpu);
}

static void* Pinger(void* arg) {
  struct Truth* t = arg;
  BindPingPong();
  Begin(t, "pinger");
  Bounce(t, g_pong[0], g_ping[1], 1);
  return NULL;
}

static void* Ponger(void* arg) {
  struct Truth* t = arg;
  BindPingPong();
  Begin(t, "ponger");
  Bounce(t, g_ping[0], g_pong[1], 0);
  return NULL;
}

static void* Brief(void* arg) {
  SpinUntil(Now(CLOCK_MONOTONIC) + 1 * MS);
  *(uint64_t*)arg = Now(CLOCK_THREAD_CPUTIME_ID);
  return NULL;
}

static int Churn(void) {
  uint64_t total = 0;
  for (int i = 0; i < 100; ++i) {
    pthread_t t;
    uint64_t cpu = 0;
    if (pthread_create(&t, NULL, Brief, &cpu) != 0)
      return 1;
    pthread_join(t, NULL);
    total += cpu;
    struct timespec gap = {0, 2 * MS};
    nanosleep(&gap, NULL);
  }
  // Stay a little so the sampler reads the process's counters once more.
  struct timespec rest = {0, 300 * MS};
  nanosleep(&rest, NULL);
  printf("churn threads=100 cpu=%llu\n", (unsigned long long)total);
  return 0;
}

int main(int argc, char** argv) {
  const char* scenario = "basic";
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      double s = atof(argv[++i]);
      if (s <= 0 || s > 3600) {
        fprintf(stderr, "duty_cycle: --seconds must be between 0 and 3600\n");
        return 2;
      }
      g_seconds_ns = (uint64_t)(s * 1e9);
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      long long r = atoll(argv[++i]);
      if (r <= 0 || r > 1000000000ll) {
        fprintf(stderr, "duty_cycle: --rounds must be between 1 and 1e9\n");
        return 2;
      }
      g_rounds = (uint64_t)r;
    } else if (strcmp(argv[i], "--one-cpu") == 0) {
      g_one_cpu = sched_getcpu();
      if (g_one_cpu < 0)
        g_one_cpu = 0;
    } else if (strcmp(argv[i], "churn") == 0) {
      return Churn();
    } else if (strcmp(argv[i], "basic") == 0 || strcmp(argv[i], "oversub") == 0 ||
               strcmp(argv[i], "spin") == 0 || strcmp(argv[i], "pingpong") == 0 ||
               strcmp(argv[i], "yield") == 0) {
      scenario = argv[i];
    } else {
      fprintf(stderr,
              "usage: duty_cycle [--seconds S] [--rounds N] [--one-cpu] "
              "[basic|oversub|spin|pingpong|yield|churn]\n");
      return 2;
    }
  }
  struct Truth truth[8];
  memset(truth, 0, sizeof truth);
  void* (*fns[8])(void*);
  int n = 0;
  pthread_t feeder;
  int have_feeder = 0;
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
  pthread_mutex_init(&g_mutex, &ma);
  if (strcmp(scenario, "basic") == 0) {
    if (pipe(g_pipe) != 0) {
      perror("duty_cycle: pipe");
      return 1;
    }
    fns[n++] = Spinner;
    fns[n++] = Sleeper;
    fns[n++] = PipeReader;
    fns[n++] = Contender;
    fns[n++] = Contender;
    have_feeder = 1;
  } else if (strcmp(scenario, "pingpong") == 0) {
    if (pipe(g_ping) != 0 || pipe(g_pong) != 0) {
      perror("duty_cycle: pipe");
      return 1;
    }
    fns[n++] = Pinger;
    fns[n++] = Ponger;
  } else if (strcmp(scenario, "yield") == 0) {
    for (int i = 0; i < 4; ++i)
      fns[n++] = Yielder;
  } else if (strcmp(scenario, "oversub") == 0) {
    for (int i = 0; i < 4; ++i)
      fns[n++] = Spinner;
  } else {
    fns[n++] = Spinner;
  }
  printf("pid %d scenario %s\n", (int)getpid(), scenario);
  fflush(stdout);
  g_stop = Now(CLOCK_MONOTONIC) + g_seconds_ns;
  pthread_t th[8];
  for (int i = 0; i < n; ++i)
    pthread_create(&th[i], NULL, fns[i], &truth[i]);
  if (have_feeder)
    pthread_create(&feeder, NULL, PipeFeeder, NULL);
  pid_t late = strcmp(scenario, "yield") == 0 ? LateYielders() : -1;
  for (int i = 0; i < n; ++i)
    pthread_join(th[i], NULL);
  if (late > 0)
    waitpid(late, NULL, 0);
  if (have_feeder)
    pthread_join(feeder, NULL);
  for (int i = 0; i < n; ++i)
    PrintTruth(&truth[i]);
  return 0;
}
