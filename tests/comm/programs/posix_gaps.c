/* The POSIX calls libparmon_posix and libparmon_pthread learned late (issue 17, item 3), each
 * used in a way whose exact counts the program knows, so a test can compare them with what was
 * recorded:
 *
 *   posix_gaps mmsg N      a child sends N datagrams over a unix datagram socketpair with
 *                          sendmmsg (batches of up to 8); the parent receives them with recvmmsg.
 *                          "wrote mmsg PID MESSAGES BYTES", "read mmsg PID MESSAGES BYTES"
 *   posix_gaps splice N    the parent sendfile()s a regular file of N bytes into a unix stream
 *                          socket; child 1 splice()s from the socket into a pipe; child 2 reads
 *                          the pipe. "sendfile PID CALLS BYTES", "splice PID CALLS BYTES" (calls
 *                          that moved bytes), "read PID CALLS BYTES"
 *   posix_gaps stdio N     a child writes N messages to a pipe through stdio (printf, fputs,
 *                          fwrite, putc, puts, fprintf: each followed by fflush), one write(2)
 *                          of its own, and a last printf that only the flush at exit writes;
 *                          the parent reads the pipe. "stdio PID FLUSHES BYTES", "direct PID
 *                          CALLS BYTES", "read PID CALLS BYTES"
 *   posix_gaps spawn N S   posix_spawn()s spawn_child N S with its stdout on a pipe (N writes of
 *                          S bytes) and reads it; then posix_spawnp()s "true".
 *                          "spawned PID", "read PID CALLS BYTES", "spawnedp PID", "parent PID"
 *   posix_gaps spin R      the main thread holds a spinlock while a second thread spins on it,
 *                          R rounds; it lets go only once the spinner has used 20 ms of CPU
 *                          since it said it was about to lock (so every round is contended);
 *                          also 1000 uncontended lock/unlock pairs on a second spinlock.
 *                          "spinner TID LOCK ROUNDS MEASURED_NS MIN_SPIN_NS", "free LOCK" */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static void Die(const char* what) {
  fprintf(stderr, "posix_gaps: %s: %s\n", what, strerror(errno));
  _exit(1);
}

static void Wait(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "posix_gaps: child %d failed\n", (int)pid);
    exit(1);
  }
}

/* ---- sendmmsg / recvmmsg ---------------------------------------------------------------- */
static size_t DatagramSize(int i) {
  return (size_t)((i * 53) % 700 + 1);
}

static int Mmsg(int n) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0)
    Die("socketpair");
  pid_t child = fork();
  if (child < 0)
    Die("fork");
  if (child == 0) {
    close(sv[1]);
    static char data[8][700];
    long messages = 0, bytes = 0;
    int i = 0;
    while (i < n) {
      struct mmsghdr v[8];
      struct iovec iov[8];
      int k = 0;
      for (; k < 8 && i + k < n; ++k) {
        iov[k].iov_base = data[k];
        iov[k].iov_len = DatagramSize(i + k);
        memset(data[k], 'a' + k, iov[k].iov_len);
        memset(&v[k], 0, sizeof v[k]);
        v[k].msg_hdr.msg_iov = &iov[k];
        v[k].msg_hdr.msg_iovlen = 1;
      }
      int sent = sendmmsg(sv[0], v, (unsigned)k, 0);
      if (sent < 0 && errno == EINTR)
        continue;
      if (sent <= 0)
        Die("sendmmsg");
      for (int j = 0; j < sent; ++j)
        bytes += v[j].msg_len;
      messages += sent;
      i += sent;
    }
    printf("wrote mmsg %d %ld %ld\n", (int)getpid(), messages, bytes);
    fflush(stdout);
    _exit(0);
  }
  close(sv[0]);
  static char buf[8][1024];
  long messages = 0, bytes = 0;
  while (messages < n) {
    struct mmsghdr v[8];
    struct iovec iov[8];
    for (int k = 0; k < 8; ++k) {
      iov[k].iov_base = buf[k];
      iov[k].iov_len = sizeof buf[k];
      memset(&v[k], 0, sizeof v[k]);
      v[k].msg_hdr.msg_iov = &iov[k];
      v[k].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(sv[1], v, 8, MSG_WAITFORONE, NULL);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      Die("recvmmsg");
    for (int j = 0; j < got; ++j)
      bytes += v[j].msg_len;
    messages += got;
  }
  Wait(child);
  printf("read mmsg %d %ld %ld\n", (int)getpid(), messages, bytes);
  return 0;
}

