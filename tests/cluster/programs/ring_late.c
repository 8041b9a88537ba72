/* ring_late: an MPI ring with one late rank per round, for the multi-host test (issue 19). Every
 * round, after a barrier, rank (round % size) sleeps DELAY_MS; then each rank sends one double to
 * its right neighbour and receives one from its left (even ranks send first, odd ranks receive
 * first: no deadlock even if sends were synchronous). The sender puts in the message the time it
 * called MPI_Send; the receiver sums (that time - the time it called MPI_Recv) when positive: its
 * late-sender time, what parmon should find. Both times are CLOCK_MONOTONIC, which every rank of
 * one machine shares (hosts simulated in network namespaces included; MPI_Wtime may count from
 * each process's own start, as Open MPI's does).
 *
 * Rank 0 prints, per rank: "rank K host H sent S received R late_sender_ns N".
 * Usage: ring_late [ROUNDS] [DELAY_MS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { kHostLen = 64 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rounds = argc > 1 ? atoi(argv[1]) : 12;
  int delay_ms = argc > 2 ? atoi(argv[2]) : 20;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || rounds < 1 || delay_ms < 0) {
    if (rank == 0)
      fprintf(stderr, "ring_late: needs 2 or more ranks, ROUNDS >= 1 and DELAY_MS >= 0\n");
    MPI_Finalize();
    return 2;
  }
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double late = 0;
  long sent = 0, received = 0;
  for (int i = 0; i < rounds; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (i % size == rank) {
      struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
      nanosleep(&ts, NULL);
    }
    double stamp = 0, got = 0, posted = 0;
    if (rank % 2 == 0) {
      stamp = Now();
      MPI_Send(&stamp, 1, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
      posted = Now();
      MPI_Recv(&got, 1, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      posted = Now();
      MPI_Recv(&got, 1, MPI_DOUBLE, left, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      stamp = Now();
      MPI_Send(&stamp, 1, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
    }
    ++sent;
    ++received;
    if (got > posted)
      late += got - posted;
  }
  char host[kHostLen] = {0};
  gethostname(host, kHostLen - 1);
  double mine[3] = {(double)sent, (double)received, late * 1e9};
  double* all = rank == 0 ? malloc(sizeof(double) * 3 * (size_t)size) : NULL;
  char* hosts = rank == 0 ? malloc((size_t)kHostLen * (size_t)size) : NULL;
  MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Gather(host, kHostLen, MPI_CHAR, hosts, kHostLen, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int k = 0; k < size; ++k)
      printf("rank %d host %s sent %.0f received %.0f late_sender_ns %.0f\n", k,
             hosts + (size_t)k * kHostLen, all[3 * k], all[3 * k + 1], all[3 * k + 2]);
    fflush(stdout);
    free(all);
    free(hosts);
  }
  MPI_Finalize();
  return 0;
}
