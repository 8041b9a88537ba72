/* live_emitter THREADS RATE SECONDS: each of THREADS threads enters and leaves a region at a
 * sustained pace so that the program emits RATE events per second in all for SECONDS seconds
 * (checked every 256 events against CLOCK_MONOTONIC; a thread that falls behind catches up at
 * full speed). Prints "emitted N seconds S" at the end: what live_bench compares against. */
#include <parmon/parmon.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double g_rate_per_thread, g_seconds;
static parmon_id g_region;

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* Worker(void* arg) {
  long long* emitted = arg;
  double start = Now();
  long long n = 0;
  for (;;) {
    double t = Now() - start;
    if (t >= g_seconds)
      break;
    long long due = (long long)(t * g_rate_per_thread);
    if (n >= due) {
      struct timespec pause = {0, 50000};
      nanosleep(&pause, NULL);
      continue;
    }
    for (int i = 0; i < 128; ++i) {
      parmon_region_enter(g_region);
      parmon_region_leave(g_region);
    }
    n += 256;
  }
  *emitted = n;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: live_emitter THREADS RATE SECONDS\n");
    return 2;
  }
  int threads = atoi(argv[1]);
  if (threads < 1 || threads > 64)
    return 2;
  g_rate_per_thread = atof(argv[2]) / threads;
  g_seconds = atof(argv[3]);
  g_region = parmon_region_register("tick");
  pthread_t tid[64];
  long long emitted[64];
  double start = Now();
  for (int i = 0; i < threads; ++i)
    pthread_create(&tid[i], NULL, Worker, &emitted[i]);
  long long total = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(tid[i], NULL);
    total += emitted[i];
  }
  printf("emitted %lld seconds %.3f\n", total, Now() - start);
  return 0;
}
