// libparmon_posix: the "link probes" of Hathi-2, inserted automatically. Interposes the POSIX
// calls through which processes talk to each other and wait: reads and writes on pipes, FIFOs,
// sockets and character devices (the read/write and send/recv families), poll/select/epoll
// waits, sleeps, and fork/exec/exit. Loaded with LD_PRELOAD by `parmon record`; the events are
// in docs/events.md (kinds 96-103 and the runtime's Fork/Exec/ProcessExit), the design in
// docs/comm.md.
//
// Every wrapper follows preload.h: when recording is off, paused, or the thread is already
// inside one of parmon's wrappers (an MPI call's progress engine polling its sockets, say), the
// real function is called and nothing else happens. Otherwise the wrapper takes the time, calls
// the real function WITHOUT holding the guard (so a cancelled thread or a signal handler never
// leaves it set), then holds the guard while it records, and restores errno before returning.
//
// Channel identity: the first time a process reads or writes an fd, the fd is classified once
// (fstat, and for sockets getsockname/getpeername or the kernel's sock_diag for the peer of a
// unix socket) and a ChanInfo event names both ends, so a reader can pair the writer's process
// with the reader's. The classification is cached per fd in a static table and forgotten when
// the fd is closed, dup2'ed over or returned again by a call that creates descriptors, and in a
// forked child (whose events belong to another process and need their own ChanInfo).
// Regular files are classified as "not a channel" and cost only the table lookup afterwards.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "preload/common/preload.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries (see mpi_core.cc).
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::preload::posix {
namespace {

using format::Kind;

// Enters our own bookkeeping after the real call; restores errno when it ends.
class Recording {
 public:
  Recording() : errno_(errno) { t_in_wrapper = 1; }
  ~Recording() {
    t_in_wrapper = 0;
    errno = errno_;
  }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

 private:
  int errno_;
};

// True when this call should be recorded (one relaxed load and a TLS read).
inline bool On() {
  return t_in_wrapper == 0 && Enabled();
}

inline uint64_t Now() {
  return parmon_x_now();
}

// Function names, interned once per process (category kFunction).
enum Fn {
  kRead,
  kReadv,
  kPread,
  kRecv,
  kRecvfrom,
  kRecvmsg,
  kWrite,
  kWritev,
  kPwrite,
  kSend,
  kSendto,
  kSendmsg,
  kPoll,
  kPpoll,
  kSelect,
  kPselect,
  kEpollWait,
  kEpollPwait,
  kSleep,
  kUsleep,
  kNanosleep,
  kClockNanosleep,
  kFnCount
};
constexpr const char* kFnNames[kFnCount] = {
    "read",  "readv",  "pread",     "recv",           "recvfrom",   "recvmsg",
    "write", "writev", "pwrite",    "send",           "sendto",     "sendmsg",
    "poll",  "ppoll",  "select",    "pselect",        "epoll_wait", "epoll_pwait",
    "sleep", "usleep", "nanosleep", "clock_nanosleep"};
uint32_t g_fn_ids[kFnCount];

inline uint64_t FnId(Fn fn) {
  return FunctionId(&g_fn_ids[fn], kFnNames[fn]);
}

// ---- channel classification ------------------------------------------------------------------
enum ChanType : uint8_t {
  kUnknown = 0,
  kPipe = 1,
  kFifo = 2,
  kUnixStream = 3,
  kUnixDgram = 4,
  kTcp = 5,
  kUdp = 6,
  kOtherSocket = 7,
  kRegular = 8,
  kCharDevice = 9,
  kOther = 10
};
// Per fd: 0 not classified yet, 1 a channel (ChanInfo written), 2 not a channel, 3 being
// classified by another thread. Relaxed/acq-rel is enough: the byte is the only shared state.
enum FdState : uint8_t { kFdNew = 0, kFdChannel = 1, kFdIgnored = 2, kFdBusy = 3 };
constexpr int kFdSlots = 1 << 16;
std::atomic<uint8_t> g_fd_state[kFdSlots];

void ForgetFd(int fd) {
  if (fd >= 0 && fd < kFdSlots)
    g_fd_state[fd].store(kFdNew, std::memory_order_relaxed);
}

uint64_t Inet4Id(const sockaddr_in& a) {
  return static_cast<uint64_t>(ntohl(a.sin_addr.s_addr)) << 16 | ntohs(a.sin_port);
}
uint64_t Inet6Id(const sockaddr_in6& a) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char b : a.sin6_addr.s6_addr)
    h = (h ^ b) * 1099511628211ull;
  h = (h ^ ntohs(a.sin6_port)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

void FormatAddress(const sockaddr_storage& s, char* out, size_t n) {
  if (s.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(s);
    uint32_t ip = ntohl(a.sin_addr.s_addr);
    snprintf(out, n, "%u.%u.%u.%u:%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255,
             ntohs(a.sin_port));
  } else if (s.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(s);
    char* p = out;
    size_t left = n;
    *p = '\0';
    int w = snprintf(p, left, "[");
    for (int i = 0; i < 16 && w > 0 && static_cast<size_t>(w) < left; i += 2) {
      p += w;
      left -= static_cast<size_t>(w);
      w = snprintf(p, left, "%s%x", i ? ":" : "",
                   a.sin6_addr.s6_addr[i] << 8 | a.sin6_addr.s6_addr[i + 1]);
    }
    if (w > 0 && static_cast<size_t>(w) < left) {
      p += w;
      left -= static_cast<size_t>(w);
      snprintf(p, left, "]:%u", ntohs(a.sin6_port));
    }
  } else {
    snprintf(out, n, "?");
  }
}

// The inode of the socket at the other end of a connected unix socket, from the kernel's
// sock_diag netlink interface (Linux 3.3); 0 when it cannot be known. Raw system calls: this
// library's own socket wrappers must not see them.
uint64_t UnixPeerInode(uint64_t inode) {
  long nl = syscall(SYS_socket, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0)
    return 0;
  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } request{};
  request.nlh.nlmsg_len = sizeof request;
  request.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.nlh.nlmsg_flags = NLM_F_REQUEST;
  request.req.sdiag_family = AF_UNIX;
  request.req.udiag_states = ~0u;
  request.req.udiag_ino = static_cast<uint32_t>(inode);
  request.req.udiag_show = UDIAG_SHOW_PEER;
  request.req.udiag_cookie[0] = request.req.udiag_cookie[1] = ~0u;  // INET_DIAG_NOCOOKIE
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  uint64_t peer = 0;
  if (syscall(SYS_sendto, nl, &request, sizeof request, 0, &kernel, sizeof kernel) ==
      static_cast<long>(sizeof request)) {
    alignas(nlmsghdr) char buf[1024];
    long n = syscall(SYS_recvfrom, nl, buf, sizeof buf, 0, nullptr, nullptr);
    auto* h = reinterpret_cast<nlmsghdr*>(buf);
    if (n > 0 && NLMSG_OK(h, static_cast<unsigned>(n)) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
      auto* msg = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
      int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
      for (auto* a = reinterpret_cast<rtattr*>(msg + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
          uint32_t v;
          memcpy(&v, RTA_DATA(a), sizeof v);
          peer = v;
        }
      }
    }
  }
  syscall(SYS_close, nl);
  return peer;
}

struct ChanDesc {
  uint8_t type = kUnknown;
  uint64_t local = 0, peer = 0;
  char text[160] = {};
};

ChanDesc Classify(int fd) {
  ChanDesc d;
  struct stat st;
  if (fstat(fd, &st) != 0)
    return d;
  if (S_ISREG(st.st_mode)) {
    d.type = kRegular;
  } else if (S_ISCHR(st.st_mode)) {
    d.type = kCharDevice;
    d.local = st.st_rdev;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, d.text, sizeof d.text - 1);
    d.text[n > 0 ? n : 0] = '\0';
  } else if (S_ISFIFO(st.st_mode)) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    long n = syscall(SYS_readlinkat, AT_FDCWD, link, d.text, sizeof d.text - 1);
    d.text[n > 0 ? n : 0] = '\0';
    d.type = strncmp(d.text, "pipe:", 5) == 0 ? kPipe : kFifo;
    d.local = st.st_ino;
  } else if (S_ISSOCK(st.st_mode)) {
    sockaddr_storage self{}, peer{};
    socklen_t self_len = sizeof self, peer_len = sizeof peer;
    int type = 0;
    socklen_t type_len = sizeof type;
    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len);
    bool have_self = getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0;
    bool have_peer = getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0;
    sa_family_t family = have_self ? self.ss_family : AF_UNSPEC;
    if (family == AF_UNIX) {
      d.type = type == SOCK_STREAM ? kUnixStream : kUnixDgram;
      d.local = st.st_ino;
      d.peer = UnixPeerInode(st.st_ino);
      snprintf(d.text, sizeof d.text, "unix:[%llu]->[%llu]",
               static_cast<unsigned long long>(d.local), static_cast<unsigned long long>(d.peer));
    } else if (family == AF_INET || family == AF_INET6) {
      d.type = type == SOCK_STREAM ? kTcp : type == SOCK_DGRAM ? kUdp : kOtherSocket;
      d.local = family == AF_INET ? Inet4Id(reinterpret_cast<sockaddr_in&>(self))
                                  : Inet6Id(reinterpret_cast<sockaddr_in6&>(self));
      char a[64], b[64] = "?";
      FormatAddress(self, a, sizeof a);
      if (have_peer && peer.ss_family == family) {
        d.peer = family == AF_INET ? Inet4Id(reinterpret_cast<sockaddr_in&>(peer))
                                   : Inet6Id(reinterpret_cast<sockaddr_in6&>(peer));
        FormatAddress(peer, b, sizeof b);
      }
      snprintf(d.text, sizeof d.text, "%s->%s", a, b);
    } else {
      d.type = kOtherSocket;
      d.local = st.st_ino;
      snprintf(d.text, sizeof d.text, "socket:[%llu]", static_cast<unsigned long long>(st.st_ino));
    }
  } else {
    d.type = kOther;
  }
  return d;
}

