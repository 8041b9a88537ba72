/* seq_emitter THREADS SECONDS|EVENTS:N SIDE_FILE [RELEASE_FILE]: every thread names itself
 * "seq-<i>" and emits the counter "seq" with the values 0, 1, 2, ... as fast as it can, for SECONDS
 * seconds or, with EVENTS:N, N times. After its loop it waits 20 ms and emits the marker "done" (so
 * the end of the run is in a flight recorder's window). SIDE_FILE gets "pid=<pid>" and, per thread,
 * "seq-<i>=<values>": the thread emitted 1 + <values> + 1 events (name, counters, marker), the
 * oracle for exact loss accounting: recorded + lost must equal it. With RELEASE_FILE the program
 * then waits until that file exists (at most 5 minutes) before it exits, so a test can reach its
 * recorder while it still runs. */
#include <parmon/parmon.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static parmon_id g_seq, g_done;
static double g_seconds;
static long g_events = -1;
static long* g_counts;

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* Worker(void* arg) {
  long index = (long)(intptr_t)arg;
  char name[32];
  snprintf(name, sizeof name, "seq-%ld", index);
  parmon_thread_name(name);
  long n = 0;
  if (g_events >= 0) {
    for (; n < g_events; ++n)
      parmon_counter_int(g_seq, n);
  } else {
    double end = Now() + g_seconds;
    while (1) {
      for (int k = 0; k < 4096; ++k, ++n)
        parmon_counter_int(g_seq, n);
      if (Now() >= end)
        break;
    }
  }
  /* A pause of 20 ms spent spinning, not sleeping: a sleep would add the POSIX preload's
   * TimerWait event to the thread's count, which the side file does not know. */
  for (double until = Now() + 0.02; Now() < until;)
    ;
  parmon_marker(g_done);
  g_counts[index] = n;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: seq_emitter THREADS SECONDS|EVENTS:N SIDE_FILE [RELEASE_FILE]\n");
    return 2;
  }
  int threads = atoi(argv[1]);
  if (strncmp(argv[2], "EVENTS:", 7) == 0)
    g_events = atol(argv[2] + 7);
  else
    g_seconds = atof(argv[2]);
  g_seq = parmon_counter_register("seq");
  g_done = parmon_marker_register("done");
  g_counts = calloc((size_t)threads, sizeof *g_counts);
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (long i = 0; i < threads; ++i)
    pthread_create(&t[i], NULL, Worker, (void*)(intptr_t)i);
  for (int i = 0; i < threads; ++i)
    pthread_join(t[i], NULL);
  FILE* f = fopen(argv[3], "w");
  if (!f)
    return 1;
  fprintf(f, "pid=%d\n", (int)getpid());
  for (int i = 0; i < threads; ++i)
    fprintf(f, "seq-%d=%ld\n", i, g_counts[i]);
  fclose(f);
  for (int i = 0; argc > 4 && i < 30000 && access(argv[4], F_OK) != 0; ++i)
    usleep(10000);
  return 0;
}
