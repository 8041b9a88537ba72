/* The 0-byte ping-pong between ranks 0 and 1 that bench/mpi_calls and the test program
 * tests/comm/programs/mpi_overhead both time (other ranks only take part in the barrier). */
#ifndef PARMON_BENCH_MPI_PINGPONG_H_
#define PARMON_BENCH_MPI_PINGPONG_H_

#include <mpi.h>

/* Seconds for `iters` round trips on rank 0's MPI_Wtime, after a barrier. */
static inline double PingPongSeconds(int iters, int rank) {
  char b = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (rank == 0) {
      MPI_Send(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&b, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&b, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    }
  }
  return MPI_Wtime() - t0;
}

#endif /* PARMON_BENCH_MPI_PINGPONG_H_ */
