/* A pipeline of five processes that pass numbered messages of known sizes along four kinds of
 * channel, then report exactly what each process did, so a test can compare it with what
 * libparmon_posix recorded:
 *
 *   producer --pipe--> relay1 --unix socketpair--> relay2 --TCP loopback--> relay3 --FIFO--> main
 *
 * Each writer writes every message with one write()/send() call (retrying short writes, which it
 * counts); each reader reads exactly one message's bytes, counting the calls that returned data.
 * relay2 waits with poll() before each recv(); the producer sleeps (usleep) now and then.
 * Output lines (one per fact):
 *   wrote <channel> <pid> <calls> <bytes>      read <channel> <pid> <calls> <bytes>
 *   polls <pid> <calls>    sleeps <pid> <calls>    forks <pid> <children>
 * usage: chan_pipeline [messages, default 200] */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_messages = 200;

static size_t MessageSize(int i) {
  return (size_t)((i * 37) % 1500 + 1);
}

static void Die(const char* what) {
  fprintf(stderr, "chan_pipeline: %s: %s\n", what, strerror(errno));
  _exit(1);
}

struct Count {
  long calls;
  long bytes;
};

static void WriteAll(int fd, const char* buf, size_t n, int use_send, struct Count* c) {
  while (n > 0) {
    ssize_t w = use_send ? send(fd, buf, n, 0) : write(fd, buf, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      Die("write");
    c->calls++;
    c->bytes += w;
    buf += w;
    n -= (size_t)w;
  }
}

static void ReadExactly(int fd, char* buf, size_t n, int use_recv, struct Count* c) {
  while (n > 0) {
    ssize_t r = use_recv ? recv(fd, buf, n, 0) : read(fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      Die("read");
    c->calls++;
    c->bytes += r;
    buf += r;
    n -= (size_t)r;
  }
}

static void Report(const char* verb, const char* channel, struct Count c) {
  printf("%s %s %d %ld %ld\n", verb, channel, (int)getpid(), c.calls, c.bytes);
}

int main(int argc, char** argv) {
  if (argc > 1)
    g_messages = atoi(argv[1]);
  if (g_messages <= 0) {
    fprintf(stderr, "chan_pipeline: the message count must be positive\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  static char buf[2048];
  int pipe_fds[2], unix_fds[2];
  if (pipe(pipe_fds) != 0)
    Die("pipe");
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, unix_fds) != 0)
    Die("socketpair");
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0)
    Die("socket");
  struct sockaddr_in addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, (struct sockaddr*)&addr, &len) != 0)
    Die("listen");
  char fifo[64];
  snprintf(fifo, sizeof fifo, "/tmp/chan_pipeline.%d", (int)getpid());
  if (mkfifo(fifo, 0600) != 0)
    Die("mkfifo");

  int children = 0;
  pid_t pid = fork();
  if (pid == 0) { /* producer */
    close(pipe_fds[0]);
    struct Count w = {0, 0};
    long sleeps = 0;
    for (int i = 0; i < g_messages; ++i) {
      memset(buf, 'a' + i % 26, MessageSize(i));
      WriteAll(pipe_fds[1], buf, MessageSize(i), 0, &w);
      if (i % 50 == 49) {
        usleep(1000);
        ++sleeps;
      }
    }
    Report("wrote", "pipe", w);
    printf("sleeps %d %ld\n", (int)getpid(), sleeps);
    _exit(0);
  }
  ++children;
  pid = fork();
  if (pid == 0) { /* relay1: pipe -> unix socket */
    close(pipe_fds[1]);
    close(unix_fds[1]);
    struct Count r = {0, 0}, w = {0, 0};
    for (int i = 0; i < g_messages; ++i) {
      ReadExactly(pipe_fds[0], buf, MessageSize(i), 0, &r);
      WriteAll(unix_fds[0], buf, MessageSize(i), 1, &w);
    }
    Report("read", "pipe", r);
    Report("wrote", "unix", w);
    _exit(0);
  }
  ++children;
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(unix_fds[0]);
  pid = fork();
  if (pid == 0) { /* relay2: unix socket -> TCP, polling before each receive */
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    if (tcp < 0 || connect(tcp, (struct sockaddr*)&addr, sizeof addr) != 0)
      Die("connect");
    struct Count r = {0, 0}, w = {0, 0};
    long polls = 0;
    for (int i = 0; i < g_messages; ++i) {
      struct pollfd p = {unix_fds[1], POLLIN, 0};
      if (poll(&p, 1, -1) != 1)
        Die("poll");
      ++polls;
      ReadExactly(unix_fds[1], buf, MessageSize(i), 1, &r);
      WriteAll(tcp, buf, MessageSize(i), 0, &w);
    }
    Report("read", "unix", r);
    Report("wrote", "tcp", w);
    printf("polls %d %ld\n", (int)getpid(), polls);
    _exit(0);
  }
  ++children;
  close(unix_fds[1]);
  pid = fork();
  if (pid == 0) { /* relay3: TCP -> FIFO */
    int conn = accept(listener, NULL, NULL);
    if (conn < 0)
      Die("accept");
    int out = open(fifo, O_WRONLY);
    if (out < 0)
      Die("open fifo");
    struct Count r = {0, 0}, w = {0, 0};
    for (int i = 0; i < g_messages; ++i) {
      ReadExactly(conn, buf, MessageSize(i), 0, &r);
      WriteAll(out, buf, MessageSize(i), 0, &w);
    }
    Report("read", "tcp", r);
    Report("wrote", "fifo", w);
    _exit(0);
  }
  ++children;
  close(listener);
  int in = open(fifo, O_RDONLY);
  if (in < 0)
    Die("open fifo");
  struct Count r = {0, 0};
  int bad = 0;
  for (int i = 0; i < g_messages; ++i) {
    ReadExactly(in, buf, MessageSize(i), 0, &r);
    if (buf[0] != 'a' + i % 26)
      bad = 1;
  }
  close(in);
  unlink(fifo);
  int failed = 0;
  for (int i = 0; i < children; ++i) {
    int status;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failed = 1;
  }
  Report("read", "fifo", r);
  printf("forks %d %d\n", (int)getpid(), children);
  if (bad || failed) {
    fprintf(stderr, "chan_pipeline: %s\n",
            bad ? "messages arrived out of order" : "a stage failed");
    return 1;
  }
  return 0;
}
