/* record_loop THREADS ITERATIONS: the tight loop of issue 18, timed from inside the program.
 * Every thread, pinned to CPU (i mod CPUs), first times ITERATIONS reads of the TSC, then (after
 * a barrier, so that the threads emit at the same time) ITERATIONS region enter/leave pairs
 * through libparmon. Prints one line per thread "thread=<i> rdtsc_ns=<ns per rdtsc>
 * event_ns=<ns per event>", then "events=<n> region_wall_s=<s> self_cpu_s=<s>": the events all
 * threads emitted, the wall time from the barrier until the last thread finished, and this
 * process's CPU time (record_loop_bench subtracts it from the recorder's). Run under
 * `parmon record` by bench/record_loop_bench; alone, every call is a no-op. */
#define _GNU_SOURCE
#include <parmon/parmon.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static parmon_id g_region;
static long g_iterations;
static int g_threads;
static pthread_barrier_t g_barrier;
static double g_rdtsc_ns[64], g_event_ns[64];
static volatile uint64_t g_sink;

static double NowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void* Worker(void* arg) {
  const long i = (long)(size_t)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)(i % sysconf(_SC_NPROCESSORS_ONLN)), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  uint64_t sum = 0;
  double t0 = NowS();
  for (long k = 0; k < g_iterations; ++k)
    sum += __rdtsc();
  g_rdtsc_ns[i] = (NowS() - t0) * 1e9 / (double)g_iterations;
  g_sink = sum;
  pthread_barrier_wait(&g_barrier);
  t0 = NowS();
  for (long k = 0; k < g_iterations; ++k) {
    parmon_region_enter(g_region);
    parmon_region_leave(g_region);
  }
  g_event_ns[i] = (NowS() - t0) * 1e9 / (2.0 * (double)g_iterations);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: record_loop THREADS ITERATIONS\n");
    return 2;
  }
  g_threads = atoi(argv[1]);
  g_iterations = atol(argv[2]);
  if (g_threads < 1 || g_threads > 64 || g_iterations < 1) {
    fprintf(stderr, "record_loop: THREADS is 1 to 64, ITERATIONS at least 1\n");
    return 2;
  }
  g_region = parmon_region_register("loop");
  pthread_barrier_init(&g_barrier, NULL, (unsigned)g_threads + 1);
  pthread_t t[64];
  for (int i = 0; i < g_threads; ++i)
    pthread_create(&t[i], NULL, Worker, (void*)(size_t)i);
  pthread_barrier_wait(&g_barrier);
  const double start = NowS();
  for (int i = 0; i < g_threads; ++i)
    pthread_join(t[i], NULL);
  const double wall = NowS() - start;
  for (int i = 0; i < g_threads; ++i)
    printf("thread=%d rdtsc_ns=%.3f event_ns=%.3f\n", i, g_rdtsc_ns[i], g_event_ns[i]);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("events=%ld region_wall_s=%.6f self_cpu_s=%.6f\n", 2L * g_iterations * g_threads, wall,
         (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6);
  return 0;
}
