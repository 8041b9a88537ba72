/* MPI communication patterns with known message counts and sizes, for parmon's comm tests.
 *
 * usage: mpi_patterns PATTERN   (pingpong | ring | alltoall | halo | collectives | early |
 *                                barriers)
 *
 * Every rank prints what it sent, one line per destination, as the program itself counts it:
 *   sent <from world rank> <to world rank> <messages> <bytes>
 * and for collectives one line per call it made:
 *   coll <rank> <name> <bytes sent> <bytes received>
 * The test compares these lines with what parmon recorded. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long g_msgs[64], g_bytes[64];
static int g_rank, g_size;

static void Sent(int to, long bytes) {
  g_msgs[to] += 1;
  g_bytes[to] += bytes;
}

static void Report(void) {
  static int reported;
  if (reported)
    return;
  reported = 1;
  for (int to = 0; to < g_size && to < 64; ++to)
    if (g_msgs[to] > 0)
      printf("sent %d %d %ld %ld\n", g_rank, to, g_msgs[to], g_bytes[to]);
  fflush(stdout);
}

static void PingPong(void) {
  /* Rank 0 and 1: 10 round trips each of sizes 0, 8, 1000, 65536 bytes. */
  static char buf[65536];
  const int sizes[] = {0, 8, 1000, 65536};
  if (g_rank > 1)
    return;
  int peer = 1 - g_rank;
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < 10; ++i) {
      if (g_rank == 0) {
        MPI_Send(buf, sizes[s], MPI_BYTE, peer, s, MPI_COMM_WORLD);
        Sent(peer, sizes[s]);
        MPI_Recv(buf, sizes[s], MPI_BYTE, peer, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Status st;
        MPI_Recv(buf, sizes[s], MPI_BYTE, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Send(buf, sizes[s], MPI_BYTE, peer, s, MPI_COMM_WORLD);
        Sent(peer, sizes[s]);
      }
    }
  }
}

static void Ring(void) {
  /* 5 laps of a token of 3 ints around the ring with Sendrecv on a duplicated communicator. */
  MPI_Comm ring;
  MPI_Comm_dup(MPI_COMM_WORLD, &ring);
  int token[3] = {0, 0, 0};
  int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
  for (int lap = 0; lap < 5; ++lap) {
    int in[3];
    MPI_Sendrecv(token, 3, MPI_INT, next, lap, in, 3, MPI_INT, prev, lap, ring, MPI_STATUS_IGNORE);
    Sent(next, 3 * sizeof(int));
    token[0] = in[0] + 1;
  }
  MPI_Comm_free(&ring);
}

static void AllToAll(void) {
  /* Every rank sends (rank+1)*100 + to bytes to every other rank with Isend/Irecv/Waitall. */
  MPI_Request reqs[128];
  static char sbuf[64][1024], rbuf[64][1024];
  int n = 0;
  for (int p = 0; p < g_size; ++p) {
    if (p == g_rank)
      continue;
    MPI_Irecv(rbuf[p], 1024, MPI_CHAR, p, 42, MPI_COMM_WORLD, &reqs[n++]);
  }
  for (int p = 0; p < g_size; ++p) {
    if (p == g_rank)
      continue;
    int bytes = (g_rank + 1) * 100 + p;
    MPI_Isend(sbuf[p], bytes, MPI_CHAR, p, 42, MPI_COMM_WORLD, &reqs[n++]);
    Sent(p, bytes);
  }
  MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
}

