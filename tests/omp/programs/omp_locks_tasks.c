/* omp_locks_tasks: a two-thread team that contends for a critical section and then runs explicit
 * tasks, timing both itself: per thread the time from asking for the critical section to being
 * inside it (its lock wait), and the time inside each task it ran (its task time). Writes
 * "thread I lock_ns L task_ns T" lines to argv[1] (tests/omp, docs/openmp.md). */
#include <omp.h>
#include <stdio.h>

static volatile double g_sink;

static void Compute(long n) {
  double x = 1.0;
  for (long i = 0; i < n; ++i)
    x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

int main(int argc, char** argv) {
  double lock[2] = {0, 0}, task[2] = {0, 0};
  if (argc < 2) {
    fprintf(stderr, "usage: omp_locks_tasks OUT\n");
    return 2;
  }
#pragma omp parallel num_threads(2)
  {
    int t = omp_get_thread_num();
    for (int k = 0; k < 20; ++k) {
      double asked = omp_get_wtime();
#pragma omp critical
      {
        lock[t] += omp_get_wtime() - asked;
        Compute(300000);
      }
    }
#pragma omp barrier
#pragma omp single
    for (int k = 0; k < 8; ++k) {
#pragma omp task
      {
        double b = omp_get_wtime();
        Compute(600000);
#pragma omp atomic
        task[omp_get_thread_num()] += omp_get_wtime() - b;
      }
    }
  }
  FILE* f = fopen(argv[1], "w");
  if (f == NULL)
    return 1;
  for (int t = 0; t < 2; ++t)
    fprintf(f, "thread %d lock_ns %.0f task_ns %.0f\n", t, lock[t] * 1e9, task[t] * 1e9);
  fclose(f);
  return 0;
}
