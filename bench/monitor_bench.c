/* Self-monitoring read cost (issue 17, docs/selfmon.md): run under `parmon record` (bench/
 * monitor_bench.sh), it starts THREADS threads that sleep (so the machine stays free for the
 * reads), watches them all, waits until the sampler has published figures for every one, then
 * times READS calls of parmon_monitor_read for all of them (PARMON_SINCE_LAST_READ and
 * PARMON_LAST_INTERVAL) and prints ns per read (target: <= 1 us for 64 threads). Reference in the
 * same run: what a program would pay to get CPU figures of the same threads itself, one pread of
 * /proc/self/task/TID/schedstat per thread (its CPU time and run-queue delay only).
 * usage: monitor_bench [THREADS] [READS] */
#define _GNU_SOURCE
#include <fcntl.h>
#include <parmon/parmon.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_stop;
static atomic_int g_started;
static int32_t g_tids[1024];

static void* Sleeper(void* arg) {
  g_tids[(long)arg] = parmon_thread_id();
  atomic_fetch_add(&g_started, 1);
  struct timespec ts = {0, 5000000};
  while (!atomic_load(&g_stop))
    nanosleep(&ts, NULL);
  return NULL;
}

static double NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int Cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 64;
  long reads = argc > 2 ? atol(argv[2]) : 200000;
  if (threads < 1 || threads > 256 || reads < 1) {
    fprintf(stderr, "monitor_bench: THREADS must be 1..256 and READS positive\n");
    return 2;
  }
  parmon_monitor* m;
  int rc = parmon_monitor_open(&m);
  if (rc != PARMON_OK) {
    fprintf(stderr, "monitor_bench: run it under parmon record (parmon_monitor_open: %d)\n", rc);
    return 2;
  }
  pthread_t t[256];
  for (long i = 0; i < threads; ++i)
    pthread_create(&t[i], NULL, Sleeper, (void*)i);
  while (atomic_load(&g_started) < threads)
    usleep(1000);
  for (int i = 0; i < threads; ++i)
    if (parmon_monitor_watch(m, g_tids[i], NULL) != PARMON_OK) {
      fprintf(stderr, "monitor_bench: cannot watch thread %d\n", i);
      return 1;
    }
  parmon_thread_figures* f = calloc((size_t)threads, sizeof *f);
  /* Until every thread has figures (the sampler has seen and booked it). */
  int ready = 0;
  for (int tries = 0; tries < 500 && !ready; ++tries) {
    usleep(10000);
    int n = parmon_monitor_read(m, PARMON_LAST_INTERVAL, f, threads);
    ready = n == threads;
    for (int i = 0; i < n; ++i)
      ready = ready && !(f[i].flags & PARMON_FIGURES_NONE);
  }
  if (!ready) {
    fprintf(stderr, "monitor_bench: the sampler published no figures for every thread in 5 s\n");
    return 1;
  }
  /* Rounds of READS/10 reads; the median round is the figure. */
  enum { kRounds = 11 };
  double since[kRounds], last[kRounds], proc[kRounds];
  uint64_t sink = 0;
  int fds[256];
  for (int i = 0; i < threads; ++i) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", g_tids[i]);
    fds[i] = open(path, O_RDONLY);
  }
  long per_round = reads / 10 > 0 ? reads / 10 : 1;
  for (int r = 0; r < kRounds; ++r) {
    double t0 = NowNs();
    for (long k = 0; k < per_round; ++k) {
      parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, threads);
      sink += f[k % threads].states_ns[0];
    }
    double t1 = NowNs();
    for (long k = 0; k < per_round; ++k) {
      parmon_monitor_read(m, PARMON_LAST_INTERVAL, f, threads);
      sink += f[k % threads].states_ns[0];
    }
    double t2 = NowNs();
    long proc_reads = per_round / 100 > 0 ? per_round / 100 : 1;
    for (long k = 0; k < proc_reads; ++k)
      for (int i = 0; i < threads; ++i) {
        char buf[128];
        sink += (uint64_t)pread(fds[i], buf, sizeof buf, 0);
      }
    double t3 = NowNs();
    since[r] = (t1 - t0) / per_round;
    last[r] = (t2 - t1) / per_round;
    proc[r] = (t3 - t2) / proc_reads;
  }
  qsort(since, kRounds, sizeof(double), Cmp);
  qsort(last, kRounds, sizeof(double), Cmp);
  qsort(proc, kRounds, sizeof(double), Cmp);
  printf("monitor_bench: %d threads, %ld reads per round, median of %d rounds (min..max)\n",
         threads, per_round, kRounds);
  printf(
      "  parmon_monitor_read SINCE_LAST_READ: %7.0f ns per read (%.0f..%.0f), %.1f ns per "
      "thread; target <= 1000 ns\n",
      since[kRounds / 2], since[0], since[kRounds - 1], since[kRounds / 2] / threads);
  printf("  parmon_monitor_read LAST_INTERVAL:   %7.0f ns per read (%.0f..%.0f)\n",
         last[kRounds / 2], last[0], last[kRounds - 1]);
  printf("  reference, %d preads of /proc/self/task/TID/schedstat: %9.0f ns (%.0f..%.0f)\n",
         threads, proc[kRounds / 2], proc[0], proc[kRounds - 1]);
  printf("  (checksum %llu)\n", (unsigned long long)(sink & 1));
  atomic_store(&g_stop, 1);
  for (int i = 0; i < threads; ++i)
    pthread_join(t[i], NULL);
  parmon_monitor_close(m);
  return since[kRounds / 2] <= 1000 ? 0 : 1;
}
