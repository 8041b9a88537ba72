// What a thread is doing: the one state enum of the sampler (src/sched, which writes a
// ThreadStates event with one arg per state in this order) and the analysis (src/analysis, whose
// reports show the first six states and fold the rest into "other").
#ifndef PARMON_SRC_FORMAT_THREAD_STATE_H_
#define PARMON_SRC_FORMAT_THREAD_STATE_H_

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

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_THREAD_STATE_H_
