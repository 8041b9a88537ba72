// Thread-state accounting for the /proc sampler.
//
// The kernel keeps three exact cumulative counters per thread (schedstat: CPU time, run-queue
// delay, times scheduled) but says what a thread is doing only at the instant we look (its state
// letter and the system call it is blocked in). ThreadAccount turns one reading per period into
// nanoseconds per state for the interval since the previous reading:
//   running  = the CPU-time delta,
//   runnable = the run-queue-delay delta,
//   the rest = time the thread was neither on a CPU nor queued as far as the counters know, split
//              by what the thread is doing now (blocked in futex: lock-wait, ...).
// Two kernel details need care. The CPU time of a thread that is on a CPU lags by up to one
// scheduler tick, and the run-queue delay of a queued thread is added only when it next runs; so
// the rest of a thread seen runnable may be either, and is booked as runnable and credited back
// when the delay arrives. A thread seen runnable that blocked since the last reading (its
// voluntary switch count grew) spent the rest waiting; that wait is booked under the category it
// was last seen waiting in. Over a run the sums stay exact: running adds up to the CPU time.
#ifndef PARMON_SRC_SCHED_CLASSIFY_H_
#define PARMON_SRC_SCHED_CLASSIFY_H_

#include <array>
#include <cstdint>
#include <functional>

#include "format/thread_state.h"
#include "sched/proc.h"

namespace parmon::sched {

// In the order of the ThreadStates event's args: the state enum shared with the analysis.
using ThreadState = format::ThreadState;
constexpr int kThreadStateCount = format::kThreadStateCount;
const char* ThreadStateName(ThreadState s);

// The state of a thread that is not running, from its /proc state letter and the (x86-64) system
// call it is blocked in (kNoSyscall when unknown).
ThreadState WaitState(char state_letter, uint64_t syscall);

// Whether a thread blocked in this system call may be in uninterruptible (disk) sleep, so that
// only its /proc state letter can tell comm-wait from io-wait.
bool MayBeUninterruptible(uint64_t syscall);

using StateSplit = std::array<uint64_t, kThreadStateCount>;

struct Reading {
  uint64_t now_ns = 0;
  SchedStat sched;
  char state = '?';
  uint64_t syscall = kNoSyscall;
};

class ThreadAccount {
 public:
  // Starts the account at start_ns with the counters' values then (zero for a new thread).
  void Begin(uint64_t start_ns, const SchedStat& baseline);
  // The split of (previous reading, r.now_ns]. blocked_since_last is asked only when needed (the
  // thread is seen runnable with time unaccounted for); it returns whether the thread blocked.
  StateSplit Update(const Reading& r, const std::function<bool()>& blocked_since_last);

  // Books (previous reading or booking, now_ns] wholly to state without reading the counters:
  // the caller knows the thread was not switched in or out in it (see activity.h). Running and
  // runnable time booked so are repaid from the counters' deltas at the next Update, as the CPU
  // counter's lag is; the counters' baseline stays at the last reading.
  StateSplit Assume(uint64_t now_ns, ThreadState state);

  // Books (previous reading or booking, now_ns] as split, worked out by the caller from the
  // context-switch records (their sum must be the interval). Like Assume, running and runnable
  // time booked so are repaid from the counters' deltas at the next Update or Reread, except
  // counted_runnable: runnable time a Reread returned, which the counters hold already.
  void Book(uint64_t now_ns, const StateSplit& split, uint64_t counted_runnable);
  // Takes a reading of the counters between bookings: repays what Book booked ahead and returns
  // the run-queue delay the counters show beyond it (a woken thread's wait for a CPU, which the
  // records book as blocked). CPU time the counter shows beyond the running booked is owed (see
  // cpu_owed), up to max_owed: the records miss a few microseconds of each switch, so the caller
  // allows that much per switch since the last reading; more is running whose records have not
  // been collected yet, which they will book. pending_running and pending_runnable: what the
  // caller's records hold and will Book after this reading (the counters count them already):
  // prepaid, neither owed now nor ahead of the counter when booked. The baseline moves to s.
  uint64_t Reread(const SchedStat& s,
                  uint64_t max_owed = 0,
                  uint64_t pending_running = 0,
                  uint64_t pending_runnable = 0);
  // CPU time counted (or estimated with Owe) and not yet booked as running: the caller books it
  // as running in its next intervals, out of what the records booked as waiting. (Running booked
  // beyond the counter, its lag, is credit instead, repaid by the next reading.)
  uint64_t cpu_owed() const { return cpu_carry_; }
  // CPU time a Reread counted ahead of the records that were to book it (see Reread), not yet
  // booked by them.
  uint64_t cpu_prepaid() const { return cpu_prepaid_; }
  // Running booked beyond the counter at its last reading (and booked since).
  uint64_t cpu_ahead() const { return cpu_credit_; }
  // Adds CPU time the counters could not show (what the records missed of a thread that ended
  // since its last reading, estimated by the caller).
  void Owe(uint64_t cpu_ns);

  ThreadState last_wait() const { return last_wait_; }

  uint64_t last_ns() const { return last_ns_; }
  const SchedStat& last() const { return last_; }

 private:
  uint64_t last_ns_ = 0;
  SchedStat last_;
  uint64_t cpu_carry_ = 0;        // CPU time not yet booked (it exceeded its interval)
  uint64_t cpu_credit_ = 0;       // running booked ahead of the CPU counter (it lagged)
  uint64_t delay_carry_ = 0;      // run-queue delay not yet booked
  uint64_t runnable_credit_ = 0;  // runnable booked before the kernel added it to the delay
  // Counted by a Reread before the records that hold it were booked (see Reread): Book pays
  // for them from these before anything is ahead of the counters.
  uint64_t cpu_prepaid_ = 0;
  uint64_t runnable_prepaid_ = 0;
  ThreadState last_wait_ = ThreadState::kOtherWait;
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_CLASSIFY_H_
