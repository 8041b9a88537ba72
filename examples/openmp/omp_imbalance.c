/* omp_imbalance: an OpenMP program with a deliberately imbalanced loop that measures itself, so
 * that parmon's OpenMP report (docs/openmp.md) can be checked against the program's own figures.
 *
 * Each of --regions parallel regions runs a loop with one iteration per thread (static schedule,
 * nowait); iteration i computes (i + 1) x --unit of work, so thread i works i + 1 times as long
 * as thread 0 and the team is imbalanced by design. Each thread takes omp_get_wtime() around its
 * share of the loop (its work) and around the explicit barrier that follows (its barrier wait).
 * Between regions the master computes alone for --serial units (serial time; the workers idle).
 *
 * With --out FILE it writes what it measured, one "key value..." line each:
 *   threads T / regions R
 *   thread I work_ns W barrier_ns B      (sums over the regions)
 *   imbalance X                          (sum over regions of the slowest thread's work divided
 *                                         by the sum of the threads' mean work)
 * Built with clang -fopenmp against LLVM's libomp (OMPT) and with gcc -fopenmp against libgomp
 * (no OMPT in GCC 12): examples/CMakeLists.txt. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omp_args.h"

#define MAX_THREADS 64

static volatile double g_sink;

/* About a millisecond of arithmetic per unit on a current core; the amount is fixed, not the
 * time, so a thread that is preempted takes longer, as a real computation would. */
static void Compute(long units) {
  double x = 1.0;
  for (long i = 0; i < units * 200000; ++i)
    x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

int main(int argc, char** argv) {
  int threads = (int)OmpArg(argc, argv, "--threads", 4);
  long regions = OmpArg(argc, argv, "--regions", 3);
  long unit = OmpArg(argc, argv, "--unit", 40);
  long serial = OmpArg(argc, argv, "--serial", 50);
  const char* out = NULL;
  for (int i = 1; i + 1 < argc; ++i)
    if (strcmp(argv[i], "--out") == 0)
      out = argv[i + 1];
  if (threads < 1 || threads > MAX_THREADS || regions < 1 || unit < 0 || serial < 0) {
    fprintf(stderr,
            "usage: omp_imbalance [--threads 1..64] [--regions N] [--unit U] "
            "[--serial U] [--out FILE]\n");
    return 2;
  }
  double work[MAX_THREADS] = {0}, wait[MAX_THREADS] = {0};
  double sum_max = 0, sum_mean = 0, serial_s = 0;
  int team = threads;
  for (long r = 0; r < regions; ++r) {
    double s0 = omp_get_wtime();
    Compute(serial);
    serial_s += omp_get_wtime() - s0;
    double region_work[MAX_THREADS] = {0};
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      if (t == 0)
        team = omp_get_num_threads();
      double t0 = omp_get_wtime();
#pragma omp for schedule(static) nowait
      for (int i = 0; i < threads; ++i)
        Compute(unit * (i + 1));
      double t1 = omp_get_wtime();
#pragma omp barrier
      double t2 = omp_get_wtime();
      region_work[t] = t1 - t0;
      work[t] += t1 - t0;
      wait[t] += t2 - t1;
    }
    double max = 0, sum = 0;
    for (int t = 0; t < team; ++t) {
      sum += region_work[t];
      if (region_work[t] > max)
        max = region_work[t];
    }
    sum_max += max;
    sum_mean += sum / team;
  }
  double s0 = omp_get_wtime();
  Compute(serial);
  serial_s += omp_get_wtime() - s0;
  printf("omp_imbalance: %d threads, %ld regions, imbalance %.3f\n", team, regions,
         sum_mean > 0 ? sum_max / sum_mean : 1.0);
  if (out != NULL) {
    FILE* f = fopen(out, "w");
    if (f == NULL) {
      perror(out);
      return 1;
    }
    fprintf(f, "threads %d\nregions %ld\n", team, regions);
    for (int t = 0; t < team; ++t)
      fprintf(f, "thread %d work_ns %.0f barrier_ns %.0f\n", t, work[t] * 1e9, wait[t] * 1e9);
    fprintf(f, "imbalance %.6f\nserial_ns %.0f\n", sum_mean > 0 ? sum_max / sum_mean : 1.0,
            serial_s * 1e9);
    fclose(f);
  }
  return 0;
}
