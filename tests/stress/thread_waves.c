/* thread_waves WAVES PER_WAVE ITERATIONS SIDE_FILE: WAVES waves of PER_WAVE threads that come and
 * go (a wave starts when the previous one has been joined). Every thread names itself
 * "w<wave>.<i>" and enters and leaves the region "wave" ITERATIONS times: 2*ITERATIONS+1 events
 * per thread. SIDE_FILE gets "threads=<n> events_per_thread=<m> pid=<pid>" and then every thread's
 * tid, one a line: the oracle the stress test holds the trace to. */
#define _GNU_SOURCE
#include <parmon/parmon.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static parmon_id g_region;
static long g_iterations;
static pid_t* g_tids;

struct Slot {
  int wave, index, global;
};

static void* Worker(void* arg) {
  struct Slot* s = arg;
  g_tids[s->global] = gettid();
  char name[32];
  snprintf(name, sizeof name, "w%d.%d", s->wave, s->index);
  parmon_thread_name(name);
  for (long i = 0; i < g_iterations; ++i) {
    parmon_region_enter(g_region);
    parmon_region_leave(g_region);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: thread_waves WAVES PER_WAVE ITERATIONS SIDE_FILE\n");
    return 2;
  }
  int waves = atoi(argv[1]), per_wave = atoi(argv[2]);
  g_iterations = atol(argv[3]);
  g_region = parmon_region_register("wave");
  g_tids = calloc((size_t)waves * per_wave, sizeof *g_tids);
  pthread_t* t = calloc((size_t)per_wave, sizeof *t);
  struct Slot* slots = calloc((size_t)waves * per_wave, sizeof *slots);
  for (int w = 0; w < waves; ++w) {
    for (int i = 0; i < per_wave; ++i) {
      struct Slot* s = &slots[w * per_wave + i];
      s->wave = w;
      s->index = i;
      s->global = w * per_wave + i;
      if (pthread_create(&t[i], NULL, Worker, s) != 0) {
        perror("pthread_create");
        return 1;
      }
    }
    for (int i = 0; i < per_wave; ++i)
      pthread_join(t[i], NULL);
  }
  FILE* f = fopen(argv[4], "w");
  if (!f)
    return 1;
  fprintf(f, "threads=%d events_per_thread=%ld pid=%d\n", waves * per_wave, 2 * g_iterations + 1,
          (int)getpid());
  for (int i = 0; i < waves * per_wave; ++i)
    fprintf(f, "%d\n", (int)g_tids[i]);
  fclose(f);
  return 0;
}
