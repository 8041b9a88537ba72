// libparmon_posix's internal interface between the interposed functions (posix.cc) and the
// channel classification and recording (posix_channel.cc). The checks every wrapper makes
// before calling the real function (On, Now) and the descriptor table's reset (ForgetFd) are
// inline, so a paused or unrecorded call costs what it cost in one file. Hidden visibility for
// everything here, declarations included.
#ifndef PARMON_SRC_PRELOAD_POSIX_POSIX_RECORD_H_
#define PARMON_SRC_PRELOAD_POSIX_POSIX_RECORD_H_

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>

#include "preload/common/preload.h"

#pragma GCC visibility push(hidden)

namespace parmon::preload::posix {

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
  kSendmmsg,
  kRecvmmsg,
  kSplice,
  kSendfile,
  kStdioWrite,
  kFnCount
};

// Per fd: 0 not classified yet, 1 a channel (ChanInfo written), 2 not a channel, 3 being
// classified by another thread. Relaxed/acq-rel is enough: the byte is the only shared state.
enum FdState : uint8_t { kFdNew = 0, kFdChannel = 1, kFdIgnored = 2, kFdBusy = 3 };
constexpr int kFdSlots = 1 << 16;
extern std::atomic<uint8_t> g_fd_state[kFdSlots];

inline void ForgetFd(int fd) {
  if (fd >= 0 && fd < kFdSlots)
    g_fd_state[fd].store(kFdNew, std::memory_order_relaxed);
}

inline uint64_t TimespecNs(const timespec* ts) {
  if (ts == nullptr || ts->tv_sec < 0)
    return 0;
  return static_cast<uint64_t>(ts->tv_sec) * 1000000000ull + static_cast<uint64_t>(ts->tv_nsec);
}

// Called after the real function returned, while recording (On() was true before the call).
// They take the guard themselves (Recording).
void RecordIo(Kind kind, Fn fn, int fd, ssize_t rc, uint64_t begin);
// sendmmsg/recvmmsg: one ChanWrite/ChanRead per message transferred (msg_len bytes each; one
// event with rc when the call failed). The first carries the call's blocking time, the others
// begin when the call returned, so the wait is counted once.
void RecordIoBatch(Kind kind, Fn fn, int fd, const struct mmsghdr* v, int rc, uint64_t begin);
// splice/sendfile: rc bytes left fd_in (a ChanRead, when it is a channel) and reached fd_out (a
// ChanWrite, when it is a channel; none when rc is 0, the end of the input). The first event
// written carries the blocking time.
void RecordTransfer(Fn fn, int fd_in, int fd_out, ssize_t rc, uint64_t begin);
void RecordWait(Fn fn, uint64_t nfds, int ready, uint64_t begin);
void RecordTimer(Fn fn, uint64_t requested_ns, uint64_t begin);
// These check On() themselves (exec and exit do not return to the wrapper).
void RecordExec(const char* path);
void RecordExit(int status);
// fork's and posix_spawn's Fork(child) in the parent (checks On() itself).
void RecordFork(pid_t child);

// execl-style argument lists gathered into an array (the size is bounded by ARG_MAX anyway).
constexpr int kMaxExeclArgs = 4096;

}  // namespace parmon::preload::posix

#pragma GCC visibility pop

#endif  // PARMON_SRC_PRELOAD_POSIX_POSIX_RECORD_H_
