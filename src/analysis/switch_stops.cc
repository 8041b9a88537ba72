// The switch-record budget's stops (SwitchesStopped, docs/events.md): `parmon record` turned the
// context-switch records off part-way through a trace-mode run because they cost the program too
// much (sched/switch_budget.h). Up to the stop a thread is timed by its records; from it on, the
// engine takes it as a trace without switch records takes every thread: its states come from the
// sampler's ThreadStates (the sampler reads /proc for it from the stop on), its computation on the
// critical path from the running those samples booked, its time in channel calls all waiting.
// Everything before the stop keeps what its records said. A stop is known by its process and
// time, and put on the session's time line as that process's events are.
#include <algorithm>
#include <utility>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

bool Engine::Impl::SwitchStopApplied(const format::Definitions::SwitchStop& stop) const {
  return std::find(switch_stops_applied.begin(), switch_stops_applied.end(),
                   std::make_pair(stop.pid, stop.ts)) != switch_stops_applied.end();
}

uint64_t Engine::Impl::SwitchStopTime(const format::Definitions::SwitchStop& stop) const {
  const auto& streams = session.streams();
  for (model::StreamIndex i = 0; i < streams.size(); ++i) {
    auto it = defs.locations.find(streams[i].location);
    if (it != defs.locations.end() && it->second.pid == stop.pid &&
        streams[i].source != format::Source::kDefinitions)
      return session.Aligned(i, stop.ts);
  }
  return stop.ts;
}

void Engine::Impl::NoteSwitchStops() {
  switch_stops_noted = defs.switch_stops.size();
  next_switch_stop = UINT64_MAX;
  for (const format::Definitions::SwitchStop& stop : defs.switch_stops)
    if (!SwitchStopApplied(stop))
      next_switch_stop = std::min(next_switch_stop, SwitchStopTime(stop));
}

bool Engine::Impl::InProcessTree(uint32_t pid, uint32_t root) const {
  if (root == 0 || pid == root)
    return true;
  // Up the parents the session defined (a bounded walk: a damaged trace may hold a cycle).
  for (int depth = 0; depth < 64 && pid != 0; ++depth) {
    auto it = defs.processes.find(pid);
    if (it == defs.processes.end() || it->second.ppid == pid)
      return false;
    pid = it->second.ppid;
    if (pid == root)
      return true;
  }
  return false;
}

void Engine::Impl::ApplySwitchStops(uint64_t ts) {
  for (const format::Definitions::SwitchStop& stop : defs.switch_stops) {
    const uint64_t at = SwitchStopTime(stop);
    if (at > ts || SwitchStopApplied(stop))
      continue;
    switch_stops_applied.emplace_back(stop.pid, stop.ts);
    // A root the session never defined (a recorder that followed a process it did not start)
    // stands for every thread.
    const uint32_t root = defs.processes.count(stop.pid) ? stop.pid : 0;
    for (Loc& l : locs)
      if (!l.cpu && InProcessTree(l.pid, root))
        StopSwitchTiming(l, at);
  }
  NoteSwitchStops();
}

void Engine::Impl::StopSwitchTiming(Loc& l, uint64_t t) {
  if (!l.switch_timed)
    return;
  // The path up to the stop from the running clock (Accrue marks t when the thread computes).
  Accrue(l, t);
  if (l.on_cpu != kNone) {
    l.run_clock += t > l.on_cpu ? t - l.on_cpu : 0;
    l.on_cpu = kNone;
  }
  // Where it was at the stop is not known after it: an open spell off a CPU ends there.
  l.preempted_spells.Close(t);
  l.blocked_spells.Close(t);
  l.switch_timed = false;
  // From here Accrue spends the running its samples book. What they booked so far, and the
  // running since its latest sample (which the next sample will book), went on the path by the
  // running clock already.
  uint64_t run = l.sampled_states[static_cast<int>(State::kRunning)];
  run -= std::min(run, l.spin_ns);
  l.cp_spent = run + (l.run_clock - std::min(l.run_clock, l.run_at_sample));
}

void Engine::Impl::BuildSwitchStops(Results* res) const {
  for (const format::Definitions::SwitchStop& stop : defs.switch_stops) {
    Summary::SwitchStop x;
    x.ts = SwitchStopTime(stop);
    x.pid = stop.pid;
    auto rank = rank_of_pid.find(stop.pid);
    x.rank = rank == rank_of_pid.end() ? -1 : rank->second;
    x.records = stop.records;
    x.rate_per_s = stop.window_ns ? static_cast<double>(stop.window_records) * 1e9 /
                                        static_cast<double>(stop.window_ns)
                                  : 0;
    x.share = stop.share();
    x.budget = static_cast<double>(stop.budget_ppm) / 1e6;
    x.cost_ns = static_cast<double>(stop.cost_ns);
    res->summary.switch_stops.push_back(x);
  }
  std::sort(res->summary.switch_stops.begin(), res->summary.switch_stops.end(),
            [](const Summary::SwitchStop& a, const Summary::SwitchStop& b) { return a.ts < b.ts; });
}

}  // namespace parmon::analysis
