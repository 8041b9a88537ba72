// What a thread is doing: the one state enum of the sampler (src/sched, which writes a
// ThreadStates event with one arg per state in this order) and the analysis (src/analysis, whose
// reports show the first six states and fold the rest into "other").
#ifndef PARMON_SRC_FORMAT_THREAD_STATE_H_
#define PARMON_SRC_FORMAT_THREAD_STATE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace parmon::format {

enum class ThreadState : uint8_t {
  kRunning = 0,
  kRunnable,   // ready but queued for a CPU
  kCommWait,   // blocked on a message, pipe, socket
  kLockWait,   // blocked on a mutex, condition variable, barrier, join
  kTimerWait,  // sleeping
  kIoWait,     // blocked on disk I/O
  kStopped,    // stopped by a signal or a tracer
  kOtherWait,  // blocked on something else
  // The reports' seventh state: time a location existed but nothing said what it did (stopped,
  // other waits, idle, or no sampler data for that span). Reports keep kReportStateCount states.
  kOther = kStopped,
};
// States of a ThreadStates event (its args, in the order above).
constexpr int kThreadStateCount = 8;
// States of a report: the first six and kOther.
constexpr int kReportStateCount = 7;

// Takes up to `want` ns out of `v` (a state split, `n` entries, ThreadState order): first the
// waits, then running and runnable in proportion. Adds what it took per state to `taken` (when
// given) and returns the total taken (less than `want` when `v` holds less). The time a thread
// spent inside MPI calls, which the report (analysis/mpi_time.cc) and the self-monitoring read
// (sched/monitor.cc) both book as communication however the MPI library waited.
inline uint64_t TakeMpiTime(uint64_t* v, int n, uint64_t want, uint64_t* taken) {
  constexpr int kRun = static_cast<int>(ThreadState::kRunning);
  constexpr int kQueued = static_cast<int>(ThreadState::kRunnable);
  // The waits a rank's MPI library makes while it waits: sleeps, its locks, its polls, the rest.
  constexpr int kWaits[] = {
      static_cast<int>(ThreadState::kTimerWait), static_cast<int>(ThreadState::kLockWait),
      static_cast<int>(ThreadState::kCommWait),  7,
      static_cast<int>(ThreadState::kStopped),   static_cast<int>(ThreadState::kIoWait)};
  uint64_t got = 0;
  auto take = [&](int i, uint64_t amount) {
    amount = std::min(amount, v[i]);
    v[i] -= amount;
    got += amount;
    if (taken)
      taken[i] += amount;
  };
  for (int i : kWaits)
    if (i < n && got < want)
      take(i, want - got);
  uint64_t busy = v[kRun] + v[kQueued];
  if (got < want && busy) {
    uint64_t rest = std::min(want - got, busy);
    auto run = static_cast<uint64_t>(std::llround(
        static_cast<double>(rest) * static_cast<double>(v[kRun]) / static_cast<double>(busy)));
    take(kRun, run);
    take(kQueued, rest - std::min(rest, run));
    if (got < want)
      take(kRun, want - got);
  }
  return got;
}

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_THREAD_STATE_H_
