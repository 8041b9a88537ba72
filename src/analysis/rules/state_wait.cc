// Rules: a thread spending a large share of its time in one wait state (locks, disk, timers).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/rules/rules.h"
#include "analysis/units.h"

namespace parmon::analysis::rules {

namespace {

void StateFinding(const Results& r,
                  State s,
                  const char* id,
                  const char* what,
                  std::vector<Finding>* out) {
  uint64_t total = 0, wall = 0;
  const LocationResult* worst = nullptr;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread)
      continue;
    uint64_t v = l.states[static_cast<int>(s)];
    total += v;
    wall += l.wall_ns;
    if (!worst || v > worst->states[static_cast<int>(s)])
      worst = &l;
  }
  if (!worst || !worst->wall_ns ||
      static_cast<double>(worst->states[static_cast<int>(s)]) <
          kWaitThreshold * static_cast<double>(worst->wall_ns))
    return;
  uint64_t v = worst->states[static_cast<int>(s)];
  Finding f;
  f.id = id;
  f.text = fmt::format("{} spends {} of its time {}", worst->label,
                       FormatPercent(v, worst->wall_ns), what);
  f.evidence =
      fmt::format("{} {} of {}; all threads: {} of {}", FormatDuration(v), what,
                  FormatDuration(worst->wall_ns), FormatDuration(total), FormatDuration(wall));
  // The wall time to save is at most the worst thread's wait (the others wait beside it).
  f.time_at_stake_ns = v;
  f.thread_time_ns = total;
  f.percent_of_run = Percent(total, wall);
  f.subjects = {worst->label};
  out->push_back(std::move(f));
}

}  // namespace

void LockWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  StateFinding(r, State::kLockWait, "lock-wait", "waiting on locks", out);
}

void IoWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  StateFinding(r, State::kIoWait, "io-wait", "waiting on disk I/O", out);
}

void TimerWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  StateFinding(r, State::kTimerWait, "timer-wait", "sleeping (timer waits)", out);
}

}  // namespace parmon::analysis::rules