inline bool IsChannel(uint8_t type) {
  return type != kRegular && type != kOther && type != kUnknown;
}

void EmitInfo(int fd, const ChanDesc& d) {
  uint64_t a[4] = {static_cast<uint64_t>(fd), d.type, d.local, d.peer};
  parmon_x_emit(K(Kind::kChanInfo), a, 4, d.text, static_cast<uint32_t>(strlen(d.text)));
}

// Whether fd is a channel, writing its ChanInfo the first time. Called while recording.
bool Channel(int fd) {
  if (fd < 0)
    return false;
  if (fd >= kFdSlots) {  // no cache this high: classify every time, describe every time
    ChanDesc d = Classify(fd);
    if (IsChannel(d.type))
      EmitInfo(fd, d);
    return IsChannel(d.type);
  }
  uint8_t s = g_fd_state[fd].load(std::memory_order_relaxed);
  if (s == kFdChannel) [[likely]]
    return true;
  if (s == kFdIgnored)
    return false;
  ChanDesc d = Classify(fd);
  bool channel = IsChannel(d.type);
  uint8_t expected = kFdNew;
  if (s == kFdNew &&
      g_fd_state[fd].compare_exchange_strong(expected, kFdBusy, std::memory_order_acq_rel)) {
    if (channel)
      EmitInfo(fd, d);
    g_fd_state[fd].store(channel ? kFdChannel : kFdIgnored, std::memory_order_release);
  }
  return channel;
}

