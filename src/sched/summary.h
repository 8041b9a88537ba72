// Per-thread state totals and per-CPU utilisation of a trace, from the sampler's and the
// context-switch recorder's events (what `parmon info` prints; the full report is `parmon report`).
#ifndef PARMON_SRC_SCHED_SUMMARY_H_
#define PARMON_SRC_SCHED_SUMMARY_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "model/session.h"

namespace parmon::sched {

struct ThreadTotals {
  std::array<uint64_t, 8> state_ns{};  // ThreadStates args, summed
  uint64_t cpu_time_ns = 0;            // last ThreadSample
  uint64_t switches_blocked = 0, switches_preempted = 0, migrations = 0;
};

struct CpuTotals {
  uint64_t busy_ns = 0, idle_ns = 0, iowait_ns = 0, steal_ns = 0;
};

struct SchedSummary {
  std::map<uint32_t, ThreadTotals> threads;  // by location
  std::map<uint32_t, CpuTotals> cpus;        // by location
  uint64_t lost_switch_records = 0;
  bool empty() const { return threads.empty() && cpus.empty(); }
};

SchedSummary Summarize(const model::Session& session);
// The text tables of `parmon info` (nothing when the trace has no scheduling events).
void PrintSummary(const model::Session& session, const SchedSummary& s);
nlohmann::json SummaryJson(const model::Session& session, const SchedSummary& s);

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SUMMARY_H_
