// Rule helper: a feedback loop run one item at a time (the Hathi-2 ring master's logical error),
// found from the links' closed-loop message counts (analysis/loop_clocks.h).
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

// The path of links from `from` to `to` (message direction) that does not pass through
// `avoid`, empty when there is none.
std::vector<PartyId> FlowPath(const Results& r,
                              const Graph& g,
                              PartyId from,
                              PartyId to,
                              PartyId avoid) {
  constexpr PartyId kRoot = INT64_MIN;
  std::map<PartyId, PartyId> parent{{from, kRoot}};
  std::vector<PartyId> queue{from};
  for (size_t i = 0; i < queue.size(); ++i) {
    for (const auto& k : r.links) {
      PartyId kf = g.From(r, k), kt = g.To(r, k);
      if (kf != queue[i] || !k.messages || parent.count(kt) || kt == avoid)
        continue;
      parent[kt] = queue[i];
      if (kt == to) {
        std::vector<PartyId> path{to};
        while (parent[path.back()] != kRoot)
          path.push_back(parent[path.back()]);
        return {path.rbegin(), path.rend()};
      }
      queue.push_back(kt);
    }
  }
  return {};
}

}  // namespace

// A feedback loop run one item at a time: `source` hands work to `consumer` only after the
// consumer's previous output has come back round the loop to it, through `feedback`, and
// meanwhile waits receiving from `feedback` (the Hathi-2 ring master's logical error): the loop
// never fills, and the link feedback -> source is where.
Finding SerialisedFinding(const Graph& g, const Serialised& s) {
  const Node* src = g.Find(s.source);
  const Node* con = g.Find(s.consumer);
  std::string ring;
  for (PartyId p : s.path)
    ring += g.Name(p) + " -> ";
  ring += g.Name(s.source);
  Finding f;
  f.id = "serialised-cycle";
  f.text = fmt::format(
      "{} waits {} of the run receiving from {} before it hands out more work: {} of its {} "
      "messages to {} were sent only after {}'s previous output had come back round, so the work "
      "goes round {} one item at a time; the extra synchronisation on link {} -> {} is the "
      "bottleneck",
      g.Name(s.source), FormatPercent(s.source_wait, src->wall), g.Name(s.feedback),
      FormatCount(s.out->closed_loop_messages), FormatCount(s.out->messages), g.Name(s.consumer),
      g.Name(s.consumer), ring, g.Name(s.feedback), g.Name(s.source));
  f.evidence = fmt::format(
      "link {} -> {}: {} messages, {} waiting of {} in its calls; {} waits {} "
      "of the run receiving work from {}",
      s.link->from_label, s.link->to_label, FormatCount(s.link->messages),
      FormatDuration(s.source_wait), FormatDuration(s.link->time_ns), g.Name(s.consumer),
      FormatPercent(s.consumer_wait, con->wall), g.Name(s.source));
  for (size_t i = 1; i < s.path.size(); ++i) {
    const Node* n = g.Find(s.path[i]);
    if (n)
      f.evidence +=
          fmt::format("; {} computes {}", g.Name(s.path[i]), FormatPercent(n->compute, n->wall));
  }
  f.time_at_stake_ns = f.thread_time_ns = s.source_wait;  // one thread's wait
  f.percent_of_run = Percent(s.source_wait, src->wall);
  f.subjects = {g.Name(s.source), g.Name(s.feedback), g.Name(s.source),
                fmt::format("{} -> {}", g.Name(s.feedback), g.Name(s.source)), g.Name(s.consumer)};
  return f;
}

// The share of all the messages a consumer receives that must have come from the source and
// closed a loop (analysis/loop_clocks.h) for the loop to count as run one item at a time.
// Measured on the ring example (4 MPI ranks, 200 words, 8 MB, busy-polling ranks on 2 CPUs): the
// slow form's first worker 200 of 201 (every word but the first), the fixed form's 1 of 201 (the
// stop message); its pipe form (3 workers, 1500 words): 1500 of 1501 and 1 of 1501 (the stop
// frame, from the master, while the words come from a second thread).
constexpr double kClosedLoopShare = 0.5;

// Messages received by `who`, over all its links.
uint64_t MessagesInto(const Results& r, const Graph& g, PartyId who) {
  uint64_t n = 0;
  for (const auto& k : r.links)
    if (g.To(r, k) == who)
      n += k.messages;
  return n;
}

// Finds the serialised loop whose source waits most on its feedback link: at least two, and
// at least half, of all the messages a consumer receives came from the source and closed a loop;
// the source waits >= 10% of its run
// receiving from `feedback`, more than any other member of the loop waits for its input, and
// the consumer's output reaches `feedback` without passing through the source (a loop of three
// or more parties; a two-party request and reply, or a farm whose workers each answer the
// master, is not one).
std::optional<Serialised> FindSerialisedLoop(const Results& r, const Graph& g) {
  std::optional<Serialised> best;
  for (const auto& out : r.links) {
    PartyId source = g.From(r, out), consumer = g.To(r, out);
    const Node* src = g.Find(source);
    const Node* con = g.Find(consumer);
    if (!src || !con || !src->wall || !con->wall || !out.messages)
      continue;
    if (out.closed_loop_messages < 2 ||
        static_cast<double>(out.closed_loop_messages) <
            kClosedLoopShare * static_cast<double>(MessagesInto(r, g, consumer)))
      continue;
    uint64_t source_wait;
    const LinkResult* feedback = WorstLink(r, g, source, false, &source_wait);
    if (!feedback ||
        static_cast<double>(source_wait) < kWaitThreshold * static_cast<double>(src->wall))
      continue;
    PartyId back = g.From(r, *feedback);
    if (back == consumer)
      continue;
    if (best && best->source_wait >= source_wait)
      continue;
    std::vector<PartyId> path = FlowPath(r, g, consumer, back, source);
    if (path.empty())
      continue;
    path.insert(path.begin(), source);
    // The source is the loop's most idle member: every member's results come back round to it
    // too, but only the source holds the next work back while it waits.
    double source_share = static_cast<double>(source_wait) / static_cast<double>(src->wall);
    bool most_idle = true;
    for (size_t i = 1; i < path.size() && most_idle; ++i) {
      const Node* m = g.Find(path[i]);
      uint64_t w;
      if (m && m->wall && WorstLink(r, g, path[i], false, &w))
        most_idle = static_cast<double>(w) / static_cast<double>(m->wall) <= source_share;
    }
    if (!most_idle)
      continue;
    best =
        Serialised{source, back, consumer, source_wait, out.receiver_wait_ns, feedback, &out, path};
  }
  return best;
}

}  // namespace parmon::analysis::rules
