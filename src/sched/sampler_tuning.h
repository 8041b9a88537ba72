// Internal to the sampler's files (sampler.cc, sampler_records.cc, sampler_source.cc): its tuning
// constants and the small helpers that build its output events.
#ifndef PARMON_SRC_SCHED_SAMPLER_TUNING_H_
#define PARMON_SRC_SCHED_SAMPLER_TUNING_H_

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

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

inline uint64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

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
