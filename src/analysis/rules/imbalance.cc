// Rule: load imbalance across ranks or threads (the others wait for the slowest).
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

void ImbalanceRule(const Results& r, const Graph&, std::vector<Finding>* out) {
  const LoadImbalance& li = r.imbalance;
  if (li.members < 2 || li.percent < 10)
    return;
  // The others idle, on average, max - mean each while the slowest finishes; balanced, the run
  // would end max - mean sooner.
  const uint64_t saving = li.max_compute_ns - li.mean_compute_ns;
  const uint64_t idle = saving * li.members;
  Finding f;
  f.id = "imbalance";
  f.text = fmt::format(
      "load imbalance across {} {}: {} computes {}, the mean is {}: {} of its work is the others' "
      "waiting",
      li.members, li.over, li.max_label, FormatDuration(li.max_compute_ns),
      FormatDuration(li.mean_compute_ns), fmt::format("{:.0f}%", li.percent));
  f.evidence = fmt::format("compute time: max {} ({}), mean {}, min {} ({})",
                           FormatDuration(li.max_compute_ns), li.max_label,
                           FormatDuration(li.mean_compute_ns), FormatDuration(li.min_compute_ns),
                           li.min_label);
  f.time_at_stake_ns = saving;
  f.thread_time_ns = idle;
  f.percent_of_run = li.percent;
  f.subjects = {li.max_label, li.min_label};
  out->push_back(std::move(f));
}

}  // namespace parmon::analysis::rules
