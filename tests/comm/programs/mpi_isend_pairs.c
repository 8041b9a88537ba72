/* Small nonblocking sends that MPI may complete inside MPI_Isend (issue 10): Open MPI returns
 * the same handle (its static "empty" request) for every small send it sends at once, MPICH a
 * built-in completed request, so the request table of libparmon_mpi sees one handle value for
 * several live requests, and one completion array may hold the same handle twice.
 *
 * usage: mpi_isend_pairs [ITERATIONS]   (any number of ranks; a ring)
 *
 * Each iteration: two Irecvs (from the left and right neighbour), two Isends of a few bytes
 * (to the right and left), then the four requests are completed one of four ways (Waitall,
 * Testall loop, Waitsome loop, Wait one by one). Every rank prints, as the program counts it:
 *   sent <from world rank> <to world rank> <messages> <bytes>
 *   isends <rank> <number of MPI_Isend calls>
 *   samehandle <rank> <iterations whose two Isends returned the same handle>
 * and the two handles of the first iteration (informational). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long g_msgs[64], g_bytes[64];

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int iters = argc > 1 ? atoi(argv[1]) : 200;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  char out[2][16], in[2][16];
  memset(out, 7, sizeof out);
  long isends = 0, same = 0;
  for (int it = 0; it < iters; ++it) {
    int n0 = 1 + it % 7, n1 = 1 + (it * 3) % 11;
    MPI_Request r[4];
    MPI_Irecv(in[0], 16, MPI_BYTE, left, 0, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(in[1], 16, MPI_BYTE, right, 1, MPI_COMM_WORLD, &r[1]);
    MPI_Isend(out[0], n0, MPI_BYTE, right, 0, MPI_COMM_WORLD, &r[2]);
    MPI_Isend(out[1], n1, MPI_BYTE, left, 1, MPI_COMM_WORLD, &r[3]);
    isends += 2;
    if (right < 64) {
      g_msgs[right] += 1;
      g_bytes[right] += n0;
    }
    if (left < 64) {
      g_msgs[left] += 1;
      g_bytes[left] += n1;
    }
    if (r[2] == r[3])
      same += 1;
    if (it == 0)
      printf("handles %d %p %p %p %p\n", rank, (void*)(size_t)r[0], (void*)(size_t)r[1],
             (void*)(size_t)r[2], (void*)(size_t)r[3]);
    switch (it % 4) {
      case 0:
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        break;
      case 1: {
        int flag = 0;
        while (!flag)
          MPI_Testall(4, r, &flag, MPI_STATUSES_IGNORE);
        break;
      }
      case 2: {
        int left_to_do = 4;
        while (left_to_do > 0) {
          int outcount = 0, idx[4];
          MPI_Waitsome(4, r, &outcount, idx, MPI_STATUSES_IGNORE);
          if (outcount == MPI_UNDEFINED)
            break;
          left_to_do -= outcount;
        }
        break;
      }
      default:
        for (int i = 3; i >= 0; --i)
          MPI_Wait(&r[i], MPI_STATUS_IGNORE);
        break;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int to = 0; to < size && to < 64; ++to)
    if (g_msgs[to] > 0)
      printf("sent %d %d %ld %ld\n", rank, to, g_msgs[to], g_bytes[to]);
  printf("isends %d %ld\n", rank, isends);
  printf("samehandle %d %ld\n", rank, same);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
