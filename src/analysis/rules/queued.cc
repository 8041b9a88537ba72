// Rule: threads queued for a CPU (more runnable threads than CPUs, or other work).
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

// An MPI job's own threads: each rank's main thread and the other threads of its process that
// compute at least 10% of their life (an OpenMP worker). The launcher's processes (mpirun, its
// daemons) and the MPI library's helper threads, which mostly sleep, are not the program: counted
// in, they dilute its share (issue 11, item 3: 20 such threads beside 8 ranks made "18% of
// thread time queued" of ranks that were queued 63% of theirs). Without ranks: every thread.
std::set<uint32_t> ProgramThreads(const Results& r, bool* ranks) {
  std::set<uint32_t> rank_pids, out;
  for (const auto& l : r.locations)
    if (l.type == LocationKind::kThread && l.rank >= 0)
      rank_pids.insert(l.pid);
  *ranks = !rank_pids.empty();
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread)
      continue;
    if (!*ranks || l.main_thread ||
        (rank_pids.count(l.pid) && l.wall_ns && l.compute_ns * 10 >= l.wall_ns))
      out.insert(l.id);
  }
  return out;
}

}  // namespace

void QueuedRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  bool ranks = false;
  const std::set<uint32_t> program = ProgramThreads(r, &ranks);
  uint64_t runnable = 0, total = 0, left_out_queued = 0;
  size_t busy = 0, queued_threads = 0, left_out = 0;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread || !l.sampled)
      continue;
    if (!program.count(l.id)) {
      ++left_out;
      left_out_queued += l.states[static_cast<int>(State::kRunnable)];
      continue;
    }
    uint64_t t = Sum(l.states);
    uint64_t q = l.states[static_cast<int>(State::kRunnable)];
    uint64_t run = l.states[static_cast<int>(State::kRunning)];
    runnable += q;
    total += t;
    queued_threads += q != 0;
    if (t && run + q >= t / 2)
      ++busy;
  }
  if (!total || static_cast<double>(runnable) < 0.05 * static_cast<double>(total))
    return;
  Finding f;
  f.id = "queued";
  uint32_t cpus = r.summary.cpus;
  const std::string on_cpus = cpus ? fmt::format("{} CPUs", cpus) : std::string("the CPUs");
  const char* whose = ranks ? "the ranks' threads' time" : "thread time";
  if (cpus && busy > cpus)
    f.text = fmt::format("{} runnable threads on {}: {} of {} is spent queued, waiting for a CPU",
                         busy, on_cpus, FormatPercent(runnable, total), whose);
  else  // not this program's threads alone: other work on the machine, or bursts
    f.text = fmt::format(
        "{} of {} is spent queued, waiting for a CPU ({} of the program's threads were "
        "runnable most of the time, on {}: the rest of the queueing is other work on the "
        "machine or short bursts)",
        FormatPercent(runnable, total), whose, busy, on_cpus);
  f.evidence =
      fmt::format("{} queued of {} sampled {}", FormatDuration(runnable), FormatDuration(total),
                  ranks ? fmt::format("time of the ranks' {} threads", program.size())
                        : std::string("thread time"));
  if (left_out)
    f.evidence +=
        fmt::format(" (left out: {} launcher processes and MPI helper threads, queued {} in all)",
                    left_out, FormatDuration(left_out_queued));
  // With a CPU each, the queued threads would have run that much sooner each: the mean over them
  // of their queued time is what the run's wall time could lose.
  f.time_at_stake_ns = runnable / std::max<size_t>(queued_threads, 1);
  f.thread_time_ns = runnable;
  f.percent_of_run = Percent(runnable, total);
  std::vector<std::pair<uint64_t, std::string>> worst;
  for (const auto& l : r.locations)
    if (l.type == LocationKind::kThread && program.count(l.id) &&
        l.states[static_cast<int>(State::kRunnable)])
      worst.push_back({l.states[static_cast<int>(State::kRunnable)], l.label});
  std::sort(worst.rbegin(), worst.rend());
  for (size_t i = 0; i < worst.size() && i < 3; ++i) {
    f.evidence += fmt::format("; {} queued {}", worst[i].second, FormatDuration(worst[i].first));
    f.subjects.push_back(worst[i].second);
  }
  out->push_back(std::move(f));
}

}  // namespace parmon::analysis::rules
