// Rules: what bounds the run when nothing waits on anything. A program whose threads keep every
// CPU computing is CPU-bound: only less work or more CPUs shortens it, and a thread that waits
// meanwhile (a pool's idle worker, a main thread joining the others) is idle, not a bottleneck.
// (pigz -p 2 on 2 CPUs: its compress threads ran 95-98% of the time, and the finding at the top
// was its writer thread parked on a futex "98% waiting on locks".)
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/rules/rules.h"
#include "analysis/units.h"

namespace parmon::analysis::rules {

namespace {

// The program's threads kept the CPUs this busy computing (over the CPUs' time): CPU-bound.
constexpr double kCpuBoundShare = 0.80;

}  // namespace

std::vector<uint64_t> RunnableByInterval(const Results& r) {
  const IntervalSeries& iv = r.intervals;
  std::vector<uint64_t> total(iv.count, 0);
  for (size_t l = 0; l < r.locations.size() && l < iv.location_states.size(); ++l) {
    if (r.locations[l].type != LocationKind::kThread)
      continue;
    const auto& row = iv.location_states[l];
    for (size_t i = 0; i < iv.count && i < row.size(); ++i)
      total[i] +=
          row[i][static_cast<int>(State::kRunning)] + row[i][static_cast<int>(State::kRunnable)];
  }
  return total;
}

uint64_t SaturatedWait(const Results& r,
                       const std::vector<uint64_t>& runnable,
                       size_t who,
                       State s) {
  const IntervalSeries& iv = r.intervals;
  const uint32_t cpus = r.summary.cpus;
  if (!cpus || who >= iv.location_states.size())
    return 0;
  const auto& own = iv.location_states[who];
  const double full = 0.9 * static_cast<double>(cpus) * static_cast<double>(iv.interval_ns);
  uint64_t hidden = 0;
  for (size_t i = 0; i < own.size() && i < runnable.size(); ++i) {
    const uint64_t mine =
        r.locations[who].type == LocationKind::kThread
            ? own[i][static_cast<int>(State::kRunning)] + own[i][static_cast<int>(State::kRunnable)]
            : 0;
    // The others were runnable on every CPU: had this thread been ready, it would have queued.
    if (static_cast<double>(runnable[i] - std::min(runnable[i], mine)) >= full)
      hidden += own[i][static_cast<int>(s)];
  }
  return hidden;
}

void CpuBoundRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  const uint32_t cpus = r.summary.cpus;
  const uint64_t wall = r.summary.duration_ns;
  if (!cpus || !wall)
    return;
  // Computing, not running: a rank polling for a message in MPI runs without computing.
  uint64_t computing = 0, queued = 0;
  size_t threads = 0;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread || !l.sampled)
      continue;
    computing += std::min(l.compute_ns, l.states[static_cast<int>(State::kRunning)]);
    queued += l.states[static_cast<int>(State::kRunnable)];
    ++threads;
  }
  const double capacity = static_cast<double>(cpus) * static_cast<double>(wall);
  const double share = static_cast<double>(computing) / capacity;
  if (share < kCpuBoundShare)
    return;
  Finding f;
  f.id = "cpu-bound";
  f.text = fmt::format(
      "the program is CPU-bound on {} CPU{}: its threads computed {:.0f}% of the CPUs' time", cpus,
      cpus == 1 ? "" : "s", 100.0 * share);
  f.evidence = fmt::format(
      "{} computing in {} threads of {} x {} CPU time; {} queued for a CPU; only less work or "
      "more CPUs shortens the run",
      FormatDuration(computing), threads, cpus, FormatDuration(wall), FormatDuration(queued));
  // It bounds the whole run: ranked first (a wait beside it costs nothing while the CPUs are
  // full, see SaturatedWait).
  f.time_at_stake_ns = wall;
  f.thread_time_ns = computing;
  f.percent_of_run = 100.0 * std::min(1.0, share);
  out->push_back(std::move(f));
}

}  // namespace parmon::analysis::rules
