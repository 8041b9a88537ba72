// libparmon_posix: the "link probes" of Hathi-2, inserted automatically. Interposes the POSIX
// calls through which processes talk to each other and wait: reads and writes on pipes, FIFOs,
// sockets and character devices (the read/write and send/recv families, sendmmsg/recvmmsg,
// splice/sendfile), poll/select/epoll waits, sleeps, and fork/posix_spawn/exec/exit. stdio's
// writes, which glibc makes below the interposable symbols, are caught in stdio.cc. Loaded with
// LD_PRELOAD by `parmon record`; the events are in docs/events.md (kinds 96-103 and the runtime's
// Fork/Exec/ProcessExit), the design in docs/comm.md.
//
// Every wrapper follows preload.h: when recording is off, paused, or the thread is already
// inside one of parmon's wrappers (an MPI call's progress engine polling its sockets, say), the
// real function is called and nothing else happens. Otherwise the wrapper takes the time, calls
// the real function WITHOUT holding the guard (so a cancelled thread or a signal handler never
// leaves it set), then holds the guard while it records, and restores errno before returning.
//
// This file holds the interposed functions; the channel classification (what identifies an fd's
// two ends) and the recording they call live in posix_channel.cc, behind posix_record.h.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/posix/posix_record.h"

namespace pp = parmon::preload::posix;
using parmon::format::Kind;
using parmon::preload::posix::Fn;

// ---- read and write families -------------------------------------------------------------------
#define PARMON_IO(kind, fn, fd, call)              \
  if (!pp::On())                                   \
    return call;                                   \
  uint64_t begin = pp::Now();                      \
  auto rc = call;                                  \
  pp::RecordIo(Kind::kind, pp::fn, fd, rc, begin); \
  return rc

PARMON_INTERPOSE ssize_t read(int fd, void* buf, size_t n) {
  PARMON_IO(kChanRead, kRead, fd, PARMON_REAL(read)(fd, buf, n));
}
PARMON_INTERPOSE ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  using F = ssize_t (*)(int, void*, size_t, size_t);
  static std::atomic<void*> slot{nullptr};
  PARMON_IO(kChanRead, kRead, fd,
            parmon::preload::RealFunction<F>(slot, "__read_chk")(fd, buf, n, buflen));
}
PARMON_INTERPOSE ssize_t readv(int fd, const iovec* iov, int n) {
  PARMON_IO(kChanRead, kReadv, fd, PARMON_REAL(readv)(fd, iov, n));
}
PARMON_INTERPOSE ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  PARMON_IO(kChanRead, kPread, fd, PARMON_REAL(pread)(fd, buf, n, off));
}
PARMON_INTERPOSE ssize_t recv(int fd, void* buf, size_t n, int flags) {
  PARMON_IO(kChanRead, kRecv, fd, PARMON_REAL(recv)(fd, buf, n, flags));
}
PARMON_INTERPOSE ssize_t
recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* from_len) {
  PARMON_IO(kChanRead, kRecvfrom, fd, PARMON_REAL(recvfrom)(fd, buf, n, flags, from, from_len));
}
PARMON_INTERPOSE ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  PARMON_IO(kChanRead, kRecvmsg, fd, PARMON_REAL(recvmsg)(fd, msg, flags));
}
PARMON_INTERPOSE ssize_t write(int fd, const void* buf, size_t n) {
  PARMON_IO(kChanWrite, kWrite, fd, PARMON_REAL(write)(fd, buf, n));
}
PARMON_INTERPOSE ssize_t writev(int fd, const iovec* iov, int n) {
  PARMON_IO(kChanWrite, kWritev, fd, PARMON_REAL(writev)(fd, iov, n));
}
PARMON_INTERPOSE ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  PARMON_IO(kChanWrite, kPwrite, fd, PARMON_REAL(pwrite)(fd, buf, n, off));
}
PARMON_INTERPOSE ssize_t send(int fd, const void* buf, size_t n, int flags) {
  PARMON_IO(kChanWrite, kSend, fd, PARMON_REAL(send)(fd, buf, n, flags));
}
PARMON_INTERPOSE ssize_t
sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t to_len) {
  PARMON_IO(kChanWrite, kSendto, fd, PARMON_REAL(sendto)(fd, buf, n, flags, to, to_len));
}
PARMON_INTERPOSE ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  PARMON_IO(kChanWrite, kSendmsg, fd, PARMON_REAL(sendmsg)(fd, msg, flags));
}

