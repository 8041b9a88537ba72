/* mpi_truth: an MPI program that knows how it spent its time, for the report's tests of MPI time
 * (issue 11). Each of ITER rounds, rank r computes (spins on its own CPU clock) for
 * COMPUTE_MS * (r + 1) / size of CPU time, then exchanges BYTES with both ring neighbours
 * (MPI_Sendrecv to the right, MPI_Isend/MPI_Irecv/MPI_Waitall of BYTES / 2 to the left) and
 * enters MPI_Barrier: the ranks that computed less wait for the others inside MPI.
 * Run oversubscribed, the waiting ranks' MPI library polls, yields or sleeps while the others
 * compute. After MPI_Finalize each rank prints what it measured itself (CLOCK_MONOTONIC and its
 * thread's CPU clock), one line:
 *   truth rank R compute_cpu_ns N compute_wall_ns N mpi_ns N run_ns N init_ns N finalize_ns N
 *         sent_msgs N sent_bytes N recv_msgs N recv_bytes N calls N
 * (run_ns: from MPI_Init's return to MPI_Finalize's call; mpi_ns: wall time inside its MPI calls
 * other than MPI_Init/Finalize) and per destination "truth link R P msgs N bytes N".
 * Usage: mpi_truth [ITER] [COMPUTE_MS] [BYTES] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long long Ns(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
static long long Now(void) { return Ns(CLOCK_MONOTONIC); }

static long long mpi_ns = 0, calls = 0;
#define TIMED(call)                \
  do {                             \
    long long t0_ = Now();         \
    call;                          \
    mpi_ns += Now() - t0_;         \
    ++calls;                       \
  } while (0)

int main(int argc, char** argv) {
  long long init0 = Now();
  MPI_Init(&argc, &argv);
  long long init1 = Now();
  int iter = argc > 1 ? atoi(argv[1]) : 20;
  int compute_ms = argc > 2 ? atoi(argv[2]) : 40;
  int bytes = argc > 3 ? atoi(argv[3]) : 4096;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  char* out = calloc((size_t)bytes, 1);
  char* in = calloc((size_t)bytes, 1);
  char* out2 = calloc((size_t)bytes, 1);
  char* in2 = calloc((size_t)bytes, 1);
  long long* link_msgs = calloc((size_t)size, sizeof(long long));
  long long* link_bytes = calloc((size_t)size, sizeof(long long));
  long long sent_msgs = 0, sent_bytes = 0, recv_msgs = 0, recv_bytes = 0;
  long long compute_cpu = 0, compute_wall = 0;
  long long spin_ns = (long long)compute_ms * 1000000LL * (rank + 1) / size;
  volatile unsigned long sink = 0;
  for (int i = 0; i < iter; ++i) {
    long long w0 = Now(), c0 = Ns(CLOCK_THREAD_CPUTIME_ID), c1;
    do {
      for (int k = 0; k < 2000; ++k)
        sink += (unsigned long)k * 2654435761u;
      c1 = Ns(CLOCK_THREAD_CPUTIME_ID);
    } while (c1 - c0 < spin_ns);
    compute_cpu += c1 - c0;
    compute_wall += Now() - w0;
    TIMED(MPI_Sendrecv(out, bytes, MPI_BYTE, right, 1, in, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE));
    MPI_Request req[2];
    TIMED(MPI_Irecv(in2, bytes / 2, MPI_BYTE, right, 2, MPI_COMM_WORLD, &req[0]));
    TIMED(MPI_Isend(out2, bytes / 2, MPI_BYTE, left, 2, MPI_COMM_WORLD, &req[1]));
    TIMED(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
    TIMED(MPI_Barrier(MPI_COMM_WORLD));
    sent_msgs += 2;
    sent_bytes += bytes + bytes / 2;
    recv_msgs += 2;
    recv_bytes += bytes + bytes / 2;
    link_msgs[right] += 1;
    link_bytes[right] += bytes;
    link_msgs[left] += 1;
    link_bytes[left] += bytes / 2;
  }
  long long fin0 = Now();
  MPI_Finalize();
  long long fin1 = Now();
  printf(
      "truth rank %d compute_cpu_ns %lld compute_wall_ns %lld mpi_ns %lld run_ns %lld init_ns %lld "
      "finalize_ns %lld sent_msgs %lld sent_bytes %lld recv_msgs %lld recv_bytes %lld calls %lld\n",
      rank, compute_cpu, compute_wall, mpi_ns, fin0 - init1, init1 - init0, fin1 - fin0, sent_msgs,
      sent_bytes, recv_msgs, recv_bytes, calls);
  for (int p = 0; p < size; ++p)
    if (link_msgs[p])
      printf("truth link %d %d msgs %lld bytes %lld\n", rank, p, link_msgs[p], link_bytes[p]);
  fflush(stdout);
  return (int)(sink & 0);
}
