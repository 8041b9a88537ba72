// Diagnosis: turns Results into a short ranked list of findings in plain words. Each rule looks
// for one known way parallel programs lose time (the seeds' case studies: a pipeline stalled by
// its slowest stage, threads queued for too few CPUs, ranks waiting for the slowest one), states
// the evidence, and the time at stake: what fixing it could save of the run's wall time (a sum
// over threads is not that: four threads each queued for a second cost the run a second, not
// four). Findings are ranked by that time, which never exceeds the wall time.
//
// Waits propagate: in a pipeline A -> B -> C where C is slow, B waits sending to C and A waits
// sending to B. The bottleneck is found by following each wait to the partner until a location
// that does not itself mostly wait on a further partner (the Hathi-2 ring case study: the first
// processor's output link waited 90% of the time, and the cause was at the end of the ring).
#include <algorithm>
#include <vector>

#include "analysis/engine.h"
#include "analysis/rules/rules.h"

namespace parmon::analysis {

void Diagnose(Results* r) {
  std::vector<Finding> f;
  rules::Graph g = rules::BuildGraph(*r);
  for (const rules::Rule& rule : rules::Registry())
    rule.run(*r, g, &f);
  // An imbalance whose slowest member is a bottleneck a link finding already names is the same
  // time seen from the other side: it becomes that finding's evidence, not a second finding.
  auto imb = std::find_if(f.begin(), f.end(), [](const Finding& x) { return x.id == "imbalance"; });
  if (imb != f.end()) {
    for (auto& x : f) {
      if ((x.id == "link-wait-send" || x.id == "link-wait-receive") && x.subjects.size() > 2 &&
          x.subjects[2] == r->imbalance.max_label) {
        x.evidence += "; load imbalance: " + imb->evidence;
        f.erase(imb);
        break;
      }
    }
  }
  const uint64_t wall = r->summary.duration_ns;
  for (auto& x : f) {
    if (wall && x.time_at_stake_ns > wall)
      x.time_at_stake_ns = wall;
    x.thread_time_ns = std::max(x.thread_time_ns, x.time_at_stake_ns);
  }
  std::stable_sort(f.begin(), f.end(), [](const Finding& a, const Finding& b) {
    return a.time_at_stake_ns > b.time_at_stake_ns;
  });
  r->findings = std::move(f);
}

}  // namespace parmon::analysis
