/* mpi_cases: a 2-rank MPI program that knows what it did, for the report's tests of issue 11
 * item 8 (figures that were wrong on an MPI benchmark). Two modes:
 *
 *   mpi_cases exchange ITER HEAVY_MS LIGHT_MS
 *     Each of ITER rounds, rank 1 computes HEAVY_MS and rank 0 LIGHT_MS of CPU time (spinning on
 *     the thread's CPU clock), then both call MPI_Sendrecv (4096 bytes each way): rank 0 waits
 *     in it for rank 1's message. The first and the last round's MPI_Sendrecv is at a second
 *     call site. Each rank also writes one line to stdout per round (flushed:
 *     one write each, POSIX channel traffic, not MPI messages). At the end each rank prints
 *       truth rank R compute_cpu_ns N sendrecv_ns N sendrecv_calls N sent_msgs N sent_bytes N
 *             stdout_lines N run_ns N cpu_ns N
 *     (sendrecv_ns: wall time inside its MPI_Sendrecv calls by its own clock; run_ns: from
 *     MPI_Init's return to MPI_Finalize's call; cpu_ns: the thread's CPU clock after
 *     MPI_Finalize, its polling inside MPI calls included).
 *
 *   mpi_cases crash HEAVY_MS SIGNAL
 *     Rank 0 enters MPI_Barrier at once; rank 1 computes HEAVY_MS of CPU time, prints
 *       truth rank 1 compute_cpu_ns N signal S pid P
 *     and dies of signal S (11: a real invalid memory access; else raise(S)). The launcher then
 *     tears rank 0 down while it still waits in the barrier. Rank 0 prints
 *       truth rank 0 pid P barrier_entered 1
 *     just before it enters the barrier. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long Ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static volatile unsigned long g_sink;

/* Spins until the thread has run ns of CPU time; returns the CPU time it ran. */
static long long Compute(long long ns) {
  long long c0 = Ns(CLOCK_THREAD_CPUTIME_ID), c1;
  do {
    for (int k = 0; k < 2000; ++k)
      g_sink += (unsigned long)k * 2654435761u;
    c1 = Ns(CLOCK_THREAD_CPUTIME_ID);
  } while (c1 - c0 < ns);
  return c1 - c0;
}

/* Not inlined: its MPI_Sendrecv returns to another address than Exchange's own. */
static __attribute__((noinline)) void SecondSiteSendrecv(char* out, char* in, int n, int peer) {
  MPI_Sendrecv(out, n, MPI_BYTE, peer, 7, in, n, MPI_BYTE, peer, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
}

static int Exchange(int rank, int iter, int heavy_ms, int light_ms) {
  enum { kBytes = 4096 };
  static char out[kBytes], in[kBytes];
  int peer = 1 - rank;
  long long compute = 0, sendrecv = 0, t_run = Ns(CLOCK_MONOTONIC);
  int lines = 0;
  for (int i = 0; i < iter; ++i) {
    compute += Compute((long long)(rank == 1 ? heavy_ms : light_ms) * 1000000LL);
    long long t0 = Ns(CLOCK_MONOTONIC);
    /* The first and the last round call from a second place: one function at two call sites,
     * 2 and ITER - 2 calls. */
    if (i == 0 || i == iter - 1)
      SecondSiteSendrecv(out, in, kBytes, peer);
    else
      MPI_Sendrecv(out, kBytes, MPI_BYTE, peer, 7, in, kBytes, MPI_BYTE, peer, 7, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    sendrecv += Ns(CLOCK_MONOTONIC) - t0;
    printf("round %d rank %d\n", i, rank);
    fflush(stdout);
    ++lines;
  }
  long long run = Ns(CLOCK_MONOTONIC) - t_run;
  /* The truth line goes out after MPI_Finalize (its own write, not counted in stdout_lines). */
  MPI_Finalize();
  printf(
      "truth rank %d compute_cpu_ns %lld sendrecv_ns %lld sendrecv_calls %d sent_msgs %d "
      "sent_bytes %lld stdout_lines %d run_ns %lld cpu_ns %lld\n",
      rank, compute, sendrecv, iter, iter, (long long)iter * kBytes, lines, run,
      Ns(CLOCK_THREAD_CPUTIME_ID));
  fflush(stdout);
  return 0;
}

static int Crash(int rank, int heavy_ms, int sig) {
  if (rank == 0) {
    printf("truth rank 0 pid %d barrier_entered 1\n", (int)getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("truth rank 0 barrier_left 1\n"); /* never: its peer dies first */
    fflush(stdout);
    MPI_Finalize();
    return 0;
  }
  long long compute = Compute((long long)heavy_ms * 1000000LL);
  printf("truth rank 1 compute_cpu_ns %lld signal %d pid %d\n", compute, sig, (int)getpid());
  fflush(stdout);
  if (sig == SIGSEGV) {
    volatile int* volatile nowhere = NULL;
    *nowhere = 1;
  }
  raise(sig);
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 || argc < 2) {
    if (rank == 0)
      fprintf(stderr,
              "usage: mpirun -np 2 mpi_cases exchange ITER HEAVY_MS LIGHT_MS | crash "
              "HEAVY_MS SIGNAL\n");
    MPI_Finalize();
    return 2;
  }
  if (strcmp(argv[1], "exchange") == 0 && argc >= 5)
    return Exchange(rank, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  if (strcmp(argv[1], "crash") == 0 && argc >= 4)
    return Crash(rank, atoi(argv[2]), atoi(argv[3]));
  if (rank == 0)
    fprintf(stderr, "mpi_cases: unknown mode %s\n", argv[1]);
  MPI_Finalize();
  return 2;
}
