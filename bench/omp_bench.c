/* omp_bench: what an OpenMP runtime costs per empty parallel region and per barrier, measured by
 * the program itself (omp_get_wtime around many of each). bench/omp_bench.sh runs it alone and
 * under `parmon record`, interleaved, to show what parmon's OMPT tool adds (docs/openmp.md).
 * Prints one line: "region_ns R barrier_ns B threads T region_cpu_ns RC barrier_cpu_ns BC": wall
 * time per region and per barrier, and the master thread's CPU time per region and per barrier
 * (CLOCK_THREAD_CPUTIME_ID: what it spent itself, without the time it waited for a CPU that other
 * processes -- or parmon's recorder -- held on a busy machine). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "openmp/omp_args.h"

/* Each thread touches its own cache line: the region is not empty to the compiler (an empty one
 * can be dropped) and costs nothing to speak of beyond the runtime's fork and join. */
static volatile long g_slots[64 * 16];
#define TOUCH() (g_slots[(omp_get_thread_num() & 63) * 16]++)

static double ThreadCpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  int threads = (int)OmpArg(argc, argv, "--threads", 2);
  long regions = OmpArg(argc, argv, "--regions", 20000);
  long barriers = OmpArg(argc, argv, "--barriers", 20000);
  if (threads < 1 || regions < 1 || barriers < 1) {
    fprintf(stderr, "usage: omp_bench [--threads T] [--regions N] [--barriers N]\n");
    return 2;
  }
  /* Warm up: the team exists before anything is timed. */
  for (int i = 0; i < 100; ++i) {
#pragma omp parallel num_threads(threads)
    TOUCH();
  }
  double c0 = ThreadCpu();
  double t0 = omp_get_wtime();
  for (long i = 0; i < regions; ++i) {
#pragma omp parallel num_threads(threads)
    TOUCH();
  }
  double t1 = omp_get_wtime();
  double c1 = ThreadCpu();
  double b0 = 0, b1 = 0, bc0 = 0, bc1 = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp barrier
#pragma omp master
    {
      bc0 = ThreadCpu();
      b0 = omp_get_wtime();
    }
    for (long i = 0; i < barriers; ++i) {
#pragma omp barrier
    }
#pragma omp master
    {
      b1 = omp_get_wtime();
      bc1 = ThreadCpu();
    }
  }
  printf("region_ns %.1f barrier_ns %.1f threads %d region_cpu_ns %.1f barrier_cpu_ns %.1f\n",
         (t1 - t0) * 1e9 / regions, (b1 - b0) * 1e9 / barriers, threads, (c1 - c0) * 1e9 / regions,
         (bc1 - bc0) * 1e9 / barriers);
  return 0;
}
