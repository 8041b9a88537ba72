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
  // The worst thread by the wait that cost something: not the part spent while the other threads
  // kept every CPU busy (a pool's idle worker, a main thread joining: idle, not a bottleneck).
  const std::vector<uint64_t> runnable = RunnableByInterval(r);
  uint64_t total = 0, wall = 0, worst_cost = 0, worst_idle = 0;
  const LocationResult* worst = nullptr;
  for (size_t i = 0; i < r.locations.size(); ++i) {
    const LocationResult& l = r.locations[i];
    if (l.type != LocationKind::kThread)
      continue;
    uint64_t v = l.states[static_cast<int>(s)];
    total += v;
    wall += l.wall_ns;
    const uint64_t idle = v ? std::min(v, SaturatedWait(r, runnable, i, s)) : 0;
    if (!worst || v - idle > worst_cost) {
      worst = &l;
      worst_cost = v - idle;
      worst_idle = idle;
    }
  }
  if (!worst || !worst->wall_ns ||
      static_cast<double>(worst_cost) < kWaitThreshold * static_cast<double>(worst->wall_ns))
    return;
  uint64_t v = worst->states[static_cast<int>(s)];
  Finding f;
  f.id = id;
  f.text = fmt::format("{} spends {} of its time {}", worst->label,
                       FormatPercent(v, worst->wall_ns), what);
  f.evidence =
      fmt::format("{} {} of {}; all threads: {} of {}", FormatDuration(v), what,
                  FormatDuration(worst->wall_ns), FormatDuration(total), FormatDuration(wall));
  if (worst_idle > 0)
    f.evidence += fmt::format("; {} of it while the other threads kept every CPU busy",
                              FormatDuration(worst_idle));
  // The wall time to save is at most the worst thread's wait (the others wait beside it), less
  // what it waited while no CPU was free.
  f.time_at_stake_ns = worst_cost;
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
