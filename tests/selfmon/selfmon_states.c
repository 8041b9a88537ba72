/* selfmon_states: threads in known states, watched through parmon's self-monitoring API
 * (parmon.h), whose read the test holds against `parmon report` for the same interval.
 *
 * Threads: "spin" (running), "pair-0" and "pair-1" (spinning, both pinned to one CPU: half
 * running, half queued), "sleeper" (nanosleep: timer), "locker" (blocked on a mutex main holds:
 * lock), "reader" (blocked reading a pipe main writes a byte to every 20 ms: comm). Main watches
 * them all, lets them settle, reads a baseline, waits MEASURE_MS, reads again
 * (PARMON_SINCE_LAST_READ) and prints one line per thread:
 *   figures NAME TID START_NS END_NS ELAPSED_NS S0 .. S6 CPU_NS UTILISATION CPU_BUSY FLAGS
 * then one "last NAME ..." line per thread from PARMON_LAST_INTERVAL, and one
 *   kernel NAME CPU_NS DELAY_NS
 * line per thread: what the thread's schedstat (the kernel's own clocks) gained between the two
 * reads, on a CPU and queued for one. Not recorded, it prints
 * "not recorded ERROR" and exits 3. Argument: MEASURE_MS (default 1500). */
#define _GNU_SOURCE
#include <parmon/parmon.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { kSpin, kPair0, kPair1, kSleeper, kLocker, kReader, kThreads };
static const char* const kNames[kThreads] = {"spin",    "pair-0", "pair-1",
                                             "sleeper", "locker", "reader"};
static atomic_int g_tid[kThreads];
static atomic_int g_stop;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_pipe[2];
static int g_pair_cpu = -1;

static void SleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void* Thread(void* arg) {
  const int k = (int)(long)arg;
  parmon_thread_name(kNames[k]);
  if ((k == kPair0 || k == kPair1) && g_pair_cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(g_pair_cpu, &one);
    sched_setaffinity(0, sizeof one, &one);
  }
  atomic_store(&g_tid[k], parmon_thread_id());
  volatile unsigned long x = 0;
  char c;
  switch (k) {
    case kSpin:
    case kPair0:
    case kPair1:
      while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
        ++x;
      break;
    case kSleeper:
      while (!atomic_load(&g_stop))
        SleepMs(2);
      break;
    case kLocker:
      pthread_mutex_lock(&g_lock);
      pthread_mutex_unlock(&g_lock);
      break;
    case kReader:
      while (read(g_pipe[0], &c, 1) == 1 && c != 'q') {
      }
      break;
  }
  return NULL;
}

/* The thread's schedstat: ns on a CPU, ns queued for one. */
static void SchedStat(int tid, unsigned long long* cpu, unsigned long long* delay) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  FILE* f = fopen(path, "r");
  *cpu = *delay = 0;
  if (f == NULL)
    return;
  if (fscanf(f, "%llu %llu", cpu, delay) != 2)
    *cpu = *delay = 0;
  fclose(f);
}

static void Print(const char* what, const parmon_thread_figures* f, int k) {
  printf("%s %s %d %llu %llu %llu", what, kNames[k], f->tid, (unsigned long long)f->start_ns,
         (unsigned long long)f->end_ns, (unsigned long long)f->elapsed_ns);
  for (int s = 0; s < PARMON_STATE_COUNT; ++s)
    printf(" %llu", (unsigned long long)f->states_ns[s]);
  printf(" %llu %.4f %.4f %u\n", (unsigned long long)f->cpu_ns, f->utilisation, f->cpu_busy,
         f->flags);
}

int main(int argc, char** argv) {
  const long measure_ms = argc > 1 ? atol(argv[1]) : 1500;
  parmon_monitor* m = NULL;
  int rc = parmon_monitor_open(&m);
  if (rc != PARMON_OK) {
    printf("not recorded %d\n", rc);
    return 3;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  for (int c = CPU_SETSIZE - 1; c >= 0; --c)
    if (CPU_ISSET(c, &allowed)) {
      g_pair_cpu = c; /* the last CPU it may use */
      break;
    }
  if (pipe(g_pipe) != 0)
    return 1;
  pthread_mutex_lock(&g_lock);
  pthread_t threads[kThreads];
  for (long k = 0; k < kThreads; ++k)
    pthread_create(&threads[k], NULL, Thread, (void*)k);
  for (int k = 0; k < kThreads; ++k) {
    while (atomic_load(&g_tid[k]) == 0)
      SleepMs(1);
    if (parmon_monitor_watch(m, atomic_load(&g_tid[k]), NULL) != PARMON_OK) {
      printf("watch failed\n");
      return 1;
    }
  }
  SleepMs(300); /* every thread in its state, seen by the sampler */
  parmon_thread_figures f[kThreads];
  unsigned long long cpu0[kThreads], delay0[kThreads], cpu1[kThreads], delay1[kThreads];
  parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, kThreads);
  for (int k = 0; k < kThreads; ++k)
    SchedStat(atomic_load(&g_tid[k]), &cpu0[k], &delay0[k]);
  for (long t = 0; t < measure_ms; t += 20) {
    SleepMs(20);
    if (write(g_pipe[1], "x", 1) != 1)
      return 1;
  }
  /* The last interval is read right after (a sampler period ending between the two reads
   * would put its end past the span's), the kernel's clocks then. */
  parmon_thread_figures last[kThreads];
  int n = parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, kThreads);
  int n_last = parmon_monitor_read(m, PARMON_LAST_INTERVAL, last, kThreads);
  for (int k = 0; k < kThreads; ++k)
    SchedStat(atomic_load(&g_tid[k]), &cpu1[k], &delay1[k]);
  for (int k = 0; k < n; ++k)
    Print("figures", &f[k], k);
  for (int k = 0; k < kThreads; ++k)
    printf("kernel %s %llu %llu\n", kNames[k], cpu1[k] - cpu0[k], delay1[k] - delay0[k]);
  for (int k = 0; k < n_last; ++k)
    Print("last", &last[k], k);
  fflush(stdout);
  atomic_store(&g_stop, 1);
  pthread_mutex_unlock(&g_lock);
  if (write(g_pipe[1], "q", 1) != 1)
    return 1;
  for (int k = 0; k < kThreads; ++k)
    pthread_join(threads[k], NULL);
  parmon_monitor_close(m);
  return 0;
}