void RecordIo(Kind kind, Fn fn, int fd, ssize_t rc, uint64_t begin) {
  Recording r;
  if (!Channel(fd))
    return;
  uint64_t a[4] = {static_cast<uint64_t>(fd), static_cast<uint64_t>(static_cast<int64_t>(rc)),
                   begin, FnId(fn)};
  parmon_x_emit(K(kind), a, 4, nullptr, 0);
}

void RecordWait(Fn fn, uint64_t nfds, int ready, uint64_t begin) {
  Recording r;
  uint64_t a[4] = {FnId(fn), nfds, static_cast<uint64_t>(static_cast<int64_t>(ready)), begin};
  parmon_x_emit(K(Kind::kChanWait), a, 4, nullptr, 0);
}

void RecordTimer(Fn fn, uint64_t requested_ns, uint64_t begin) {
  Recording r;
  uint64_t a[3] = {FnId(fn), requested_ns, begin};
  parmon_x_emit(K(Kind::kTimerWait), a, 3, nullptr, 0);
}

uint64_t TimespecNs(const timespec* ts) {
  if (ts == nullptr || ts->tv_sec < 0)
    return 0;
  return static_cast<uint64_t>(ts->tv_sec) * 1000000000ull + static_cast<uint64_t>(ts->tv_nsec);
}

void ChildAfterFork() {
  // Our classification belonged to the parent process; the child describes its fds again.
  for (int i = 0; i < kFdSlots; ++i)
    g_fd_state[i].store(kFdNew, std::memory_order_relaxed);
}

__attribute__((constructor)) void Setup() {
  pthread_atfork(nullptr, nullptr, ChildAfterFork);
}

}  // namespace
}  // namespace parmon::preload::posix

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
  if (rc > 0 && pp::On()) {
    pp::Recording r;
    uint64_t a = static_cast<uint64_t>(rc);
    parmon_x_emit(parmon::preload::K(Kind::kFork), &a, 1, nullptr, 0);
  }
  return rc;
}

namespace parmon::preload::posix {
namespace {
void RecordExec(const char* path) {
  if (!On() || path == nullptr)
    return;
  Recording r;
  parmon_x_emit(K(Kind::kExec), nullptr, 0, path, static_cast<uint32_t>(strnlen(path, 4096)));
}
void RecordExit(int status) {
  if (!On())
    return;
  Recording r;
  uint64_t a = static_cast<uint64_t>(static_cast<uint32_t>(status));
  parmon_x_emit(K(Kind::kProcessExit), &a, 1, nullptr, 0);
}
// execl-style argument lists gathered into an array (the size is bounded by ARG_MAX anyway).
constexpr int kMaxExeclArgs = 4096;
}  // namespace
}  // namespace parmon::preload::posix

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
