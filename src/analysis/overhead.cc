// The report's overhead line (issue 11, item 9): what recording cost the program. Three parts:
// libparmon's events in the program's threads (events x the cost of one), the kernel's
// context-switch records, written on the switching thread's own time (two per switch, x the cost
// the recorder measured after the run, sched/switch_cost.h), and the recorder's own CPU, which
// takes a CPU from the program only when the CPUs were busy. Their sum is set against the run's
// wall time as the slowdown it caused (BuildOverhead).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "analysis/engine_impl.h"

namespace parmon::analysis {
namespace {

// The trace's measured cost when it has one, else the build's estimate.
void PickCost(const std::optional<double>& measured,
              double estimate,
              double* cost,
              std::string* source) {
  const bool have = measured && *measured >= 0;
  *cost = have ? *measured : estimate;
  *source = have ? "measured" : "estimate";
}

}  // namespace

void Engine::Impl::BuildOverhead(Results* res) const {
  Summary& s = res->summary;
  const format::EndInfo& totals = session.totals();
  PickCost(totals.event_cost_ns, options.default_event_cost_ns, &s.event_cost_ns,
           &s.event_cost_source);
  s.in_thread_events_ns =
      static_cast<uint64_t>(std::llround(s.event_cost_ns * static_cast<double>(runtime_events)));
  for (const Loc& l : locs)
    if (!l.cpu)
      s.switches += l.switches;
  if (s.switches > 0) {
    PickCost(totals.switch_record_cost_ns, options.default_switch_record_cost_ns,
             &s.switch_record_cost_ns, &s.switch_cost_source);
    s.in_thread_switches_ns = static_cast<uint64_t>(
        std::llround(2 * s.switch_record_cost_ns * static_cast<double>(s.switches)));
  }
  s.in_thread_overhead_ns = s.in_thread_events_ns + s.in_thread_switches_ns;
  s.calibration_cpu_ns = std::min(totals.calibration_cpu_ns, s.recorder_cpu_ns);
  if (s.program_cpu_ns <= s.in_thread_overhead_ns)
    return;
  // The share of the CPUs' time that was busy (by anyone): the recorder's CPU during the run took
  // that share of its time from others. Without CPU samples, all of it.
  const CpuAccount& a = res->cpu_account;
  double busy = 1;
  if (a.capacity_ns > 0)
    busy = 1 - static_cast<double>(std::min(a.idle_ns, a.capacity_ns)) /
                   static_cast<double>(a.capacity_ns);
  const double recorder_run = static_cast<double>(s.recorder_cpu_ns - s.calibration_cpu_ns);
  // The slowdown of the run's wall time. The rusage figures are the whole run's, so is the wall
  // time they are set against. Each thread pays its own in-thread time: the run is longer by the
  // average thread's share, in_thread / n, n the threads running on average. The recorder's CPU
  // on busy CPUs held a program thread off its CPU that long: in a program whose threads wait for
  // each other (MPI ranks, messages, channels, locks) the others then wait for it, so the whole
  // run is that much longer; among independent threads only the one held up is (1/n of it).
  const double wall = static_cast<double>(session_end > session_start ? session_end - session_start
                                                                      : s.duration_ns);
  if (wall <= 0)
    return;
  const double n = std::max(1.0, static_cast<double>(s.program_cpu_ns) / wall);
  bool coupled = has_comm || s.ranks > 1;
  for (const Loc& l : locs)
    coupled = coupled || (!l.cpu && l.waits[static_cast<int>(State::kLockWait)] > 0);
  const double taken = recorder_run * busy;
  const double delay =
      static_cast<double>(s.in_thread_overhead_ns) / n + (coupled ? taken : taken / n);
  if (delay < wall)
    s.estimated_slowdown = delay / (wall - delay);
}

}  // namespace parmon::analysis