// Several messages in one call: one event per message (posix_channel.cc).
PARMON_INTERPOSE int sendmmsg(int fd, mmsghdr* v, unsigned int n, int flags) {
  if (!pp::On())
    return PARMON_REAL(sendmmsg)(fd, v, n, flags);
  uint64_t begin = pp::Now();
  int rc = PARMON_REAL(sendmmsg)(fd, v, n, flags);
  pp::RecordIoBatch(Kind::kChanWrite, pp::kSendmmsg, fd, v, rc, begin);
  return rc;
}
PARMON_INTERPOSE int recvmmsg(int fd, mmsghdr* v, unsigned int n, int flags, timespec* timeout) {
  if (!pp::On())
    return PARMON_REAL(recvmmsg)(fd, v, n, flags, timeout);
  uint64_t begin = pp::Now();
  int rc = PARMON_REAL(recvmmsg)(fd, v, n, flags, timeout);
  pp::RecordIoBatch(Kind::kChanRead, pp::kRecvmmsg, fd, v, rc, begin);
  return rc;
}

// Bytes moved by the kernel from one fd to another: a read on the first and a write on the
// second, each recorded when its fd is a channel (a file's side is not, as for read and write).
PARMON_INTERPOSE ssize_t
splice(int fd_in, loff_t* off_in, int fd_out, loff_t* off_out, size_t n, unsigned int flags) {
  if (!pp::On())
    return PARMON_REAL(splice)(fd_in, off_in, fd_out, off_out, n, flags);
  uint64_t begin = pp::Now();
  ssize_t rc = PARMON_REAL(splice)(fd_in, off_in, fd_out, off_out, n, flags);
  pp::RecordTransfer(pp::kSplice, fd_in, fd_out, rc, begin);
  return rc;
}
PARMON_INTERPOSE ssize_t sendfile(int fd_out, int fd_in, off_t* offset, size_t n) {
  if (!pp::On())
    return PARMON_REAL(sendfile)(fd_out, fd_in, offset, n);
  uint64_t begin = pp::Now();
  ssize_t rc = PARMON_REAL(sendfile)(fd_out, fd_in, offset, n);
  pp::RecordTransfer(pp::kSendfile, fd_in, fd_out, rc, begin);
  return rc;
}
PARMON_INTERPOSE ssize_t sendfile64(int fd_out, int fd_in, off64_t* offset, size_t n) {
  if (!pp::On())
    return PARMON_REAL(sendfile64)(fd_out, fd_in, offset, n);
  uint64_t begin = pp::Now();
  ssize_t rc = PARMON_REAL(sendfile64)(fd_out, fd_in, offset, n);
  pp::RecordTransfer(pp::kSendfile, fd_in, fd_out, rc, begin);
  return rc;
}

// ---- waits -------------------------------------------------------------------------------------
#define PARMON_WAIT(fn, nfds, call)        \
  if (!pp::On())                           \
    return call;                           \
  uint64_t begin = pp::Now();              \
  int rc = call;                           \
  pp::RecordWait(pp::fn, nfds, rc, begin); \
  return rc

