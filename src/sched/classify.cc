#include "sched/classify.h"

#include <sys/syscall.h>

#include <algorithm>

namespace parmon::sched {

const char* ThreadStateName(ThreadState s) {
  static const char* const kNames[kThreadStateCount] = {"running",   "runnable",   "comm-wait",
                                                        "lock-wait", "timer-wait", "io-wait",
                                                        "stopped",   "other-wait"};
  return kNames[static_cast<int>(s)];
}

ThreadState WaitState(char state_letter, uint64_t syscall) {
  switch (state_letter) {
    case 'T':
    case 't':
      return ThreadState::kStopped;
    case 'D':
      return ThreadState::kIoWait;  // uninterruptible: disk, NFS, page-in
    case 'R':
      return ThreadState::kRunnable;
    default:
      break;
  }
  switch (syscall) {
    // Reading or writing a pipe, socket or terminal, or waiting for one to be ready.
    case SYS_read:
    case SYS_write:
    case SYS_readv:
    case SYS_writev:
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_recvmmsg:
    case SYS_sendto:
    case SYS_sendmsg:
    case SYS_sendmmsg:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
    case SYS_accept:
    case SYS_accept4:
    case SYS_connect:
    case SYS_msgrcv:
    case SYS_msgsnd:
    case SYS_mq_timedreceive:
    case SYS_mq_timedsend:
    case SYS_splice:
    case SYS_tee:
      return ThreadState::kCommWait;
    case SYS_futex:
#ifdef SYS_futex_waitv
    case SYS_futex_waitv:
#endif
    case SYS_flock:
    case SYS_fcntl:  // F_SETLKW / F_OFD_SETLKW: the only fcntl commands that sleep
    case SYS_semop:
    case SYS_semtimedop:
      return ThreadState::kLockWait;
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
      return ThreadState::kTimerWait;
    default:
      return ThreadState::kOtherWait;
  }
}

bool MayBeUninterruptible(uint64_t syscall) {
  switch (syscall) {
    case kNoSyscall:  // blocked outside a system call: a page fault, or stopped
    case SYS_read:
    case SYS_write:
    case SYS_readv:
    case SYS_writev:
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_preadv:
    case SYS_pwritev:
    case SYS_preadv2:
    case SYS_pwritev2:
    case SYS_open:
    case SYS_openat:
    case SYS_close:
    case SYS_fsync:
    case SYS_fdatasync:
    case SYS_sync:
    case SYS_syncfs:
    case SYS_sync_file_range:
    case SYS_msync:
    case SYS_fallocate:
    case SYS_sendfile:
    case SYS_copy_file_range:
    case SYS_splice:
    case SYS_io_getevents:
    case SYS_io_uring_enter:
    case SYS_execve:
    case SYS_exit_group:
      return true;
    default:
      return false;
  }
}

void ThreadAccount::Begin(uint64_t start_ns, const SchedStat& baseline) {
  *this = ThreadAccount();
  last_ns_ = start_ns;
  last_ = baseline;
}

StateSplit ThreadAccount::Update(const Reading& r,
                                 const std::function<bool()>& blocked_since_last) {
  StateSplit split{};
  if (r.now_ns <= last_ns_)
    return split;
  const uint64_t interval = r.now_ns - last_ns_;
  // Counters never go back; a task reusing a tid would, so start it over.
  if (r.sched.cpu_ns < last_.cpu_ns || r.sched.run_delay_ns < last_.run_delay_ns) {
    Begin(last_ns_, SchedStat{});
  }
  // Counted by a Reread and never booked by the records it was prepaid for: CPU time and delay
  // not yet booked, like the carries.
  cpu_carry_ += cpu_prepaid_;
  delay_carry_ += runnable_prepaid_;
  cpu_prepaid_ = runnable_prepaid_ = 0;
  uint64_t cpu = r.sched.cpu_ns - last_.cpu_ns + cpu_carry_;
  uint64_t repaid = std::min(cpu, cpu_credit_);  // running already booked ahead of the counter
  cpu -= repaid;
  cpu_credit_ -= repaid;
  uint64_t running = std::min(cpu, interval);
  cpu_carry_ = cpu - running;

  uint64_t delay = r.sched.run_delay_ns - last_.run_delay_ns;
  uint64_t credited = std::min(delay, runnable_credit_);
  runnable_credit_ -= credited;
  delay = delay - credited + delay_carry_;
  uint64_t runnable = std::min(delay, interval - running);
  delay_carry_ = delay - runnable;

  uint64_t rest = interval - running - runnable;
  const bool seen_runnable = r.state == 'R';
  if (rest > 0 && seen_runnable && r.sched.run_count == last_.run_count && running > 0) {
    // Never switched since the last reading and it ran: on a CPU the whole interval. The CPU
    // counter lags by up to a tick; book the rest as running and repay it from later deltas.
    running += rest;
    cpu_credit_ += rest;
    rest = 0;
  }
  if (rest > 0) {
    ThreadState where;
    if (!seen_runnable) {
      where = WaitState(r.state, r.syscall);
      if (where != ThreadState::kRunnable)
        last_wait_ = where;
    } else if (rest > interval / 50 && blocked_since_last && blocked_since_last()) {
      where = last_wait_;  // woke up since; it waited where it was last seen waiting
    } else {
      where = ThreadState::kRunnable;  // queued now, or the CPU counter's lag
    }
    if (where == ThreadState::kRunnable)
      runnable_credit_ += rest;
    split[static_cast<int>(where)] += rest;
  }
  split[static_cast<int>(ThreadState::kRunning)] += running;
  split[static_cast<int>(ThreadState::kRunnable)] += runnable;
  last_ns_ = r.now_ns;
  last_ = r.sched;
  return split;
}

StateSplit ThreadAccount::Assume(uint64_t now_ns, ThreadState state) {
  StateSplit split{};
  if (now_ns <= last_ns_)
    return split;
  const uint64_t interval = now_ns - last_ns_;
  split[static_cast<int>(state)] = interval;
  if (state == ThreadState::kRunning) {
    // CPU time the counter showed beyond its interval pays for this first.
    uint64_t paid = std::min(cpu_carry_, interval);
    cpu_carry_ -= paid;
    cpu_credit_ += interval - paid;
  } else if (state == ThreadState::kRunnable) {
    uint64_t paid = std::min(delay_carry_, interval);
    delay_carry_ -= paid;
    runnable_credit_ += interval - paid;
  } else {
    last_wait_ = state;
  }
  last_ns_ = now_ns;
  return split;
}

void ThreadAccount::Book(uint64_t now_ns, const StateSplit& split, uint64_t counted_runnable) {
  if (now_ns <= last_ns_)
    return;
  auto pay = [](uint64_t amount, uint64_t* carry, uint64_t* prepaid, uint64_t* credit) {
    uint64_t paid = std::min(*carry, amount);
    *carry -= paid;
    amount -= paid;
    paid = std::min(*prepaid, amount);
    *prepaid -= paid;
    *credit += amount - paid;
  };
  pay(split[static_cast<int>(ThreadState::kRunning)], &cpu_carry_, &cpu_prepaid_, &cpu_credit_);
  const uint64_t runnable = split[static_cast<int>(ThreadState::kRunnable)];
  pay(runnable - std::min(runnable, counted_runnable), &delay_carry_, &runnable_prepaid_,
      &runnable_credit_);
  uint64_t most = 0;
  for (int i = static_cast<int>(ThreadState::kCommWait); i < kThreadStateCount; ++i)
    if (split[i] > most) {
      most = split[i];
      last_wait_ = static_cast<ThreadState>(i);
    }
  last_ns_ = now_ns;
}

void ThreadAccount::Owe(uint64_t cpu_ns) {
  // Not out of the credit: that is running the records booked since the last reading, which the
  // estimate comes on top of.
  cpu_carry_ += cpu_ns;
}

uint64_t ThreadAccount::Reread(const SchedStat& s,
                               uint64_t max_owed,
                               uint64_t pending_running,
                               uint64_t pending_runnable) {
  if (s.cpu_ns < last_.cpu_ns || s.run_delay_ns < last_.run_delay_ns) {
    // Not the task we knew (a reused tid): a new baseline, nothing to repay.
    last_ = s;
    cpu_credit_ = runnable_credit_ = cpu_carry_ = delay_carry_ = 0;
    cpu_prepaid_ = runnable_prepaid_ = 0;
    return 0;
  }
  // The counter catches up with the records' running time but for its lag (a tick at most for a
  // thread on a CPU), which stays as credit. It also counts what the records miss: each switch
  // costs the thread a few microseconds of kernel time between its switch records, 30% of the
  // CPU time of a thread switching 50,000 times a second. That is owed as running (carry).
  // What the caller's records hold and have not booked yet is counted too: that was neither
  // missed by the records nor a wake-up delay (owing it made a spinner's queued time running
  // and a blocked thread's sleep queued, by the records' own figures of the pass).
  const uint64_t counted = s.cpu_ns - last_.cpu_ns;
  const uint64_t repaid = std::min(counted, cpu_credit_);
  cpu_credit_ -= repaid;
  const uint64_t covered = std::min(counted - repaid, pending_running);
  cpu_prepaid_ += covered;
  cpu_carry_ += std::min(counted - repaid - covered, max_owed);
  uint64_t delay = s.run_delay_ns - last_.run_delay_ns;
  uint64_t credited = std::min(delay, runnable_credit_);
  runnable_credit_ -= credited;
  const uint64_t queued = std::min(delay - credited, pending_runnable);
  runnable_prepaid_ += queued;
  last_ = s;
  return delay - credited - queued;
}

}  // namespace parmon::sched
