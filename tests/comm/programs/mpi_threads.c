/* MPI calls from several threads at once under MPI_THREAD_MULTIPLE (issue 17, item 3). Every
 * rank runs T threads; thread t of rank r exchanges M messages with thread t of both ring
 * neighbours at the same time as the other threads do (tag = t keeps the threads' streams apart):
 * blocking MPI_Send/MPI_Recv on odd iterations, MPI_Isend/MPI_Irecv + MPI_Waitall on even ones,
 * sizes varying by iteration. Each thread prints what it did, with its kernel thread id:
 *   thread RANK TID SENT_MESSAGES SENT_BYTES RECEIVED_MESSAGES RECEIVED_BYTES
 *   sent FROM TO MESSAGES BYTES (per rank, as the other MPI programs print it)
 * Exits 3 when the MPI does not provide MPI_THREAD_MULTIPLE.
 * usage: mpi_threads [threads, default 3] [messages per thread, default 200] */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int g_rank, g_size, g_messages;

struct Counts {
  int thread;
  long tid;
  long sent, sent_bytes, received, received_bytes;
};

static int Count(int thread, int i) {
  return (thread * 131 + i * 17) % 2000 + 1; /* ints */
}

static void* Worker(void* arg) {
  struct Counts* c = arg;
  c->tid = (long)syscall(SYS_gettid);
  const int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
  int* out = malloc(2000 * sizeof(int));
  int* in = malloc(2000 * sizeof(int));
  for (int i = 0; i < g_messages; ++i) {
    const int n = Count(c->thread, i);
    for (int k = 0; k < n; ++k)
      out[k] = g_rank * 1000000 + c->thread * 10000 + k;
    if (i % 2) {
      /* Even ranks send first: no cycle of blocking sends. */
      if (g_rank % 2 == 0) {
        MPI_Send(out, n, MPI_INT, right, c->thread, MPI_COMM_WORLD);
        MPI_Recv(in, n, MPI_INT, left, c->thread, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(in, n, MPI_INT, left, c->thread, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(out, n, MPI_INT, right, c->thread, MPI_COMM_WORLD);
      }
    } else {
      MPI_Request r[2];
      MPI_Irecv(in, n, MPI_INT, left, c->thread, MPI_COMM_WORLD, &r[0]);
      MPI_Isend(out, n, MPI_INT, right, c->thread, MPI_COMM_WORLD, &r[1]);
      MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    const int sender = left;
    if (in[0] != sender * 1000000 + c->thread * 10000) {
      fprintf(stderr, "mpi_threads: rank %d thread %d got a message for another thread\n", g_rank,
              c->thread);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    c->sent += 1;
    c->sent_bytes += (long)n * (long)sizeof(int);
    c->received += 1;
    c->received_bytes += (long)n * (long)sizeof(int);
  }
  free(out);
  free(in);
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 3;
  g_messages = argc > 2 ? atoi(argv[2]) : 200;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "mpi_threads: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
    MPI_Finalize();
    return 3;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  if (g_size < 2 || threads < 1 || threads > 64) {
    MPI_Finalize();
    return 2;
  }
  pthread_t t[64];
  struct Counts c[64];
  memset(c, 0, sizeof c);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < threads; ++i) {
    c[i].thread = i;
    pthread_create(&t[i], NULL, Worker, &c[i]);
  }
  long sent = 0, bytes = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(t[i], NULL);
    sent += c[i].sent;
    bytes += c[i].sent_bytes;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < threads; ++i)
    printf("thread %d %ld %ld %ld %ld %ld\n", g_rank, c[i].tid, c[i].sent, c[i].sent_bytes,
           c[i].received, c[i].received_bytes);
  printf("sent %d %d %ld %ld\n", g_rank, (g_rank + 1) % g_size, sent, bytes);
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
