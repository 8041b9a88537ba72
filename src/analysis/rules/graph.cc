// The location graph and the chase of waits shared by the diagnosis rules (rules.h).
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

Graph BuildGraph(const Results& r) {
  Graph g;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread)
      continue;
    // A rank's run is its time between MPI start-up and shut-down: MPI_Init can take longer
    // than the work on a small run, and would dilute every share.
    uint64_t wall = l.wall_ns > l.mpi_init_ns ? l.wall_ns - l.mpi_init_ns : l.wall_ns;
    Node n{&l, l.label, wall, l.compute_ns};
    g.nodes.emplace(l.label, n);
  }
  return g;
}

// The link on which `label` waits most as a sender (or receiver), with that wait.
const LinkResult* WorstLink(const Results& r,
                            const std::string& label,
                            bool as_sender,
                            uint64_t* wait) {
  const LinkResult* best = nullptr;
  *wait = 0;
  for (const auto& k : r.links) {
    if ((as_sender ? k.from_label : k.to_label) != label)
      continue;
    uint64_t w = as_sender ? k.sender_wait_ns : k.receiver_wait_ns;
    if (w > *wait) {
      *wait = w;
      best = &k;
    }
  }
  return best;
}

// Follows waits from `start` (waiting on `next`) to the location the chain ends at.
std::vector<std::string> Chase(const Results& r,
                               const Graph& g,
                               const std::string& start,
                               const std::string& next,
                               bool as_sender) {
  std::vector<std::string> chain{start, next};
  std::set<std::string> seen{start, next};
  std::string cur = next;
  for (;;) {
    const Node* n = g.Find(cur);
    if (!n || !n->wall)
      break;
    uint64_t w;
    const LinkResult* k = WorstLink(r, cur, as_sender, &w);
    if (!k || static_cast<double>(w) < kChainThreshold * static_cast<double>(n->wall))
      break;
    const std::string& partner = as_sender ? k->to_label : k->from_label;
    if (seen.count(partner))
      break;  // a cycle: the last one before it is where the time goes
    chain.push_back(partner);
    seen.insert(partner);
    cur = partner;
  }
  return chain;
}

// For a bottleneck that computes less than half the time: what else keeps it (its largest
// state other than running, or its time in MPI), so the finding does not stop at the symptom.
std::string BusyElsewhere(const Node& n) {
  const LocationResult& l = *n.loc;
  int worst = -1;
  for (int i = 1; i < kStateCount; ++i)
    if (worst < 0 || l.states[i] > l.states[worst])
      worst = i;
  uint64_t state_ns = worst >= 0 ? l.states[worst] : 0;
  uint64_t mpi = l.mpi_ns - l.mpi_init_ns;
  if (mpi > state_ns)
    return fmt::format(" and is in MPI calls {}", FormatPercent(mpi, n.wall));
  if (worst < 0 || !state_ns)
    return "";
  static const char* const kWhat[kStateCount] = {
      "",         "queued for a CPU",    "waiting on communication", "waiting on locks",
      "sleeping", "waiting on disk I/O", "stopped or in other waits"};
  return fmt::format(" and is {} {}", kWhat[worst], FormatPercent(state_ns, Sum(l.states)));
}

}  // namespace parmon::analysis::rules
