/* Threads handing work to each other through mutexes and condition variables, with known
 * counts, for the libparmon_pthread tests:
 *  - ping and pong alternate a token `rounds` times: ping signals `to_pong`, pong signals
 *    `to_ping`; each counts the pthread_cond_wait calls it makes and the signals it sends;
 *  - three workers meet at a barrier `rounds / 10` times;
 *  - one thread blocks on a mutex main holds until the kernel shows it asleep (a certain wait);
 *  - main joins every thread.
 * Output lines: `cond <name> <signaller tid> <waiter tid> <signals> <waits>`,
 * `barrier <tid> <waits>` per worker, `contended <object address> <tid>`, `joins <tid> <n>`.
 * usage: sync_handoff [rounds, default 1000] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_to_ping = PTHREAD_COND_INITIALIZER, g_to_pong = PTHREAD_COND_INITIALIZER;
static int g_turn = 0; /* 0: ping's turn, 1: pong's */
static int g_rounds = 1000;
static pthread_barrier_t g_barrier;
static pthread_mutex_t g_contended = PTHREAD_MUTEX_INITIALIZER;
static volatile int g_contender_tid = 0;

struct Side {
  int me; /* 0 ping, 1 pong */
  pthread_cond_t* wait_on;
  pthread_cond_t* signal;
  long waits, signals;
  int tid;
};

static int Tid(void) {
  return (int)syscall(SYS_gettid);
}

static void* PingPong(void* arg) {
  struct Side* s = (struct Side*)arg;
  s->tid = Tid();
  for (int i = 0; i < g_rounds; ++i) {
    pthread_mutex_lock(&g_lock);
    while (g_turn != s->me) {
      pthread_cond_wait(s->wait_on, &g_lock);
      ++s->waits;
    }
    g_turn = 1 - s->me;
    pthread_cond_signal(s->signal);
    ++s->signals;
    pthread_mutex_unlock(&g_lock);
  }
  return NULL;
}

struct Worker {
  int tid;
  long waits;
};

static void* BarrierWorker(void* arg) {
  struct Worker* w = (struct Worker*)arg;
  w->tid = Tid();
  for (int i = 0; i < g_rounds / 10; ++i) {
    pthread_barrier_wait(&g_barrier);
    ++w->waits;
  }
  return NULL;
}

static void* Contender(void* arg) {
  (void)arg;
  g_contender_tid = Tid();
  pthread_mutex_lock(&g_contended);
  pthread_mutex_unlock(&g_contended);
  return NULL;
}

/* The thread's scheduler state letter from /proc ('S' when it sleeps in the kernel). */
static char ThreadState(int tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL)
    return '?';
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char* close = strrchr(buf, ')');
  return close && close[1] == ' ' ? close[2] : '?';
}

int main(int argc, char** argv) {
  if (argc > 1)
    g_rounds = atoi(argv[1]);
  if (g_rounds < 10) {
    fprintf(stderr, "sync_handoff: rounds must be at least 10\n");
    return 2;
  }
  /* A certain mutex wait: the contender blocks until main, holding the lock, has seen it asleep. */
  pthread_mutex_lock(&g_contended);
  pthread_t contender;
  pthread_create(&contender, NULL, Contender, NULL);
  while (g_contender_tid == 0)
    sched_yield();
  for (int tries = 0; ThreadState(g_contender_tid) != 'S'; ++tries) {
    if (tries > 20000) {
      fprintf(stderr, "sync_handoff: the contender never blocked\n");
      return 1;
    }
    usleep(500);
  }
  pthread_mutex_unlock(&g_contended);

  struct Side ping = {0, &g_to_ping, &g_to_pong, 0, 0, 0};
  struct Side pong = {1, &g_to_pong, &g_to_ping, 0, 0, 0};
  pthread_t threads[5];
  pthread_create(&threads[0], NULL, PingPong, &ping);
  pthread_create(&threads[1], NULL, PingPong, &pong);
  struct Worker workers[3];
  memset(workers, 0, sizeof workers);
  pthread_barrier_init(&g_barrier, NULL, 3);
  for (int i = 0; i < 3; ++i)
    pthread_create(&threads[2 + i], NULL, BarrierWorker, &workers[i]);
  for (int i = 0; i < 5; ++i)
    pthread_join(threads[i], NULL);
  pthread_join(contender, NULL);
  printf("cond to_pong %d %d %ld %ld\n", ping.tid, pong.tid, ping.signals, pong.waits);
  printf("cond to_ping %d %d %ld %ld\n", pong.tid, ping.tid, pong.signals, ping.waits);
  for (int i = 0; i < 3; ++i)
    printf("barrier %d %ld\n", workers[i].tid, workers[i].waits);
  printf("contended %llu %d\n", (unsigned long long)(uintptr_t)&g_contended, g_contender_tid);
  printf("conds %llu %llu\n", (unsigned long long)(uintptr_t)&g_to_pong,
         (unsigned long long)(uintptr_t)&g_to_ping);
  printf("joins %d %d\n", Tid(), 6);
  return 0;
}
