/* An MPI+OpenMP halo exchange for bench/overhead_bench.sh (issue 11): each rank relaxes a strip
 * of a 2-D grid with an OpenMP parallel loop (OMP_NUM_THREADS threads, 2 in the benchmark), then
 * its master exchanges the edge rows with both neighbours (a ring) with MPI_Irecv, MPI_Isend and
 * MPI_Waitall, and every 10 iterations the ranks agree on a residual with MPI_Allreduce. Rank 0
 * prints the loop's wall time on its own clock: "halo_omp_mpi <seconds> <residual>".
 *
 *   halo_omp_mpi [iterations, default 400] [columns, default 2048] [rows per rank, default 128]
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long iterations = argc > 1 ? atol(argv[1]) : 400;
  const long cols = argc > 2 ? atol(argv[2]) : 2048;
  const long rows = argc > 3 ? atol(argv[3]) : 128;
  if (iterations < 1 || cols < 4 || rows < 2) {
    if (rank == 0)
      fprintf(stderr, "halo_omp_mpi: bad arguments\n");
    MPI_Finalize();
    return 2;
  }
  /* rows + 2 halo rows, each of cols doubles */
  double* a = calloc((size_t)(rows + 2) * (size_t)cols, sizeof(double));
  double* b = calloc((size_t)(rows + 2) * (size_t)cols, sizeof(double));
  if (!a || !b) {
    fprintf(stderr, "halo_omp_mpi: out of memory\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (long i = 1; i <= rows; ++i)
    for (long j = 0; j < cols; ++j)
      a[i * cols + j] = (double)((rank * rows + i) % 7) + (double)(j % 5);
  const int up = (rank + size - 1) % size, down = (rank + 1) % size;
  double residual = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long it = 0; it < iterations; ++it) {
    MPI_Request req[4];
    MPI_Irecv(&a[0], (int)cols, MPI_DOUBLE, up, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&a[(rows + 1) * cols], (int)cols, MPI_DOUBLE, down, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(&a[1 * cols], (int)cols, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&a[rows * cols], (int)cols, MPI_DOUBLE, down, 0, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    double local = 0;
#pragma omp parallel for reduction(+ : local) schedule(static)
    for (long i = 1; i <= rows; ++i) {
      for (long j = 1; j < cols - 1; ++j) {
        const double v = 0.25 * (a[(i - 1) * cols + j] + a[(i + 1) * cols + j] +
                                 a[i * cols + j - 1] + a[i * cols + j + 1]);
        local += (v - a[i * cols + j]) * (v - a[i * cols + j]);
        b[i * cols + j] = v;
      }
    }
    double* t = a;
    a = b;
    b = t;
    if (it % 10 == 9)
      MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  const double seconds = MPI_Wtime() - t0;
  if (rank == 0)
    printf("halo_omp_mpi %.6f %.6g\n", seconds, residual);
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
