/* Added cost per MPI call on a 0-byte ping-pong between ranks 0 and 1, measured in one run:
 * alternating blocks with parmon recording paused (the wrappers pass straight through: the
 * uninstrumented latency) and resumed. Uses parmon_pause/parmon_resume through dlsym, so it
 * runs without parmon too (then both columns are uninstrumented).
 * usage: mpi_overhead [round trips per block, default 20000] */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi_pingpong.h"

/* ns per round trip */
static double Block(int iters, int rank) {
  return PingPongSeconds(iters, rank) / iters * 1e9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  if (size != 2 || iters <= 0) {
    if (rank == 0)
      fprintf(stderr, "mpi_overhead: run with 2 ranks and a positive count\n");
    MPI_Finalize();
    return 2;
  }
  void (*pause_fn)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "parmon_pause");
  void (*resume_fn)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "parmon_resume");
  double best_off = 1e30, best_on = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    if (pause_fn)
      pause_fn();
    double off = Block(iters, rank);
    if (resume_fn)
      resume_fn();
    double on = Block(iters, rank);
    if (off < best_off)
      best_off = off;
    if (on < best_on)
      best_on = on;
  }
  if (rank == 0)
    /* A round trip is 4 MPI calls (send+recv on each rank), 2 on the critical path per rank. */
    printf(
        "0-byte ping-pong round trip: uninstrumented %.0f ns, recorded %.0f ns, "
        "added %.1f ns per MPI call\n",
        best_off, best_on, (best_on - best_off) / 4.0);
  MPI_Finalize();
  return 0;
}
