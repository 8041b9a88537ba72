// The scheduling sources of `parmon record` (the /proc sampler and the context-switch recorder),
// set up from the command line's -t, --mode, -p and --threads.
#ifndef PARMON_SRC_SCHED_SCHED_H_
#define PARMON_SRC_SCHED_SCHED_H_

#include <cstdint>
#include <set>
#include <string>

#include "recorder/recorder.h"

namespace parmon::sched {

// Trace mode's default budget for context-switch records (--switch-budget; switch_budget.h).
inline constexpr double kDefaultSwitchBudget = 0.05;

struct SchedOptions {
  uint64_t period_ns = 10'000'000;  // -t
  bool periodic = false;            // --mode periodic
  bool attached = false;            // -p PID
  bool switches = true;             // perf_event_open context switches
  // --switch-budget: trace mode stops the switch records when over a window they would cost more
  // than this share of the program's CPU time (switch_budget.h); 0 = never.
  double switch_budget = kDefaultSwitchBudget;
  std::set<uint32_t> only_tids;  // --threads
};

constexpr uint64_t kMinPeriodNs = 1'000'000;
constexpr uint64_t kMaxPeriodNs = 60'000'000'000;

// Adds the sampler and (unless switched off) the context-switch recorder to the recorder.
void AddSchedSources(recorder::Recorder& recorder, const SchedOptions& options);

// Parses --switch-budget: "5", "5%" or "0.5" (percent of the program's CPU time, more than 0
// and at most 100), "0" or "none" (no budget). False (and *error says why) on anything else.
bool ParseSwitchBudget(const std::string& text, double* share, std::string* error);

// Parses "12,13,40": false (and *error says why) on anything else.
bool ParseThreadList(const std::string& text, std::set<uint32_t>* out, std::string* error);

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SCHED_H_