static void Halo(void) {
  /* 1-D periodic halo exchange on a Cartesian communicator, 4 steps of 256 doubles each way,
   * completed with Waitany and Testall. */
  MPI_Comm cart;
  int dims[1] = {g_size}, periods[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  int left, right;
  MPI_Cart_shift(cart, 0, 1, &left, &right);
  int wl, wr, cr;
  MPI_Comm_rank(cart, &cr);
  MPI_Group cg, wg;
  MPI_Comm_group(cart, &cg);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int lr[2] = {left, right}, wlr[2];
  MPI_Group_translate_ranks(cg, 2, lr, wg, wlr);
  wl = wlr[0];
  wr = wlr[1];
  static double edge[2][256], ghost[2][256];
  for (int step = 0; step < 4; ++step) {
    MPI_Request r[4];
    MPI_Irecv(ghost[0], 256, MPI_DOUBLE, left, step, cart, &r[0]);
    MPI_Irecv(ghost[1], 256, MPI_DOUBLE, right, step, cart, &r[1]);
    MPI_Isend(edge[0], 256, MPI_DOUBLE, left, step, cart, &r[2]);
    MPI_Isend(edge[1], 256, MPI_DOUBLE, right, step, cart, &r[3]);
    Sent(wl, 256 * sizeof(double));
    Sent(wr, 256 * sizeof(double));
    int idx;
    MPI_Status st;
    MPI_Waitany(4, r, &idx, &st);
    int flag = 0;
    while (!flag)
      MPI_Testall(4, r, &flag, MPI_STATUSES_IGNORE);
  }
  MPI_Group_free(&cg);
  MPI_Group_free(&wg);
  MPI_Comm_free(&cart);
}

static void Coll(const char* name, long sent, long recv) {
  printf("coll %d %s %ld %ld\n", g_rank, name, sent, recv);
}

static void Collectives(void) {
  /* One call of each family; the expected per-rank bytes follow docs/events.md. */
  const int n = g_size, me = g_rank;
  const long others = n - 1;
  int v[64], w[64], counts[64], displs[64];
  for (int i = 0; i < 64; ++i)
    v[i] = w[i] = i;
  MPI_Barrier(MPI_COMM_WORLD);
  Coll("MPI_Barrier", 0, 0);
  MPI_Bcast(v, 10, MPI_INT, 1, MPI_COMM_WORLD);
  Coll("MPI_Bcast", me == 1 ? 40 * others : 0, me == 1 ? 0 : 40);
  MPI_Reduce(v, w, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  Coll("MPI_Reduce", me == 0 ? 0 : 16, me == 0 ? 16 * others : 0);
  MPI_Allreduce(v, w, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  Coll("MPI_Allreduce", 8, 8);
  MPI_Gather(v, 3, MPI_INT, w, 3, MPI_INT, 0, MPI_COMM_WORLD);
  Coll("MPI_Gather", me == 0 ? 0 : 12, me == 0 ? 12 * others : 0);
  MPI_Scatter(v, 2, MPI_INT, w, 2, MPI_INT, 0, MPI_COMM_WORLD);
  Coll("MPI_Scatter", me == 0 ? 8 * others : 0, me == 0 ? 0 : 8);
  MPI_Allgather(v, 1, MPI_INT, w, 1, MPI_INT, MPI_COMM_WORLD);
  Coll("MPI_Allgather", 4 * others, 4 * others);
  MPI_Alltoall(v, 1, MPI_INT, w, 1, MPI_INT, MPI_COMM_WORLD);
  Coll("MPI_Alltoall", 4 * others, 4 * others);
  /* Rank me sends me+1 ints to every rank and so receives i+1 ints from rank i. */
  int rcounts[64];
  long recvv = 0;
  for (int i = 0; i < n; ++i) {
    counts[i] = me + 1;
    rcounts[i] = i + 1;
    displs[i] = i * 8;
    if (i != me)
      recvv += 4 * (i + 1);
  }
  MPI_Alltoallv(v, counts, displs, MPI_INT, w, rcounts, displs, MPI_INT, MPI_COMM_WORLD);
  Coll("MPI_Alltoallv", 4L * (me + 1) * others, recvv);
  MPI_Scan(v, w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  Coll("MPI_Scan", 4, 4);
  MPI_Request r;
  MPI_Iallreduce(v, w, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  Coll("MPI_Iallreduce", 12, 12);
  MPI_Ibarrier(MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  Coll("MPI_Ibarrier", 0, 0);
}

static void Early(void) {
  /* The last rank sends 3 messages of 512 bytes to rank 0 and dies without MPI_Finalize. mpirun
   * then kills the others and may drop what they printed but it had not forwarded yet (on a
   * loaded machine the test saw no line at all): rank 0 prints first and then acknowledges, and
   * the dying rank leaves a moment for its own lines and rank 0's to be forwarded. */
  static char buf[512];
  if (g_rank == g_size - 1) {
    for (int i = 0; i < 3; ++i) {
      MPI_Send(buf, 512, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
      Sent(0, 512);
    }
    Report();
    MPI_Recv(buf, 1, MPI_BYTE, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    usleep(300000);
    _exit(0);
  }
  if (g_rank == 0) {
    for (int i = 0; i < 3; ++i)
      MPI_Recv(buf, 512, MPI_BYTE, g_size - 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Sent(g_size - 1, 1);
    Report();
    MPI_Send(buf, 1, MPI_BYTE, g_size - 1, 10, MPI_COMM_WORLD);
  }
}

/* 20,000 barriers; rank 0 prints how long they took: barriers <count> <ns>. */
static void Barriers(void) {
  enum { kBarriers = 20000 };
  double t0 = MPI_Wtime();
  for (int i = 0; i < kBarriers; ++i)
    MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0)
    printf("barriers %d %.0f\n", kBarriers, (MPI_Wtime() - t0) * 1e9);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: mpi_patterns pingpong|ring|alltoall|halo|collectives|early|barriers\n");
    return 2;
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const char* p = argv[1];
  if (strcmp(p, "pingpong") == 0)
    PingPong();
  else if (strcmp(p, "ring") == 0)
    Ring();
  else if (strcmp(p, "alltoall") == 0)
    AllToAll();
  else if (strcmp(p, "halo") == 0)
    Halo();
  else if (strcmp(p, "collectives") == 0)
    Collectives();
  else if (strcmp(p, "early") == 0)
    Early();
  else if (strcmp(p, "barriers") == 0)
    Barriers();
  else {
    if (g_rank == 0)
      fprintf(stderr, "mpi_patterns: unknown pattern '%s'\n", p);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  Report();
  if (strcmp(p, "early") == 0) {
    /* Survivors do not call MPI_Finalize either (it would wait for the dead rank). They outlive
     * it, so that its receive of the acknowledgement is not cut short by mpirun seeing them go. */
    usleep(900000);
    _exit(0);
  }
  MPI_Finalize();
  return 0;
}
