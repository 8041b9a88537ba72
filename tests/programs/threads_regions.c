/* threads_regions THREADS ITERATIONS [SIDE_FILE]: every thread enters and leaves the region
 * "work" ITERATIONS times (2*ITERATIONS+1 events per thread with its name) and names itself
 * "worker-<i>". The main thread emits no region events. SIDE_FILE gets "threads=<n>
 * events_per_thread=<m>". */
#include <parmon/parmon.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static parmon_id g_region;
static long g_iterations;

static void* Worker(void* arg) {
  char name[32];
  snprintf(name, sizeof name, "worker-%ld", (long)(size_t)arg);
  parmon_thread_name(name);
  volatile double x = 1.0;
  for (long i = 0; i < g_iterations; ++i) {
    parmon_region_enter(g_region);
    x = x * 1.0000001 + 1e-9;
    parmon_region_leave(g_region);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: threads_regions THREADS ITERATIONS [SIDE_FILE]\n");
    return 2;
  }
  int threads = atoi(argv[1]);
  g_iterations = atol(argv[2]);
  g_region = parmon_region_register("work");
  pthread_t* t = calloc((size_t)threads, sizeof *t);
  for (int i = 0; i < threads; ++i)
    pthread_create(&t[i], NULL, Worker, (void*)(size_t)i);
  for (int i = 0; i < threads; ++i)
    pthread_join(t[i], NULL);
  if (argc > 3) {
    FILE* f = fopen(argv[3], "w");
    if (!f)
      return 1;
    /* per worker: its name and 2 events per iteration */
    fprintf(f, "threads=%d events_per_thread=%ld\n", threads, 2 * g_iterations + 1);
    fclose(f);
  }
  free(t);
  return 0;
}