PARMON_INTERPOSE int poll(pollfd* fds, nfds_t n, int timeout) {
  PARMON_WAIT(kPoll, n, PARMON_REAL(poll)(fds, n, timeout));
}
PARMON_INTERPOSE int ppoll(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* mask) {
  PARMON_WAIT(kPpoll, n, PARMON_REAL(ppoll)(fds, n, timeout, mask));
}
PARMON_INTERPOSE int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  PARMON_WAIT(kSelect, static_cast<uint64_t>(n), PARMON_REAL(select)(n, r, w, e, timeout));
}
PARMON_INTERPOSE int pselect(int n,
                             fd_set* r,
                             fd_set* w,
                             fd_set* e,
                             const timespec* timeout,
                             const sigset_t* mask) {
  PARMON_WAIT(kPselect, static_cast<uint64_t>(n), PARMON_REAL(pselect)(n, r, w, e, timeout, mask));
}
PARMON_INTERPOSE int epoll_wait(int epfd, epoll_event* events, int max, int timeout) {
  PARMON_WAIT(kEpollWait, static_cast<uint64_t>(max),
              PARMON_REAL(epoll_wait)(epfd, events, max, timeout));
}
PARMON_INTERPOSE int epoll_pwait(int epfd,
                                 epoll_event* events,
                                 int max,
                                 int timeout,
                                 const sigset_t* mask) {
  PARMON_WAIT(kEpollPwait, static_cast<uint64_t>(max),
              PARMON_REAL(epoll_pwait)(epfd, events, max, timeout, mask));
}

// ---- sleeps ------------------------------------------------------------------------------------
PARMON_INTERPOSE unsigned int sleep(unsigned int seconds) {
  if (!pp::On())
    return PARMON_REAL(sleep)(seconds);
  uint64_t begin = pp::Now();
  unsigned int rc = PARMON_REAL(sleep)(seconds);
  pp::RecordTimer(pp::kSleep, uint64_t{seconds} * 1000000000ull, begin);
  return rc;
}
PARMON_INTERPOSE int usleep(useconds_t us) {
  if (!pp::On())
    return PARMON_REAL(usleep)(us);
  uint64_t begin = pp::Now();
  int rc = PARMON_REAL(usleep)(us);
  pp::RecordTimer(pp::kUsleep, uint64_t{us} * 1000ull, begin);
  return rc;
}
PARMON_INTERPOSE int nanosleep(const timespec* req, timespec* rem) {
  if (!pp::On())
    return PARMON_REAL(nanosleep)(req, rem);
  uint64_t begin = pp::Now();
  int rc = PARMON_REAL(nanosleep)(req, rem);
  pp::RecordTimer(pp::kNanosleep, pp::TimespecNs(req), begin);
  return rc;
}
PARMON_INTERPOSE int clock_nanosleep(clockid_t clock,
                                     int flags,
                                     const timespec* req,
                                     timespec* rem) {
  if (!pp::On())
    return PARMON_REAL(clock_nanosleep)(clock, flags, req, rem);
  // An absolute deadline: what was asked for is the deadline minus the time of the call.
  timespec start{};
  if (flags & TIMER_ABSTIME)
    clock_gettime(clock, &start);
  uint64_t begin = pp::Now();
  int rc = PARMON_REAL(clock_nanosleep)(clock, flags, req, rem);
  uint64_t requested = pp::TimespecNs(req);
  if (flags & TIMER_ABSTIME) {
    uint64_t from = pp::TimespecNs(&start);
    requested = requested > from ? requested - from : 0;
  }
  pp::RecordTimer(pp::kClockNanosleep, requested, begin);
  return rc;
}

