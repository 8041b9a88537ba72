/* What an MPI call costs, timed by the program itself (bench/mpi_bench.sh runs it plain and under
 * `parmon record` in each mode, interleaved; issue 11, item 7).
 *
 *   mpi_calls pingpong [ITERS]  2 ranks, 0-byte MPI_Send/MPI_Recv round trips between ranks 0 and
 *                               1: prints ns per MPI call (a round trip is 4 calls: a send and a
 *                               receive on each rank).
 *   mpi_calls barrier [ITERS]   any number of ranks, a loop of MPI_Barrier: prints ns per barrier.
 *
 * Each figure is the best of 5 timed blocks after a warm-up block (the least-disturbed block on a
 * machine others load), on rank 0's MPI_Wtime. Output: one line "<test> <ns>". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_pingpong.h"

static double PingPong(int iters, int rank) {
  return PingPongSeconds(iters, rank) / iters * 1e9 / 4.0;
}

static double Barriers(int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    MPI_Barrier(MPI_COMM_WORLD);
  return (MPI_Wtime() - t0) / iters * 1e9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* test = argc > 1 ? argv[1] : "";
  const int pingpong = strcmp(test, "pingpong") == 0;
  const int barrier = strcmp(test, "barrier") == 0;
  int iters = argc > 2 ? atoi(argv[2]) : (pingpong ? 50000 : 10000);
  if ((!pingpong && !barrier) || iters <= 0 || (pingpong && size != 2)) {
    if (rank == 0)
      fprintf(stderr,
              "mpi_calls: usage: mpi_calls pingpong|barrier [ITERS > 0] (pingpong on 2 ranks)\n");
    MPI_Finalize();
    return 2;
  }
  double best = 1e30;
  for (int block = 0; block < 6; ++block) {
    double ns = pingpong ? PingPong(iters, rank) : Barriers(iters);
    if (block > 0 && ns < best)
      best = ns;
  }
  if (rank == 0)
    printf("%s %.1f\n", test, best);
  MPI_Finalize();
  return 0;
}
