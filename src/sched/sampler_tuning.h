// Internal to the sampler's files (sampler.cc, sampler_records.cc, sampler_source.cc): its tuning
// constants and the small helpers that build its output events.
#ifndef PARMON_SRC_SCHED_SAMPLER_TUNING_H_
#define PARMON_SRC_SCHED_SAMPLER_TUNING_H_

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/clock.h"
#include "sched/events.h"
#include "sched/sampler.h"

namespace parmon::sched::sampler_internal {

inline constexpr uint64_t kDiscoverEvery = 10;  // passes between scans for child processes
inline constexpr uint64_t kProcessEvery = 10;   // passes between reads of a process's own counters
inline constexpr uint64_t kStatEvery = 10;      // passes between stat reads of a thread that runs
inline constexpr uint32_t kIdlePasses = 3;  // passes without running before a thread is read less
inline constexpr uint64_t kIdleEvery = 4;   // then: passes between reads
// A thread booked from the switch records is still read now and then: a running one every few
// passes so its ThreadSample CPU time stays close (the report's CPU time is the latest), a
// blocked one once a second in case a record went missing without a LOST record.
inline constexpr uint32_t kAssumeRunningPasses = 4;
inline constexpr uint32_t kAssumeWaitingPasses = 100;
// A thread timed from the records that switches again and again: passes between reads of its
// counters (for the run-queue delay after its wake-ups and its CPU time), and at most between
// reads of what it blocks in (see ReadWait). Each read costs 1-3 us of the sampler's CPU per
// thread; at 10 ms, 50 such threads read every pass would take 3% of a CPU.
inline constexpr uint64_t kCountersEvery = 8;
inline constexpr uint32_t kMaxWaitEvery = 16;
// A timed thread that switched this often in a pass has its counters read that pass: the
// records miss a few microseconds of CPU per switch, which the counter's reading puts back (see
// SplitFromRecords) before it adds up to much of an interval.
inline constexpr uint32_t kBusySwitches = 32;
// At most this much CPU time per switch is owed as running that the records missed (they miss
// about 5 us a switch; more is records not collected yet).
inline constexpr uint64_t kMaxMissPerSwitchNs = 50'000;
// How far a thread's CPU counter may lag the records while it is on a CPU (the kernel updates it
// at its scheduler tick: 10 ms at HZ=100). Beyond that, and wholly for a thread off a CPU (whose
// counter is exact), running booked ahead of the counter was not CPU time: the records count a
// thread as running while the hypervisor has taken its virtual CPU away.
inline constexpr uint64_t kCounterLagNs = 10'000'000;
// The exit of a timed thread: what the records missed since its last reading is estimated from
// the counter's CPU time over the records' running until then, once there is this much of it.
inline constexpr uint64_t kMinRunForRatio = 20'000'000;
inline constexpr double kMaxCpuRatio = 3.0;

inline std::string TaskPath(uint32_t pid, uint32_t tid, const char* file) {
  return fmt::format("/proc/{}/task/{}/{}", pid, tid, file);
}

inline void PushStates(uint32_t pid,
                       uint32_t tid,
                       uint64_t now_ns,
                       const StateSplit& split,
                       std::vector<SamplerCore::Output>* out) {
  format::Event e;
  e.kind = static_cast<uint16_t>(format::Kind::kThreadStates);
  e.ts = now_ns;
  e.nargs = kThreadStateCount;
  for (int i = 0; i < kThreadStateCount; ++i)
    e.args[i] = split[i];
  out->push_back({pid, tid, -1, e});
}

inline void PushSample(uint32_t pid,
                       uint32_t tid,
                       uint64_t ts,
                       uint64_t cpu_ns,
                       int32_t cpu,
                       uint64_t syscall,
                       char state,
                       uint64_t run_count,
                       std::vector<SamplerCore::Output>* out) {
  out->push_back(
      {pid, tid, -1,
       MakeEvent(format::Kind::kThreadSample, ts,
                 {cpu_ns, static_cast<uint64_t>(std::max(cpu, 0)), syscall,
                  static_cast<uint64_t>(static_cast<unsigned char>(state)), run_count})});
}

}  // namespace parmon::sched::sampler_internal

#endif  // PARMON_SRC_SCHED_SAMPLER_TUNING_H_