// ---- descriptors: forget what we knew about reused numbers -------------------------------------
PARMON_INTERPOSE int close(int fd) {
  if (fd >= 0 && fd < pp::kFdSlots) {
    uint8_t s = pp::g_fd_state[fd].exchange(pp::kFdNew, std::memory_order_relaxed);
    if (s == pp::kFdChannel && pp::On()) {
      int rc = PARMON_REAL(close)(fd);
      pp::Recording r;
      uint64_t a = static_cast<uint64_t>(fd);
      parmon_x_emit(parmon::preload::K(Kind::kChanClose), &a, 1, nullptr, 0);
      return rc;
    }
  }
  return PARMON_REAL(close)(fd);
}
PARMON_INTERPOSE int dup2(int old_fd, int new_fd) {
  int rc = PARMON_REAL(dup2)(old_fd, new_fd);
  if (rc >= 0)
    pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int dup3(int old_fd, int new_fd, int flags) {
  int rc = PARMON_REAL(dup3)(old_fd, new_fd, flags);
  if (rc >= 0)
    pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int pipe(int fds[2]) {
  int rc = PARMON_REAL(pipe)(fds);
  if (rc == 0)
    pp::ForgetFd(fds[0]), pp::ForgetFd(fds[1]);
  return rc;
}
PARMON_INTERPOSE int pipe2(int fds[2], int flags) {
  int rc = PARMON_REAL(pipe2)(fds, flags);
  if (rc == 0)
    pp::ForgetFd(fds[0]), pp::ForgetFd(fds[1]);
  return rc;
}
PARMON_INTERPOSE int socket(int domain, int type, int protocol) {
  int rc = PARMON_REAL(socket)(domain, type, protocol);
  pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int socketpair(int domain, int type, int protocol, int fds[2]) {
  int rc = PARMON_REAL(socketpair)(domain, type, protocol, fds);
  if (rc == 0)
    pp::ForgetFd(fds[0]), pp::ForgetFd(fds[1]);
  return rc;
}
PARMON_INTERPOSE int accept(int fd, sockaddr* addr, socklen_t* len) {
  int rc = PARMON_REAL(accept)(fd, addr, len);
  pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  int rc = PARMON_REAL(accept4)(fd, addr, len, flags);
  pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int connect(int fd, const sockaddr* addr, socklen_t len) {
  int rc = PARMON_REAL(connect)(fd, addr, len);
  int saved = errno;
  pp::ForgetFd(fd);  // the peer address changes: describe the socket again on next use
  errno = saved;
  return rc;
}
// The mode argument exists only when the flags create a file.
#define PARMON_OPEN_MODE(flags, last)            \
  mode_t mode = 0;                               \
  if ((flags) & (O_CREAT | O_TMPFILE)) {         \
    va_list ap;                                  \
    va_start(ap, last);                          \
    mode = static_cast<mode_t>(va_arg(ap, int)); \
    va_end(ap);                                  \
  }

PARMON_INTERPOSE int open(const char* path, int flags, ...) {
  PARMON_OPEN_MODE(flags, flags);
  int rc = PARMON_REAL(open)(path, flags, mode);
  pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int open64(const char* path, int flags, ...) {
  PARMON_OPEN_MODE(flags, flags);
  int rc = PARMON_REAL(open64)(path, flags, mode);
  pp::ForgetFd(rc);
  return rc;
}
PARMON_INTERPOSE int openat(int dir, const char* path, int flags, ...) {
  PARMON_OPEN_MODE(flags, flags);
  int rc = PARMON_REAL(openat)(dir, path, flags, mode);
  pp::ForgetFd(rc);
  return rc;
}

// ---- processes ---------------------------------------------------------------------------------
PARMON_INTERPOSE pid_t fork(void) {
  pid_t rc = PARMON_REAL(fork)();
  if (rc > 0)
    pp::RecordFork(rc);
  return rc;
}

// vfork's child borrows the parent's memory, its thread-local ring included, until it execs or
// exits, and runs the program's own code there: dash (Debian's /bin/sh) execs its commands from
// a vfork child, whose exec wrapper claimed a ring in the parent's thread-local slot under the
// child's pid; that ring was retired at the exec, and the parent's later events (its Fork, a
// subshell's `echo` into a pipe) went nowhere. It is served by fork (a conforming child only
// execs or exits, so it cannot tell), which costs a copy of the page tables.
PARMON_INTERPOSE pid_t vfork(void) {
  return fork();
}

// posix_spawn runs the child in glibc's own code up to its exec (the internal __execve, which
// execve's wrapper never sees): the parent records Fork(child) as fork does; the child's new
// image, which inherits LD_PRELOAD and the session through the environment it is given,
// announces itself (ProcessBegin) and is named by what it runs, as after fork+exec. The symbols
// are versioned (GLIBC_2.15 is the current one). `pid` may be null.
PARMON_INTERPOSE int posix_spawn(pid_t* pid,
                                 const char* path,
                                 const posix_spawn_file_actions_t* actions,
                                 const posix_spawnattr_t* attr,
                                 char* const argv[],
                                 char* const envp[]) {
  pid_t child = 0;
  int rc = PARMON_REAL_VERSION(posix_spawn, "GLIBC_2.15")(&child, path, actions, attr, argv, envp);
  if (rc == 0) {
    if (pid != nullptr)
      *pid = child;
    pp::RecordFork(child);
  }
  return rc;
}
PARMON_INTERPOSE int posix_spawnp(pid_t* pid,
                                  const char* file,
                                  const posix_spawn_file_actions_t* actions,
                                  const posix_spawnattr_t* attr,
                                  char* const argv[],
                                  char* const envp[]) {
  pid_t child = 0;
  int rc = PARMON_REAL_VERSION(posix_spawnp, "GLIBC_2.15")(&child, file, actions, attr, argv, envp);
  if (rc == 0) {
    if (pid != nullptr)
      *pid = child;
    pp::RecordFork(child);
  }
  return rc;
}

PARMON_INTERPOSE int execve(const char* path, char* const argv[], char* const envp[]) {
  pp::RecordExec(path);
  return PARMON_REAL(execve)(path, argv, envp);
}
PARMON_INTERPOSE int execv(const char* path, char* const argv[]) {
  pp::RecordExec(path);
  return PARMON_REAL(execv)(path, argv);
}
PARMON_INTERPOSE int execvp(const char* file, char* const argv[]) {
  pp::RecordExec(file);
  return PARMON_REAL(execvp)(file, argv);
}
PARMON_INTERPOSE int execvpe(const char* file, char* const argv[], char* const envp[]) {
  pp::RecordExec(file);
  return PARMON_REAL(execvpe)(file, argv, envp);
}

#define PARMON_GATHER_ARGS(first, last_arg, envp_out) \
  const char* args[pp::kMaxExeclArgs];                \
  int count = 0;                                      \
  args[count++] = first;                              \
  va_list ap;                                         \
  va_start(ap, last_arg);                             \
  while (count < pp::kMaxExeclArgs - 1) {             \
    const char* a = va_arg(ap, const char*);          \
    args[count++] = a;                                \
    if (a == nullptr)                                 \
      break;                                          \
  }                                                   \
  if (count == pp::kMaxExeclArgs - 1)                 \
    args[count++] = nullptr;                          \
  envp_out;                                           \
  va_end(ap)

PARMON_INTERPOSE int execl(const char* path, const char* arg, ...) {
  PARMON_GATHER_ARGS(arg, arg, (void)0);
  pp::RecordExec(path);
  return PARMON_REAL(execv)(path, const_cast<char* const*>(args));
}
PARMON_INTERPOSE int execlp(const char* file, const char* arg, ...) {
  PARMON_GATHER_ARGS(arg, arg, (void)0);
  pp::RecordExec(file);
  return PARMON_REAL(execvp)(file, const_cast<char* const*>(args));
}
PARMON_INTERPOSE int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  PARMON_GATHER_ARGS(arg, arg, envp = va_arg(ap, char* const*));
  pp::RecordExec(path);
  return PARMON_REAL(execve)(path, const_cast<char* const*>(args), envp);
}

PARMON_INTERPOSE void exit(int status) {
  pp::RecordExit(status);
  PARMON_REAL(exit)(status);
  __builtin_unreachable();
}
PARMON_INTERPOSE void _exit(int status) {
  pp::RecordExit(status);
  PARMON_REAL(_exit)(status);
  __builtin_unreachable();
}
PARMON_INTERPOSE void _Exit(int status) {
  pp::RecordExit(status);
  PARMON_REAL(_Exit)(status);
  __builtin_unreachable();
}
