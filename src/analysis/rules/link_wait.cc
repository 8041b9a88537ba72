// Rule: link waits. One finding per bottleneck, following each wait to the partner that causes
// it (a pipeline A -> B -> C where C is slow: B waits sending to C and A waits sending to B), and
// the serialised-loop finding when a loop runs one item at a time.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "analysis/rules/rules.h"
#include "analysis/units.h"

namespace parmon::analysis::rules {

namespace {

struct LinkWait {
  uint64_t wait = 0;
  const LinkResult* link = nullptr;
  PartyId who = 0, partner = 0;
  std::vector<PartyId> chain;
  std::vector<PartyId> cycle;  // when the chain of waits closes on itself (Chase)
};

// "a", "a and b", "a, b and c"
std::string JoinAnd(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// Parties that wait on each other in turn (a ping-pong, a halo exchange where every rank waits
// for its neighbour about as long as it is waited for): one finding for them all, naming none of
// them as the others' bottleneck. Which member "sends late" would otherwise depend on noise and
// change from run to run. `members` are in party order (ranks by rank), so the text is stable.
Finding WaitCycleFinding(const Results& r,
                         const Graph& g,
                         const std::vector<PartyId>& members,
                         std::vector<LinkWait>& waits,
                         bool as_sender) {
  std::stable_sort(waits.begin(), waits.end(),
                   [](const LinkWait& a, const LinkWait& b) { return a.wait > b.wait; });
  const char* verb = as_sender ? "sending to" : "receiving from";
  std::vector<std::string> names, shares, computes;
  for (PartyId m : members) {
    const Node* n = g.Find(m);
    uint64_t w = 0;
    WorstLink(r, g, m, as_sender, &w);
    names.push_back(g.Name(m));
    shares.push_back(fmt::format("{} {}", g.Name(m), FormatPercent(w, n ? n->wall : 0)));
    computes.push_back(FormatPercent(n ? n->compute : 0, n ? n->wall : 0));
  }
  Finding f;
  f.id = "link-wait-cycle";
  f.text = fmt::format(
      "{} wait on each other in turn, each {} the {} (of the run: {}): {} is the "
      "bottleneck, the exchange itself sets the pace (the work between messages and each "
      "message's latency); they compute {} of the time",
      JoinAnd(names), verb, members.size() == 2 ? "other" : "next", fmt::join(shares, ", "),
      members.size() == 2 ? "neither" : "none of them", JoinAnd(computes));
  for (const LinkWait& lw : waits) {
    const Node* wn = g.Find(lw.who);
    f.evidence +=
        fmt::format("{}link {} -> {}: {} messages, {}, {} waiting of {} in its calls",
                    f.evidence.empty() ? "" : "; ", lw.link->from_label, lw.link->to_label,
                    FormatCount(lw.link->messages), FormatBytes(lw.link->bytes),
                    FormatDuration(lw.wait), FormatDuration(lw.link->time_ns));
    if (std::find(members.begin(), members.end(), lw.who) == members.end())
      f.evidence +=
          fmt::format(" ({} waits {} {} {})", g.Name(lw.who),
                      FormatPercent(lw.wait, wn ? wn->wall : 0), verb, g.Name(lw.partner));
  }
  const LinkWait& top = waits.front();
  const Node* n = g.Find(top.who);
  f.time_at_stake_ns = f.thread_time_ns = top.wait;  // one thread's wait
  f.percent_of_run = Percent(top.wait, n ? n->wall : 0);
  for (PartyId m : members)
    f.subjects.push_back(g.Name(m));
  return f;
}

// A writer's links to the several readers of one channel (a pool fed through a pipe): the
// key of each such link, (writer, channel), with the number of readers.
std::map<std::pair<PartyId, std::string>, size_t> SharedChannels(const Results& r, const Graph& g) {
  std::map<std::pair<PartyId, std::string>, size_t> n;
  for (const auto& k : r.links)
    if (!k.channel.empty() && k.to_location >= 0)
      ++n[{g.From(r, k), k.channel}];
  std::erase_if(n, [](const auto& kv) { return kv.second < 2; });
  return n;
}

// A writer blocked on a channel that several readers drain waits for them together: one
// finding names them all, each with the bytes it read, none of them as the others' bottleneck.
void ReadersWaitFindings(const Results& r,
                         const Graph& g,
                         const std::map<std::pair<PartyId, std::string>, size_t>& shared,
                         std::vector<Finding>* out) {
  for (const auto& [key, count] : shared) {
    const Node* n = g.Find(key.first);
    uint64_t wait = 0, bytes = 0, messages = 0;
    std::string readers;
    for (const auto& k : r.links) {
      if (k.channel != key.second || g.From(r, k) != key.first || k.to_location < 0)
        continue;
      wait += k.sender_wait_ns;
      bytes += k.bytes;
      messages += k.messages;
      readers +=
          fmt::format("{}{} {}", readers.empty() ? "" : ", ", k.to_label, FormatBytes(k.bytes));
    }
    if (!n || !n->wall || static_cast<double>(wait) < kWaitThreshold * static_cast<double>(n->wall))
      continue;
    Finding f;
    f.id = "link-wait-send";
    f.text = fmt::format(
        "{} waits {} of the run sending to the {} readers of one channel: together they are the "
        "bottleneck (each read its share: {})",
        g.Name(key.first), FormatPercent(wait, n->wall), count, readers);
    f.evidence = fmt::format("channel {}: {} writes, {}, {} waiting", key.second,
                             FormatCount(messages), FormatBytes(bytes), FormatDuration(wait));
    f.time_at_stake_ns = f.thread_time_ns = wait;
    f.percent_of_run = Percent(wait, n->wall);
    f.subjects = {g.Name(key.first), key.second};
    out->push_back(std::move(f));
  }
}

// The most a writer waits on one channel that several readers drain, all its readers' links
// together (each link holds only the part of the wait its reader caused).
uint64_t SharedChannelWait(const Results& r,
                           const Graph& g,
                           const std::map<std::pair<PartyId, std::string>, size_t>& shared,
                           PartyId writer) {
  std::map<std::string, uint64_t> by_channel;
  for (const auto& k : r.links)
    if (!k.channel.empty() && k.to_location >= 0 && g.From(r, k) == writer &&
        shared.count({writer, k.channel}))
      by_channel[k.channel] += k.sender_wait_ns;
  uint64_t most = 0;
  for (const auto& [channel, wait] : by_channel)
    most = std::max(most, wait);
  return most;
}

using WaitsByBottleneck = std::map<PartyId, std::vector<LinkWait>>;
using WaitsByLoop = std::map<std::vector<PartyId>, std::vector<LinkWait>>;  // sorted members

// Every link wait above the threshold, sender's or receiver's side, followed to the party that
// causes it: into *by_bottleneck, or into *by_cycle when the chase closes on itself. Waits that
// are another finding's (a writer's to several readers, the serialised loop's) are left out;
// receive waits that lead back to the serialised loop's source are added to its evidence.
void CollectWaits(const Results& r,
                  const Graph& g,
                  const std::map<std::pair<PartyId, std::string>, size_t>& shared,
                  const std::optional<Serialised>& serialised,
                  Finding* serialised_finding,
                  bool as_sender,
                  WaitsByBottleneck* by_bottleneck,
                  WaitsByLoop* by_cycle) {
  for (const auto& k : r.links) {
    if (as_sender && !k.channel.empty() && shared.count({g.From(r, k), k.channel}))
      continue;  // a writer's wait for several readers: ReadersWaitFindings
    uint64_t wait = as_sender ? k.sender_wait_ns : k.receiver_wait_ns;
    PartyId who = as_sender ? g.From(r, k) : g.To(r, k);
    PartyId partner = as_sender ? g.To(r, k) : g.From(r, k);
    const Node* n = g.Find(who);
    if (!n || !n->wall || static_cast<double>(wait) < kWaitThreshold * static_cast<double>(n->wall))
      continue;
    if (!as_sender) {
      // A sender that is itself blocked sending is late because of its own receivers: the
      // sender-side finding names the cause.
      // A writer to several readers of one channel waits for them together.
      const Node* p = g.Find(partner);
      uint64_t pw = 0;
      WorstLink(r, g, partner, true, &pw);
      pw = std::max(pw, SharedChannelWait(r, g, shared, partner));
      if (p && p->wall && static_cast<double>(pw) >= kChainThreshold * static_cast<double>(p->wall))
        continue;
    }
    // The serialised loop's waits (the source on its feedback, the consumer on the source)
    // are that finding, not late senders.
    if (!as_sender && serialised &&
        ((who == serialised->source && partner == serialised->feedback) ||
         (who == serialised->consumer && partner == serialised->source)))
      continue;
    LinkWait lw{wait, &k, who, partner, {}, {}};
    lw.chain = Chase(r, g, who, partner, as_sender, &lw.cycle);
    // Receive waits that lead back to the serialised loop's source are its consequence.
    if (!as_sender && serialised &&
        std::find(lw.chain.begin(), lw.chain.end(), serialised->source) != lw.chain.end()) {
      serialised_finding->evidence +=
          fmt::format("; {} waits {} receiving from {}", g.Name(who),
                      FormatPercent(wait, n->wall), g.Name(partner));
      continue;
    }
    if (!lw.cycle.empty()) {
      std::vector<PartyId> members = lw.cycle;
      std::sort(members.begin(), members.end());
      (*by_cycle)[members].push_back(std::move(lw));
      continue;
    }
    (*by_bottleneck)[lw.chain.back()].push_back(std::move(lw));
  }
}

// Waits that lead round to their own waiter: A's wait ends at B and B's at A (directly, when
// each waits too little on the other for the chain to go on, or through others). The parties of
// such a loop wait on each other in turn, and each finding would call the other the bottleneck.
// Loops of "waits end at" (including the cycles the chase found) are found as strongly connected
// sets; the waits inside one are taken out of *by_bottleneck into the loop's entry.
WaitsByLoop GroupLoops(WaitsByBottleneck* by_bottleneck, WaitsByLoop* by_cycle) {
  std::map<PartyId, std::set<PartyId>> ends_at;
  for (const auto& [bottleneck, waits] : *by_bottleneck)
    for (const LinkWait& lw : waits)
      if (lw.who != bottleneck)
        ends_at[lw.who].insert(bottleneck);
  for (const auto& [members, waits] : *by_cycle)
    for (size_t i = 0; i < members.size(); ++i)
      ends_at[members[i]].insert(members[(i + 1) % members.size()]);
  auto reach = [&](PartyId from) {
    std::set<PartyId> seen{from};
    std::vector<PartyId> todo{from};
    while (!todo.empty()) {
      PartyId p = todo.back();
      todo.pop_back();
      if (auto it = ends_at.find(p); it != ends_at.end())
        for (PartyId q : it->second)
          if (seen.insert(q).second)
            todo.push_back(q);
    }
    return seen;
  };
  std::map<PartyId, std::set<PartyId>> reachable;
  for (const auto& [p, next] : ends_at)
    reachable[p] = reach(p);
  // p's loop: the parties p reaches that reach p back (p alone when none).
  auto loop_of = [&](PartyId p) {
    std::vector<PartyId> members;
    auto it = reachable.find(p);
    if (it == reachable.end())
      return members;
    for (PartyId q : it->second)
      if (q != p && reachable.count(q) && reachable[q].count(p))
        members.push_back(q);
    if (!members.empty())
      members.push_back(p);
    std::sort(members.begin(), members.end());
    return members;
  };
  WaitsByLoop loops;
  for (auto& [members, waits] : *by_cycle) {
    std::vector<PartyId> loop = loop_of(members.front());
    auto& into = loops[loop.empty() ? members : loop];
    for (auto& lw : waits)
      into.push_back(std::move(lw));
  }
  for (auto it = by_bottleneck->begin(); it != by_bottleneck->end();) {
    auto& bw = it->second;
    for (auto w = bw.begin(); w != bw.end();) {
      std::vector<PartyId> loop = loop_of(w->who);
      if (!loop.empty() && std::binary_search(loop.begin(), loop.end(), it->first)) {
        loops[loop].push_back(std::move(*w));
        w = bw.erase(w);
      } else {
        ++w;
      }
    }
    it = bw.empty() ? by_bottleneck->erase(it) : std::next(it);
  }
  return loops;
}

// One bottleneck's finding, named by the link that waits most; the other links whose waits end
// at the same bottleneck are its evidence.
Finding BottleneckFinding(const Graph& g,
                          PartyId bottleneck,
                          std::vector<LinkWait>& waits,
                          bool as_sender) {
  std::stable_sort(waits.begin(), waits.end(),
                   [](const LinkWait& a, const LinkWait& b) { return a.wait > b.wait; });
  const LinkWait& top = waits.front();
  const Node* n = g.Find(top.who);
  const Node* b = g.Find(bottleneck);
  const LinkResult& k = *top.link;
  const char* verb = as_sender ? "sending to" : "receiving from";
  Finding f;
  f.id = as_sender ? "link-wait-send" : "link-wait-receive";
  std::string computes =
      b ? fmt::format(", it computes {} of the time{}", FormatPercent(b->compute, b->wall),
                      b->compute * 2 < b->wall ? BusyElsewhere(*b) : "")
        : "";
  std::string via;
  if (top.chain.size() > 2) {
    via = " (the wait passes along";
    for (size_t i = 1; i < top.chain.size(); ++i)
      via += (i == 1 ? " " : " -> ") + g.Name(top.chain[i]);
    via += ")";
  }
  f.text = fmt::format("{} waits {} of the run {} {}: {} {}{}{}", g.Name(top.who),
                       FormatPercent(top.wait, n->wall), verb, g.Name(top.partner),
                       g.Name(bottleneck),
                       as_sender ? "is the bottleneck" : "sends late: it is the bottleneck",
                       computes, via);
  f.evidence =
      fmt::format("link {} -> {}: {} messages, {}, {} waiting of {} in its calls", k.from_label,
                  k.to_label, FormatCount(k.messages), FormatBytes(k.bytes),
                  FormatDuration(top.wait), FormatDuration(k.time_ns));
  for (size_t i = 1; i < waits.size(); ++i) {
    const Node* wn = g.Find(waits[i].who);
    f.evidence += fmt::format("; {} waits {} {} {}", g.Name(waits[i].who),
                              FormatPercent(waits[i].wait, wn ? wn->wall : 0), verb,
                              g.Name(waits[i].partner));
  }
  f.time_at_stake_ns = f.thread_time_ns = top.wait;  // one thread's wait
  f.percent_of_run = Percent(top.wait, n->wall);
  f.subjects = {g.Name(top.who), g.Name(top.partner), g.Name(bottleneck),
                fmt::format("{} -> {}", k.from_label, k.to_label)};
  return f;
}

}  // namespace

void LinkWaitRule(const Results& r, const Graph& g, std::vector<Finding>* out) {
  std::optional<Serialised> serialised = FindSerialisedLoop(r, g);
  size_t serialised_index = out->size();
  if (serialised)
    out->push_back(SerialisedFinding(g, *serialised));
  const auto shared = SharedChannels(r, g);
  ReadersWaitFindings(r, g, shared, out);
  // One finding per bottleneck, and one per loop of parties that wait on each other in turn.
  for (bool as_sender : {true, false}) {
    WaitsByBottleneck by_bottleneck;
    WaitsByLoop by_cycle;
    Finding* serialised_finding = serialised ? &(*out)[serialised_index] : nullptr;
    CollectWaits(r, g, shared, serialised, serialised_finding, as_sender, &by_bottleneck,
                 &by_cycle);
    WaitsByLoop loops = GroupLoops(&by_bottleneck, &by_cycle);
    for (auto& [members, waits] : loops)
      out->push_back(WaitCycleFinding(r, g, members, waits, as_sender));
    for (auto& [bottleneck, waits] : by_bottleneck)
      out->push_back(BottleneckFinding(g, bottleneck, waits, as_sender));
  }
}

}  // namespace parmon::analysis::rules
