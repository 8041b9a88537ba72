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
  std::map<int64_t, PartyId> main_thread;  // rank -> location id
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread)
      continue;
    // A rank's run is its time between MPI start-up and shut-down: MPI_Init can take longer
    // than the work on a small run, and would dilute every share.
    uint64_t wall = l.wall_ns > l.mpi_init_ns ? l.wall_ns - l.mpi_init_ns : l.wall_ns;
    g.nodes.emplace(l.id, Node{&l, l.label, wall, l.compute_ns});
    g.names.emplace(l.id, l.label);
  }
  // Ends that are no recorded thread: one negative id per MPI rank, per channel link's unread
  // end (named by what it is, e.g. its description), interned by that name.
  std::map<std::string, PartyId> others;
  auto party = [&](int64_t location, const std::string& label) {
    if (location >= 0 && g.nodes.count(location))
      return static_cast<PartyId>(location);
    auto [it, added] = others.emplace(label, -2 - static_cast<PartyId>(others.size()));
    if (added)
      g.names.emplace(it->second, label);
    return it->second;
  };
  for (const auto& k : r.links)
    g.ends.emplace_back(party(k.from_location, k.from_label), party(k.to_location, k.to_label));
  return g;
}

const LinkResult* WorstLink(const Results& r,
                            const Graph& g,
                            PartyId who,
                            bool as_sender,
                            uint64_t* wait) {
  const LinkResult* best = nullptr;
  *wait = 0;
  for (const auto& k : r.links) {
    if ((as_sender ? g.From(r, k) : g.To(r, k)) != who)
      continue;
    uint64_t w = as_sender ? k.sender_wait_ns : k.receiver_wait_ns;
    if (w > *wait) {
      *wait = w;
      best = &k;
    }
  }
  return best;
}

std::vector<PartyId> Chase(const Results& r,
                           const Graph& g,
                           PartyId start,
                           PartyId next,
                           bool as_sender,
                           std::vector<PartyId>* cycle) {
  std::vector<PartyId> chain{start, next};
  std::set<PartyId> seen{start, next};
  PartyId cur = next;
  for (;;) {
    const Node* n = g.Find(cur);
    if (!n || !n->wall)
      break;
    uint64_t w;
    const LinkResult* k = WorstLink(r, g, cur, as_sender, &w);
    if (!k || static_cast<double>(w) < kChainThreshold * static_cast<double>(n->wall))
      break;
    PartyId partner = as_sender ? g.To(r, *k) : g.From(r, *k);
    if (seen.count(partner)) {
      // A cycle: its members wait on each other, and none of them alone is where the time goes.
      if (cycle)
        cycle->assign(std::find(chain.begin(), chain.end(), partner), chain.end());
      break;
    }
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
  uint64_t mpi = l.mpi_ns;  // start-up and shut-down are not in it
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
