// Diagnosis rules: each looks for one known way parallel programs lose time in the Results and
// adds findings (diagnosis.cc runs them all, from the registry, and ranks the findings). A rule
// is one function in its own file here; add it to Registry() in registry.cc.
//
// Shared by the rules: the graph of thread locations (a link's endpoints and a location are
// matched by location id, never by label) and the chase of waits along links to the partner
// that causes them.
#ifndef PARMON_SRC_ANALYSIS_RULES_RULES_H_
#define PARMON_SRC_ANALYSIS_RULES_RULES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/results.h"

namespace parmon::analysis::rules {

// A wait smaller than this share of a location's wall time is not worth a finding.
constexpr double kWaitThreshold = 0.10;
// Following a chain of waits: a partner that itself waits this much on its own partner passes
// the blame on.
constexpr double kChainThreshold = 0.25;

// A party to a link, as the rules compare it: a recorded thread location's id (an MPI link's end
// is its rank's main thread), or, for an end that is no recorded location (an MPI rank without
// its main thread, a channel nobody read), a negative id of its own.
using PartyId = int64_t;

struct Node {
  const LocationResult* loc = nullptr;
  std::string label;
  uint64_t wall = 0;
  uint64_t compute = 0;
};

struct Graph {
  std::map<PartyId, Node> nodes;                  // the thread locations
  std::map<PartyId, std::string> names;           // every party's label (for output only)
  std::vector<std::pair<PartyId, PartyId>> ends;  // by link index: (from, to)
  const Node* Find(PartyId id) const {
    auto it = nodes.find(id);
    return it == nodes.end() ? nullptr : &it->second;
  }
  const std::string& Name(PartyId id) const { return names.at(id); }
  PartyId From(const Results& r, const LinkResult& k) const {
    return ends[&k - r.links.data()].first;
  }
  PartyId To(const Results& r, const LinkResult& k) const {
    return ends[&k - r.links.data()].second;
  }
};

Graph BuildGraph(const Results& r);
// The link on which `who` waits most as a sender (or receiver), with that wait.
const LinkResult* WorstLink(const Results& r,
                            const Graph& g,
                            PartyId who,
                            bool as_sender,
                            uint64_t* wait);
// Follows waits from `start` (waiting on `next`) to the location the chain ends at. When the
// chain comes back to a party already in it, the parties from that one on wait on each other in
// a cycle: `cycle` (if given) gets them, in chain order; otherwise it is left empty.
std::vector<PartyId> Chase(const Results& r,
                           const Graph& g,
                           PartyId start,
                           PartyId next,
                           bool as_sender,
                           std::vector<PartyId>* cycle = nullptr);
// For a bottleneck that computes less than half the time: what else keeps it.
std::string BusyElsewhere(const Node& n);

// A feedback loop run one item at a time (serialised_cycle.cc).
struct Serialised {
  PartyId source = 0, feedback = 0, consumer = 0;
  uint64_t source_wait = 0, consumer_wait = 0;
  const LinkResult* link = nullptr;  // feedback -> source
  const LinkResult* out = nullptr;   // source -> consumer
  std::vector<PartyId> path;         // source -> consumer -> ... -> feedback
};
std::optional<Serialised> FindSerialisedLoop(const Results& r, const Graph& g);
Finding SerialisedFinding(const Graph& g, const Serialised& s);

// The rules.
using RuleFn = void (*)(const Results& r, const Graph& g, std::vector<Finding>* out);
struct Rule {
  const char* name;  // the id of the findings it makes (or their stem)
  RuleFn run;
};
void CrashRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void LinkWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void QueuedRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void ImbalanceRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void CollectiveWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void LockWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void IoWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void TimerWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out);
void CpuBoundRule(const Results& r, const Graph& g, std::vector<Finding>* out);
// Per interval, the running and runnable time of all thread locations summed (bound.cc).
std::vector<uint64_t> RunnableByInterval(const Results& r);
// The part of location `who`'s time in state s that fell in intervals where the other threads
// (runnable: RunnableByInterval, less who's own) were runnable on every CPU: waiting then delayed
// nothing, there was no CPU free.
uint64_t SaturatedWait(const Results& r,
                       const std::vector<uint64_t>& runnable,
                       size_t who,
                       State s);

// Every rule, in the order they run (findings are ranked afterwards; ties keep this order).
const std::vector<Rule>& Registry();

}  // namespace parmon::analysis::rules

#endif  // PARMON_SRC_ANALYSIS_RULES_RULES_H_
