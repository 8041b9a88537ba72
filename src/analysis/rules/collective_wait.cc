// Rule: ranks waiting for each other in barriers and N-to-N collectives.
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

void CollectiveWaitRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  uint64_t barrier = 0, coll = 0, wall = 0;
  size_t ranks = 0;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread || l.rank < 0)
      continue;
    barrier += l.barrier_wait_ns;
    coll += l.collective_wait_ns;
    wall += l.wall_ns;
    ++ranks;
  }
  uint64_t total = barrier + coll;
  if (!wall || static_cast<double>(total) < 0.05 * static_cast<double>(wall))
    return;
  const WaitStateResult* worst = nullptr;
  for (const auto& w : r.wait_states)
    if ((w.kind == WaitPattern::kBarrier || w.kind == WaitPattern::kNToN) &&
        (!worst || w.ns > worst->ns))
      worst = &w;
  Finding f;
  f.id = "collective-wait";
  f.text =
      fmt::format("ranks spend {} of their time waiting for each other in {}{}",
                  FormatPercent(total, wall), barrier >= coll ? "barriers" : "N-to-N collectives",
                  worst ? fmt::format("; most: {} in {}", worst->location_label, worst->call) : "");
  f.evidence = fmt::format("{} at barriers, {} at N-to-N collectives, of {} rank time",
                           FormatDuration(barrier), FormatDuration(coll), FormatDuration(wall));
  // The ranks wait side by side: the wall time to save is the mean rank's wait.
  f.time_at_stake_ns = total / std::max<size_t>(ranks, 1);
  f.thread_time_ns = total;
  f.percent_of_run = Percent(total, wall);
  if (worst)
    f.subjects = {worst->location_label};
  out->push_back(std::move(f));
}

}  // namespace parmon::analysis::rules