/* ---- sendfile / splice -------------------------------------------------------------------- */
static int Splice(long n) {
  char path[] = "/tmp/posix_gaps_XXXXXX";
  int file = mkstemp(path);
  if (file < 0)
    Die("mkstemp");
  unlink(path);
  static char block[65536];
  for (long left = n; left > 0;) {
    size_t k = left < (long)sizeof block ? (size_t)left : sizeof block;
    memset(block, 'f', k);
    ssize_t w = write(file, block, k);
    if (w <= 0)
      Die("write file");
    left -= w;
  }
  int sv[2], p[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || pipe(p) != 0)
    Die("socketpair/pipe");
  pid_t splicer = fork();
  if (splicer < 0)
    Die("fork");
  if (splicer == 0) {
    close(sv[0]);
    close(p[0]);
    long calls = 0, bytes = 0;
    for (;;) {
      ssize_t m = splice(sv[1], NULL, p[1], NULL, 65536, SPLICE_F_MOVE);
      if (m < 0 && errno == EINTR)
        continue;
      if (m < 0)
        Die("splice");
      if (m == 0)
        break;
      calls++;
      bytes += m;
    }
    printf("splice %d %ld %ld\n", (int)getpid(), calls, bytes);
    fflush(stdout);
    _exit(0);
  }
  pid_t reader = fork();
  if (reader < 0)
    Die("fork");
  if (reader == 0) {
    close(sv[0]);
    close(sv[1]);
    close(p[1]);
    long calls = 0, bytes = 0;
    static char buf[65536];
    for (;;) {
      ssize_t r = read(p[0], buf, sizeof buf);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        Die("read");
      if (r == 0)
        break;
      calls++;
      bytes += r;
    }
    printf("read %d %ld %ld\n", (int)getpid(), calls, bytes);
    fflush(stdout);
    _exit(0);
  }
  close(sv[1]);
  close(p[0]);
  close(p[1]);
  off_t offset = 0;
  long calls = 0, bytes = 0;
  while (offset < n) {
    ssize_t s = sendfile(sv[0], file, &offset, (size_t)(n - offset));
    if (s < 0 && errno == EINTR)
      continue;
    if (s <= 0)
      Die("sendfile");
    calls++;
    bytes += s;
  }
  close(sv[0]);
  Wait(splicer);
  Wait(reader);
  printf("sendfile %d %ld %ld\n", (int)getpid(), calls, bytes);
  return 0;
}

