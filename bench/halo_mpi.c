/* A 1-D halo exchange, the real MPI program report_bench records: each rank owns a strip of
 * cells, and every iteration it posts MPI_Irecv from both neighbours (periodic, so a ring),
 * MPI_Isend of its edge cells to both, relaxes its interior while the messages fly, completes
 * them with MPI_Waitall, relaxes the edges, and every few iterations agrees on a residual with
 * MPI_Allreduce (and, more rarely, an MPI_Barrier and an MPI_Bcast from rank 0).
 *
 * Recorded in trace mode each iteration writes about 18 events per rank (Irecv x2: 4, Isend x2:
 * 6, Waitall with its 2 receives and 2 send completions: 6, the collectives, switch records), so
 * the event count is ranks x iterations x ~18.2. The work per iteration is small on purpose (a few
 * microseconds): the trace should be MPI-dense, like the communication-bound codes whose reports
 * are slow.
 *
 *   halo_mpi [iterations] [cells per rank] [halo width in doubles]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long iterations = argc > 1 ? atol(argv[1]) : 10000;
  long cells = argc > 2 ? atol(argv[2]) : 512;
  int halo = argc > 3 ? atoi(argv[3]) : 16;
  if (iterations < 1 || cells < 4 * halo || halo < 1) {
    if (rank == 0)
      fprintf(stderr, "halo_mpi: bad arguments\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  /* u[0..halo) and u[halo+cells..) are the ghost cells. */
  double* u = calloc((size_t)(cells + 2 * halo), sizeof *u);
  double* v = calloc((size_t)(cells + 2 * halo), sizeof *v);
  for (long i = 0; i < cells; ++i)
    u[halo + i] = (double)((rank * cells + i) % 97);
  int left = (rank + size - 1) % size, right = (rank + 1) % size;
  double residual = 0;
  for (long it = 0; it < iterations; ++it) {
    MPI_Request req[4];
    MPI_Irecv(u, halo, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(u + halo + cells, halo, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(u + halo, halo, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(u + cells, halo, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[3]);
    double local = 0;
    for (long i = 2 * halo; i < cells; ++i) {
      v[i] = 0.25 * (u[i - 1] + 2 * u[i] + u[i + 1]);
      local += (v[i] - u[i]) * (v[i] - u[i]);
    }
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    for (long i = halo; i < 2 * halo; ++i)
      v[i] = 0.25 * (u[i - 1] + 2 * u[i] + u[i + 1]);
    for (long i = cells; i < cells + halo; ++i)
      v[i] = 0.25 * (u[i - 1] + 2 * u[i] + u[i + 1]);
    double* t = u;
    u = v;
    v = t;
    if (it % 8 == 7)
      MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (it % 256 == 255) {
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Bcast(&residual, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
  }
  if (rank == 0)
    printf("halo_mpi: %d ranks, %ld iterations, residual %g\n", size, iterations, residual);
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
