// Rules: a thread spending a large share of its time in one wait state (locks, disk, timers).
#include <algorithm>
#include <functional>
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

// A thread's part of a wait state that a finding is about (all of it, or a share: LockWaitRule).
using WaitOf = std::function<uint64_t(const LocationResult&)>;

void StateFinding(const Results& r,
                  State s,
                  const WaitOf& wait_of,
                  const char* id,
                  const std::string& what,
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
    const uint64_t whole = l.states[static_cast<int>(s)];
    const uint64_t v = std::min(whole, wait_of(l));
    total += v;
    wall += l.wall_ns;
    // The part of v while no CPU was free: its share of the state's.
    const uint64_t idle =
        v ? std::min(v,
                     static_cast<uint64_t>(static_cast<double>(SaturatedWait(r, runnable, i, s)) *
                                           static_cast<double>(v) / static_cast<double>(whole)))
          : 0;
    if (!worst || v - idle > worst_cost) {
      worst = &l;
      worst_cost = v - idle;
      worst_idle = idle;
    }
  }
  if (!worst || !worst->wall_ns ||
      static_cast<double>(worst_cost) < kWaitThreshold * static_cast<double>(worst->wall_ns))
    return;
  uint64_t v = std::min(worst->states[static_cast<int>(s)], wait_of(*worst));
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

uint64_t All(const LocationResult&) {
  return UINT64_MAX;
}

}  // namespace

// The kernel books every futex wait as a lock wait. In a process that runs an OpenMP runtime
// the futex waits outside the program's own lock calls are the runtime's: its barriers and its
// workers idle between parallel regions (GCC's libgomp waits on futexes directly; without OMPT
// nothing says which construct). They are said to be in the OpenMP runtime, apart from waits
// on the program's locks.
void LockWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  constexpr int kLock = static_cast<int>(State::kLockWait);
  const auto& runtimes = r.omp.runtime_of_pid;
  auto in_runtime = [&](const LocationResult& l) -> uint64_t {
    if (!runtimes.count(l.pid))
      return 0;
    return l.states[kLock] - std::min(l.states[kLock], l.lock_calls_ns);
  };
  if (runtimes.empty()) {
    StateFinding(r, State::kLockWait, All, "lock-wait", "waiting on locks", out);
    return;
  }
  StateFinding(
      r, State::kLockWait, [&](const LocationResult& l) { return l.states[kLock] - in_runtime(l); },
      "lock-wait", "waiting on locks", out);
  std::string names;
  for (const auto& [pid, name] : runtimes)
    if (names.find(name) == std::string::npos)
      names += (names.empty() ? "" : ", ") + name;
  StateFinding(r, State::kLockWait, in_runtime, "omp-runtime-wait",
               fmt::format("waiting in the OpenMP runtime ({}: futex waits at its barriers and "
                           "of workers idle between parallel regions, outside any lock call of "
                           "the program)",
                           names),
               out);
}

void IoWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  StateFinding(r, State::kIoWait, All, "io-wait", "waiting on disk I/O", out);
}

void TimerWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  StateFinding(r, State::kTimerWait, All, "timer-wait", "sleeping (timer waits)", out);
}

}  // namespace parmon::analysis::rules
