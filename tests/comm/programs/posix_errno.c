/* Checks, from inside a recorded program, that parmon's POSIX and pthread wrappers return what
 * the real functions return and leave errno as the real functions leave it: errno set before a
 * successful call survives it, and failing calls report their own errno. Prints "ok" or the
 * first check that failed (exit status 1). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int g_failed = 0;

static void Check(int ok, const char* what) {
  if (!ok && !g_failed) {
    printf("failed: %s\n", what);
    g_failed = 1;
  }
}

static sem_t g_sem;

static void* PostLater(void* arg) {
  (void)arg;
  usleep(20000);
  sem_post(&g_sem);
  return NULL;
}

int main(void) {
  int fds[2];
  char c = 'x';
  Check(pipe(fds) == 0, "pipe");

  errno = 1234;
  Check(write(fds[1], &c, 1) == 1 && errno == 1234, "write keeps errno");
  errno = 1234;
  Check(read(fds[0], &c, 1) == 1 && errno == 1234, "read keeps errno");
  errno = 1234;
  struct pollfd p = {fds[0], POLLIN, 0};
  Check(poll(&p, 1, 0) == 0 && errno == 1234, "poll keeps errno");
  errno = 1234;
  struct timespec ts = {0, 1000};
  Check(nanosleep(&ts, NULL) == 0 && errno == 1234, "nanosleep keeps errno");

  errno = 0;
  Check(read(-1, &c, 1) == -1 && errno == EBADF, "read(-1) fails with EBADF");
  errno = 0;
  Check(recv(fds[0], &c, 1, 0) == -1 && errno == ENOTSOCK, "recv on a pipe fails with ENOTSOCK");
  errno = 0;
  Check(close(-1) == -1 && errno == EBADF, "close(-1) fails with EBADF");

  /* A semaphore wait that must block: the wrapper's try-wait fails with EAGAIN first. */
  sem_init(&g_sem, 0, 0);
  pthread_t t;
  pthread_create(&t, NULL, PostLater, NULL);
  errno = 1234;
  Check(sem_wait(&g_sem) == 0 && errno == 1234, "sem_wait that blocked keeps errno");
  errno = 1234;
  Check(pthread_join(t, NULL) == 0 && errno == 1234, "pthread_join keeps errno");
  errno = 0;
  struct timespec past = {0, 0};
  Check(sem_timedwait(&g_sem, &past) == -1 && errno == ETIMEDOUT,
        "sem_timedwait past its deadline fails with ETIMEDOUT");

  /* An error-checking mutex locked twice by its owner: EDEADLK, through the busy path. */
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_t m;
  pthread_mutex_init(&m, &a);
  Check(pthread_mutex_lock(&m) == 0, "lock a free mutex");
  Check(pthread_mutex_lock(&m) == EDEADLK, "relock an error-checking mutex: EDEADLK");
  Check(pthread_mutex_unlock(&m) == 0, "unlock");

  close(fds[0]);
  close(fds[1]);
  if (!g_failed)
    printf("ok\n");
  return g_failed;
}
