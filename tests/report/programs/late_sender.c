/* late_sender: an MPI program with a deliberate late sender, for parmon report's end-to-end
 * test. Two ranks, ITER iterations: both leave a barrier, rank 1 posts MPI_Recv at once, rank 0
 * sleeps DELAY_MS and then sends. Rank 0 puts the time it sent in the message; rank 1 sums (send
 * time - time it posted the receive) and prints the total, in nanoseconds, as
 * "injected_late_sender_ns N": the late-sender time parmon should find on rank 1.
 * Usage: late_sender [ITER] [DELAY_MS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC, the same in both ranks of one machine (MPI_Wtime may count from each
 * process's own start, as Open MPI's does). */
static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iter = argc > 1 ? atoi(argv[1]) : 10;
  int delay_ms = argc > 2 ? atoi(argv[2]) : 20;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0)
      fprintf(stderr, "late_sender: run with exactly 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  double injected = 0;
  for (int i = 0; i < iter; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double sent_at = 0;
    if (rank == 0) {
      struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
      sent_at = Now();
      MPI_Send(&sent_at, 1, MPI_DOUBLE, 1, 42, MPI_COMM_WORLD);
    } else {
      double posted = Now();
      MPI_Recv(&sent_at, 1, MPI_DOUBLE, 0, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (sent_at > posted)
        injected += sent_at - posted;
    }
  }
  if (rank == 1)
    printf("injected_late_sender_ns %.0f\n", injected * 1e9);
  MPI_Finalize();
  return 0;
}
