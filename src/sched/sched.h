// The scheduling sources of `parmon record` (the /proc sampler and the context-switch recorder),
// set up from the command line's -t, --mode, -p and --threads.
#ifndef PARMON_SRC_SCHED_SCHED_H_
#define PARMON_SRC_SCHED_SCHED_H_

#include <cstdint>
#include <set>
#include <string>

#include "recorder/recorder.h"

namespace parmon::sched {

struct SchedOptions {
  uint64_t period_ns = 10'000'000;  // -t
  bool periodic = false;            // --mode periodic
  bool attached = false;            // -p PID
  bool switches = true;             // perf_event_open context switches
  std::set<uint32_t> only_tids;     // --threads
};

constexpr uint64_t kMinPeriodNs = 1'000'000;
constexpr uint64_t kMaxPeriodNs = 60'000'000'000;

// Adds the sampler and (unless switched off) the context-switch recorder to the recorder.
void AddSchedSources(recorder::Recorder& recorder, const SchedOptions& options);

// Parses "12,13,40": false (and *error says why) on anything else.
bool ParseThreadList(const std::string& text, std::set<uint32_t>* out, std::string* error);

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SCHED_H_