/* ---- stdio -------------------------------------------------------------------------------- */
static int Stdio(int n) {
  int p[2];
  if (pipe(p) != 0)
    Die("pipe");
  fflush(stdout);
  pid_t writer = fork();
  if (writer < 0)
    Die("fork");
  if (writer == 0) {
    close(p[0]);
    int harness = dup(1);  // where the oracle goes
    if (harness < 0 || dup2(p[1], 1) != 1)
      Die("dup2");
    close(p[1]);
    static char buf[1 << 16];
    if (setvbuf(stdout, buf, _IOFBF, sizeof buf) != 0)
      Die("setvbuf");
    FILE* side = fdopen(dup(1), "w");  // a second stream on the same pipe
    if (side == NULL)
      Die("fdopen");
    long flushes = 0, bytes = 0;
    char text[600];
    for (int i = 0; i < n; ++i) {
      size_t len = (size_t)((i * 41) % 500 + 1);
      memset(text, 'a' + i % 26, len);
      text[len] = '\0';
      FILE* f = stdout;
      switch (i % 6) {
        case 0:
          bytes += printf("%d %s\n", i, text);
          break;
        case 1:
          if (fputs(text, stdout) < 0)
            Die("fputs");
          bytes += (long)len;
          break;
        case 2:
          bytes += (long)fwrite(text, 1, len, stdout);
          break;
        case 3:
          for (size_t j = 0; j < len; ++j)
            if (putc(text[j], stdout) != EOF)
              bytes++;
          break;
        case 4:
          if (puts(text) < 0)
            Die("puts");
          bytes += (long)len + 1;
          break;
        default:
          f = side;
          bytes += fprintf(side, "side %s\n", text);
          break;
      }
      if (fflush(f) != 0)
        Die("fflush");
      flushes++;
    }
    // One write(2) of its own between flushes: counted as a write, not as stdio.
    if (write(1, "direct\n", 7) != 7)
      Die("write");
    // Left in the buffer: written by the flush at exit.
    bytes += printf("tail %d\n", n);
    flushes++;
    dprintf(harness, "stdio %d %ld %ld\ndirect %d 1 7\n", (int)getpid(), flushes, bytes,
            (int)getpid());
    exit(0);
  }
  close(p[1]);
  long calls = 0, bytes = 0;
  static char buf[65536];
  for (;;) {
    ssize_t r = read(p[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      Die("read");
    if (r == 0)
      break;
    calls++;
    bytes += r;
  }
  Wait(writer);
  printf("read %d %ld %ld\n", (int)getpid(), calls, bytes);
  return 0;
}

/* ---- posix_spawn -------------------------------------------------------------------------- */
static int Spawn(const char* self, const char* n, const char* size) {
  int p[2];
  if (pipe(p) != 0)
    Die("pipe");
  char child_path[4096];
  snprintf(child_path, sizeof child_path, "%s", self);
  char* slash = strrchr(child_path, '/');
  snprintf(slash ? slash + 1 : child_path,
           sizeof child_path - (size_t)(slash ? slash + 1 - child_path : 0), "spawn_child");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  posix_spawn_file_actions_addclose(&fa, p[1]);
  char* argv[] = {child_path, (char*)n, (char*)size, NULL};
  pid_t child = 0;
  int rc = posix_spawn(&child, child_path, &fa, NULL, argv, environ);
  if (rc != 0) {
    errno = rc;
    Die("posix_spawn");
  }
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  long calls = 0, bytes = 0;
  static char buf[65536];
  for (;;) {
    ssize_t r = read(p[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      Die("read");
    if (r == 0)
      break;
    calls++;
    bytes += r;
  }
  Wait(child);
  char* targv[] = {"true", NULL};
  pid_t t = 0;
  rc = posix_spawnp(&t, "true", NULL, NULL, targv, environ);
  if (rc != 0) {
    errno = rc;
    Die("posix_spawnp");
  }
  Wait(t);
  printf("spawned %d\nread %d %ld %ld\nspawnedp %d\nparent %d\n", (int)child, (int)getpid(), calls,
         bytes, (int)t, (int)getpid());
  return 0;
}

/* ---- spinlocks ---------------------------------------------------------------------------- */
static pthread_spinlock_t g_lock, g_free;
static atomic_int g_go, g_ready, g_done;
static atomic_long g_measured;
static atomic_int g_tid;
static int g_rounds;
static clockid_t g_spinner_clock;

static uint64_t NowNs(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void* Spinner(void* arg) {
  (void)arg;
  atomic_store(&g_tid, (int)syscall(SYS_gettid));
  for (int r = 1; r <= g_rounds; ++r) {
    while (atomic_load(&g_go) < r)
      sched_yield();
    atomic_store(&g_ready, r);
    uint64_t t0 = NowNs(CLOCK_MONOTONIC);
    pthread_spin_lock(&g_lock);
    uint64_t t1 = NowNs(CLOCK_MONOTONIC);
    pthread_spin_unlock(&g_lock);
    atomic_fetch_add(&g_measured, (long)(t1 - t0));
    atomic_store(&g_done, r);
  }
  return NULL;
}

static int Spin(int rounds) {
  const uint64_t kSpinCpu = 20000000;  // ns of the spinner's CPU per round
  g_rounds = rounds;
  pthread_spin_init(&g_lock, PTHREAD_PROCESS_PRIVATE);
  pthread_spin_init(&g_free, PTHREAD_PROCESS_PRIVATE);
  pthread_t t;
  if (pthread_create(&t, NULL, Spinner, NULL) != 0)
    Die("pthread_create");
  if (pthread_getcpuclockid(t, &g_spinner_clock) != 0)
    Die("pthread_getcpuclockid");
  for (int r = 1; r <= rounds; ++r) {
    pthread_spin_lock(&g_lock);  // free: the spinner waits for g_go
    atomic_store(&g_go, r);
    while (atomic_load(&g_ready) < r)
      sched_yield();
    // The spinner's CPU clock from after it said it was ready: only trying and spinning on the
    // lock can use 20 ms of it, so it is spinning when the lock is let go.
    uint64_t from = NowNs(g_spinner_clock);
    while (NowNs(g_spinner_clock) < from + kSpinCpu) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    pthread_spin_unlock(&g_lock);
    while (atomic_load(&g_done) < r)
      sched_yield();
    for (int i = 0; i < 1000; ++i) {
      pthread_spin_lock(&g_free);
      pthread_spin_unlock(&g_free);
    }
  }
  pthread_join(t, NULL);
  printf("spinner %d %lu %d %ld %lu\nfree %lu\n", atomic_load(&g_tid),
         (unsigned long)(uintptr_t)&g_lock, rounds, atomic_load(&g_measured),
         (unsigned long)(rounds * kSpinCpu), (unsigned long)(uintptr_t)&g_free);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: posix_gaps mmsg|splice|stdio|spawn|spin N [S]\n");
    return 2;
  }
  const char* mode = argv[1];
  if (!strcmp(mode, "mmsg"))
    return Mmsg(atoi(argv[2]));
  if (!strcmp(mode, "splice"))
    return Splice(atol(argv[2]));
  if (!strcmp(mode, "stdio"))
    return Stdio(atoi(argv[2]));
  if (!strcmp(mode, "spawn") && argc >= 4)
    return Spawn(argv[0], argv[2], argv[3]);
  if (!strcmp(mode, "spin"))
    return Spin(atoi(argv[2]));
  fprintf(stderr, "posix_gaps: unknown mode %s\n", mode);
  return 2;
}
