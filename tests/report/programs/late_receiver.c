/* late_receiver: an MPI program whose partners are late in three known ways, for parmon
 * report's end-to-end wait-state tests. Two ranks, ITER rounds of three phases, each after a
 * barrier:
 *  1. rank 0 MPI_Ssend's to rank 1, which sleeps DELAY_MS before posting MPI_Recv: rank 0 waits
 *     in MPI_Ssend for a late receiver;
 *  2. rank 0 MPI_Isend's BYTES (larger than the eager limit, so the send completes only once the
 *     receive is matched) and waits in MPI_Wait; rank 1 sleeps DELAY_MS before MPI_Recv: rank 0
 *     waits in MPI_Wait for a late receiver;
 *  3. rank 1 posts MPI_Irecv, sleeps 2 ms (work done while the receive is pending, not a wait)
 *     and waits in MPI_Wait; rank 0 sleeps DELAY_MS and sends: rank 1 waits in MPI_Wait for a
 *     late sender from the wait's start.
 * The program measures each wait itself on CLOCK_MONOTONIC (one clock for both ranks on one
 * machine): rank 1 reports when it posted its receives to rank 0 (phases 1 and 2), rank 0 puts
 * the time it sent into its message (phase 3). It prints, in nanoseconds,
 *   injected_late_receiver_ssend_ns N   (rank 0, phase 1: receive posted - send started)
 *   injected_late_receiver_wait_ns N    (rank 0, phase 2: receive posted - MPI_Wait entered)
 *   injected_late_sender_wait_ns N      (rank 1, phase 3: send started - MPI_Wait entered)
 * Usage: late_receiver [ITER] [DELAY_MS] [BYTES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void SleepMs(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int iter = argc > 1 ? atoi(argv[1]) : 10;
  int delay_ms = argc > 2 ? atoi(argv[2]) : 20;
  int bytes = argc > 3 ? atoi(argv[3]) : 1 << 20;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0)
      fprintf(stderr, "late_receiver: run with exactly 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  char* buffer = malloc((size_t)bytes);
  memset(buffer, rank, (size_t)bytes);
  double ssend_wait = 0, isend_wait = 0, irecv_wait = 0;
  for (int i = 0; i < iter; ++i) {
    double t = 0, posted = 0;
    /* 1: MPI_Ssend, late receiver. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      t = Now();
      MPI_Ssend(&t, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD);
      MPI_Recv(&posted, 1, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (posted > t)
        ssend_wait += posted - t;
    } else {
      SleepMs(delay_ms);
      posted = Now();
      MPI_Recv(&t, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&posted, 1, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD);
    }
    /* 2: MPI_Isend + MPI_Wait, late receiver. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      MPI_Request req;
      MPI_Isend(buffer, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req);
      t = Now();
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      MPI_Recv(&posted, 1, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (posted > t)
        isend_wait += posted - t;
    } else {
      SleepMs(delay_ms);
      posted = Now();
      MPI_Recv(buffer, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&posted, 1, MPI_DOUBLE, 0, 99, MPI_COMM_WORLD);
    }
    /* 3: MPI_Irecv + MPI_Wait, late sender. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      SleepMs(delay_ms);
      t = Now();
      MPI_Send(&t, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD);
    } else {
      MPI_Request req;
      double sent_at = 0;
      MPI_Irecv(&sent_at, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, &req);
      SleepMs(2);
      double waiting = Now();
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      if (sent_at > waiting)
        irecv_wait += sent_at - waiting;
    }
  }
  if (rank == 0)
    printf("injected_late_receiver_ssend_ns %.0f\ninjected_late_receiver_wait_ns %.0f\n",
           ssend_wait * 1e9, isend_wait * 1e9);
  else
    printf("injected_late_sender_wait_ns %.0f\n", irecv_wait * 1e9);
  fflush(stdout);
  free(buffer);
  MPI_Finalize();
  return 0;
}
