// libparmon_posix's channel identity and recording: what the interposed functions of posix.cc
// call once the real function has returned. The library's design (what is interposed, the
// guard, errno) is described atop posix.cc.
//
// Channel identity: the first time a process reads or writes an fd, the fd is classified once
// (fstat, and for sockets getsockname/getpeername or the kernel's sock_diag for the peer of a
// unix socket) and a ChanInfo event names both ends, so a reader can pair the writer's process
// with the reader's. The classification is cached per fd in a static table and forgotten when
// the fd is closed, dup2'ed over or returned again by a call that creates descriptors, and in a
// forked child (whose events belong to another process and need their own ChanInfo).
// Regular files are classified as "not a channel" and cost only the table lookup afterwards.
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>

#include "preload/common/preload.h"
#include "preload/posix/posix_record.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries (see mpi_core.cc).
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::preload::posix {

std::atomic<uint8_t> g_fd_state[kFdSlots];

namespace {

constexpr const char* kFnNames[kFnCount] = {
    "read",      "readv",           "pread",       "recv",     "recvfrom",
    "recvmsg",   "write",           "writev",      "pwrite",   "send",
    "sendto",    "sendmsg",         "poll",        "ppoll",    "select",
    "pselect",   "epoll_wait",      "epoll_pwait", "sleep",    "usleep",
    "nanosleep", "clock_nanosleep", "sendmmsg",    "recvmmsg", "splice",
    "sendfile",  "stdio_write"};
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

}  // namespace

void RecordIo(Kind kind, Fn fn, int fd, ssize_t rc, uint64_t begin) {
  Recording r;
  if (!Channel(fd))
    return;
  uint64_t a[4] = {static_cast<uint64_t>(fd), static_cast<uint64_t>(static_cast<int64_t>(rc)),
                   begin, FnId(fn)};
  parmon_x_emit(K(kind), a, 4, nullptr, 0);
}

void RecordIoBatch(Kind kind, Fn fn, int fd, const mmsghdr* v, int rc, uint64_t begin) {
  Recording r;
  uint64_t end = Now();
  if (!Channel(fd))
    return;
  if (rc <= 0 || v == nullptr) {
    uint64_t a[4] = {static_cast<uint64_t>(fd), static_cast<uint64_t>(static_cast<int64_t>(rc)),
                     begin, FnId(fn)};
    parmon_x_emit(K(kind), a, 4, nullptr, 0);
    return;
  }
  for (int i = 0; i < rc; ++i) {
    uint64_t a[4] = {static_cast<uint64_t>(fd), v[i].msg_len, i == 0 ? begin : end, FnId(fn)};
    parmon_x_emit(K(kind), a, 4, nullptr, 0);
  }
}

void RecordTransfer(Fn fn, int fd_in, int fd_out, ssize_t rc, uint64_t begin) {
  Recording r;
  uint64_t end = Now();
  bool first = true;
  const uint64_t bytes = static_cast<uint64_t>(static_cast<int64_t>(rc));
  if (Channel(fd_in)) {
    uint64_t a[4] = {static_cast<uint64_t>(fd_in), bytes, begin, FnId(fn)};
    parmon_x_emit(K(Kind::kChanRead), a, 4, nullptr, 0);
    first = false;
  }
  // A return of 0 is the end of the input: a read that found nothing, and no write.
  if (rc != 0 && Channel(fd_out)) {
    uint64_t a[4] = {static_cast<uint64_t>(fd_out), bytes, first ? begin : end, FnId(fn)};
    parmon_x_emit(K(Kind::kChanWrite), a, 4, nullptr, 0);
  }
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

void RecordExec(const char* path) {
  if (!On() || path == nullptr)
    return;
  Recording r;
  parmon_x_emit(K(Kind::kExec), nullptr, 0, path, static_cast<uint32_t>(strnlen(path, 4096)));
}
void RecordFork(pid_t child) {
  if (child <= 0 || !On())
    return;
  Recording r;
  uint64_t a = static_cast<uint64_t>(child);
  parmon_x_emit(K(Kind::kFork), &a, 1, nullptr, 0);
}

void RecordExit(int status) {
  if (!On())
    return;
  Recording r;
  uint64_t a = static_cast<uint64_t>(static_cast<uint32_t>(status));
  parmon_x_emit(K(Kind::kProcessExit), &a, 1, nullptr, 0);
}

namespace {
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
