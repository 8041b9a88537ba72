// Diagnosis: turns Results into a short ranked list of findings in plain words. Each rule looks
// for one known way parallel programs lose time (the seeds' case studies: a pipeline stalled by
// its slowest stage, threads queued for too few CPUs, ranks waiting for the slowest one), states
// the evidence, and the time at stake; findings are ranked by that time.
//
// Waits propagate: in a pipeline A -> B -> C where C is slow, B waits sending to C and A waits
// sending to B. The bottleneck is found by following each wait to the partner until a location
// that does not itself mostly wait on a further partner (the Hathi-2 ring case study: the first
// processor's output link waited 90% of the time, and the cause was at the end of the ring).
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "analysis/engine.h"
#include "analysis/units.h"

namespace parmon::analysis {
namespace {

// A wait smaller than this share of a location's wall time is not worth a finding.
constexpr double kWaitThreshold = 0.10;
// Following a chain of waits: a partner that itself waits this much on its own partner passes
// the blame on.
constexpr double kChainThreshold = 0.25;

struct Node {
  const LocationResult* loc = nullptr;
  std::string label;
  uint64_t wall = 0;
  uint64_t compute = 0;
};

struct Graph {
  // Endpoint label -> location; for MPI the rank's main thread.
  std::map<std::string, Node> nodes;
  const Node* Find(const std::string& label) const {
    auto it = nodes.find(label);
    return it == nodes.end() ? nullptr : &it->second;
  }
};

Graph BuildGraph(const Results& r) {
  Graph g;
  for (const auto& l : r.locations) {
    if (l.kind != "thread")
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

struct LinkWait {
  uint64_t wait = 0;
  const LinkResult* link = nullptr;
  std::string who, partner;
  std::vector<std::string> chain;
};

// The path of links from `from` to `to` (message direction) that does not pass through
// `avoid`, empty when there is none.
std::vector<std::string> FlowPath(const Results& r,
                                  const std::string& from,
                                  const std::string& to,
                                  const std::string& avoid = "") {
  std::map<std::string, std::string> parent{{from, ""}};
  std::vector<std::string> queue{from};
  for (size_t i = 0; i < queue.size(); ++i) {
    for (const auto& k : r.links) {
      if (k.from_label != queue[i] || !k.messages || parent.count(k.to_label) ||
          k.to_label == avoid)
        continue;
      parent[k.to_label] = queue[i];
      if (k.to_label == to) {
        std::vector<std::string> path{to};
        while (!parent[path.back()].empty())
          path.push_back(parent[path.back()]);
        return {path.rbegin(), path.rend()};
      }
      queue.push_back(k.to_label);
    }
  }
  return {};
}

// A feedback loop run one item at a time: `source` hands work to `consumer` only after the
// consumer's previous output has come back round the loop to it, through `feedback`, and
// meanwhile waits receiving from `feedback` (the Hathi-2 ring master's logical error): the loop
// never fills, and the link feedback -> source is where.
struct Serialised {
  std::string source, feedback, consumer;
  uint64_t source_wait = 0, consumer_wait = 0;
  const LinkResult* link = nullptr;  // feedback -> source
  const LinkResult* out = nullptr;   // source -> consumer
  std::vector<std::string> path;     // source -> consumer -> ... -> feedback
};

Finding SerialisedFinding(const Graph& g, const Serialised& s) {
  const Node* src = g.Find(s.source);
  const Node* con = g.Find(s.consumer);
  std::string ring;
  for (const auto& p : s.path)
    ring += p + " -> ";
  ring += s.source;
  Finding f;
  f.id = "serialised-cycle";
  f.text = fmt::format(
      "{} waits {} of the run receiving from {} before it hands out more work: {} of its {} "
      "messages to {} were sent only after {}'s previous output had come back round, so the work "
      "goes round {} one item at a time; the extra synchronisation on link {} -> {} is the "
      "bottleneck",
      s.source, FormatPercent(s.source_wait, src->wall), s.feedback,
      FormatCount(s.out->closed_loop_messages), FormatCount(s.out->messages), s.consumer,
      s.consumer, ring, s.feedback, s.source);
  f.evidence = fmt::format(
      "link {} -> {}: {} messages, {} waiting of {} in its calls; {} waits {} "
      "of the run receiving work from {}",
      s.link->from_label, s.link->to_label, FormatCount(s.link->messages),
      FormatDuration(s.source_wait), FormatDuration(s.link->time_ns), s.consumer,
      FormatPercent(s.consumer_wait, con->wall), s.source);
  for (size_t i = 1; i < s.path.size(); ++i) {
    const Node* n = g.Find(s.path[i]);
    if (n)
      f.evidence += fmt::format("; {} computes {}", s.path[i], FormatPercent(n->compute, n->wall));
  }
  f.time_at_stake_ns = s.source_wait;
  f.percent_of_run = Percent(s.source_wait, src->wall);
  f.subjects = {s.source, s.feedback, s.source, fmt::format("{} -> {}", s.feedback, s.source),
                s.consumer};
  return f;
}

// The share of all the messages a consumer receives that must have come from the source and
// closed a loop (analysis/loop_clocks.h) for the loop to count as run one item at a time.
// Measured on the ring example (4 MPI ranks, 200 words, 8 MB, busy-polling ranks on 2 CPUs): the
// slow form's first worker 200 of 201 (every word but the first), the fixed form's 1 of 201 (the
// stop message); its pipe form (3 workers, 1500 words): 1500 of 1501 and 1 of 1501 (the stop
// frame, from the master, while the words come from a second thread).
constexpr double kClosedLoopShare = 0.5;

// Messages received by `label`, over all its links.
uint64_t MessagesInto(const Results& r, const std::string& label) {
  uint64_t n = 0;
  for (const auto& k : r.links)
    if (k.to_label == label)
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
    const Node* src = g.Find(out.from_label);
    const Node* con = g.Find(out.to_label);
    if (!src || !con || !src->wall || !con->wall || !out.messages)
      continue;
    if (out.closed_loop_messages < 2 ||
        static_cast<double>(out.closed_loop_messages) <
            kClosedLoopShare * static_cast<double>(MessagesInto(r, out.to_label)))
      continue;
    uint64_t source_wait;
    const LinkResult* feedback = WorstLink(r, out.from_label, false, &source_wait);
    if (!feedback ||
        static_cast<double>(source_wait) < kWaitThreshold * static_cast<double>(src->wall))
      continue;
    if (feedback->from_label == out.to_label)
      continue;
    if (best && best->source_wait >= source_wait)
      continue;
    std::vector<std::string> path = FlowPath(r, out.to_label, feedback->from_label, out.from_label);
    if (path.empty())
      continue;
    path.insert(path.begin(), out.from_label);
    // The source is the loop's most idle member: every member's results come back round to it
    // too, but only the source holds the next work back while it waits.
    double source_share = static_cast<double>(source_wait) / static_cast<double>(src->wall);
    bool most_idle = true;
    for (size_t i = 1; i < path.size() && most_idle; ++i) {
      const Node* m = g.Find(path[i]);
      uint64_t w;
      if (m && m->wall && WorstLink(r, path[i], false, &w))
        most_idle = static_cast<double>(w) / static_cast<double>(m->wall) <= source_share;
    }
    if (!most_idle)
      continue;
    best = Serialised{out.from_label,
                      feedback->from_label,
                      out.to_label,
                      source_wait,
                      out.receiver_wait_ns,
                      feedback,
                      &out,
                      path};
  }
  return best;
}

void LinkFindings(const Results& r, const Graph& g, std::vector<Finding>* out) {
  std::optional<Serialised> serialised = FindSerialisedLoop(r, g);
  size_t serialised_index = out->size();
  if (serialised)
    out->push_back(SerialisedFinding(g, *serialised));
  // One finding per bottleneck, named by the link that waits most; the other links whose waits
  // end at the same bottleneck are its evidence.
  for (bool as_sender : {true, false}) {
    std::map<std::string, std::vector<LinkWait>> by_bottleneck;
    for (const auto& k : r.links) {
      uint64_t wait = as_sender ? k.sender_wait_ns : k.receiver_wait_ns;
      const std::string& who = as_sender ? k.from_label : k.to_label;
      const std::string& partner = as_sender ? k.to_label : k.from_label;
      const Node* n = g.Find(who);
      if (!n || !n->wall ||
          static_cast<double>(wait) < kWaitThreshold * static_cast<double>(n->wall))
        continue;
      if (!as_sender) {
        // A sender that is itself blocked sending is late because of its own receivers: the
        // sender-side finding names the cause.
        const Node* p = g.Find(partner);
        uint64_t pw;
        if (p && p->wall && WorstLink(r, partner, true, &pw) &&
            static_cast<double>(pw) >= kChainThreshold * static_cast<double>(p->wall))
          continue;
      }
      // The serialised loop's waits (the source on its feedback, the consumer on the source)
      // are that finding, not late senders.
      if (!as_sender && serialised &&
          ((who == serialised->source && partner == serialised->feedback) ||
           (who == serialised->consumer && partner == serialised->source)))
        continue;
      LinkWait lw{wait, &k, who, partner, Chase(r, g, who, partner, as_sender)};
      // Receive waits that lead back to the serialised loop's source are its consequence.
      if (!as_sender && serialised &&
          std::find(lw.chain.begin(), lw.chain.end(), serialised->source) != lw.chain.end()) {
        (*out)[serialised_index].evidence += fmt::format("; {} waits {} receiving from {}", who,
                                                         FormatPercent(wait, n->wall), partner);
        continue;
      }
      by_bottleneck[lw.chain.back()].push_back(std::move(lw));
    }
    for (auto& [bottleneck, waits] : by_bottleneck) {
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
          via += (i == 1 ? " " : " -> ") + top.chain[i];
        via += ")";
      }
      f.text = fmt::format("{} waits {} of the run {} {}: {} {}{}{}", top.who,
                           FormatPercent(top.wait, n->wall), verb, top.partner, bottleneck,
                           as_sender ? "is the bottleneck" : "sends late: it is the bottleneck",
                           computes, via);
      f.evidence =
          fmt::format("link {} -> {}: {} messages, {}, {} waiting of {} in its calls", k.from_label,
                      k.to_label, FormatCount(k.messages), FormatBytes(k.bytes),
                      FormatDuration(top.wait), FormatDuration(k.time_ns));
      for (size_t i = 1; i < waits.size(); ++i) {
        const Node* wn = g.Find(waits[i].who);
        f.evidence +=
            fmt::format("; {} waits {} {} {}", waits[i].who,
                        FormatPercent(waits[i].wait, wn ? wn->wall : 0), verb, waits[i].partner);
      }
      f.time_at_stake_ns = top.wait;
      f.percent_of_run = Percent(top.wait, n->wall);
      f.subjects = {top.who, top.partner, bottleneck,
                    fmt::format("{} -> {}", k.from_label, k.to_label)};
      out->push_back(std::move(f));
    }
  }
}

void QueuedFinding(const Results& r, std::vector<Finding>* out) {
  uint64_t runnable = 0, total = 0;
  size_t busy = 0;
  for (const auto& l : r.locations) {
    if (l.kind != "thread" || l.state_source != "sampled")
      continue;
    uint64_t t = Sum(l.states);
    uint64_t q = l.states[static_cast<int>(State::kRunnable)];
    uint64_t run = l.states[static_cast<int>(State::kRunning)];
    runnable += q;
    total += t;
    if (t && run + q >= t / 2)
      ++busy;
  }
  if (!total || static_cast<double>(runnable) < 0.05 * static_cast<double>(total))
    return;
  Finding f;
  f.id = "queued";
  uint32_t cpus = r.summary.cpus;
  const std::string on_cpus = cpus ? fmt::format("{} CPUs", cpus) : std::string("the CPUs");
  if (cpus && busy > cpus)
    f.text = fmt::format(
        "{} runnable threads on {}: {} of thread time is spent queued, waiting for a CPU", busy,
        on_cpus, FormatPercent(runnable, total));
  else  // not this program's threads alone: other work on the machine, or bursts
    f.text = fmt::format(
        "{} of thread time is spent queued, waiting for a CPU ({} of the program's threads were "
        "runnable most of the time, on {}: the rest of the queueing is other work on the "
        "machine or short bursts)",
        FormatPercent(runnable, total), busy, on_cpus);
  f.evidence = fmt::format("{} queued of {} sampled thread time", FormatDuration(runnable),
                           FormatDuration(total));
  f.time_at_stake_ns = runnable;
  f.percent_of_run = Percent(runnable, total);
  std::vector<std::pair<uint64_t, std::string>> worst;
  for (const auto& l : r.locations)
    if (l.kind == "thread" && l.states[static_cast<int>(State::kRunnable)])
      worst.push_back({l.states[static_cast<int>(State::kRunnable)], l.label});
  std::sort(worst.rbegin(), worst.rend());
  for (size_t i = 0; i < worst.size() && i < 3; ++i) {
    f.evidence += fmt::format("; {} queued {}", worst[i].second, FormatDuration(worst[i].first));
    f.subjects.push_back(worst[i].second);
  }
  out->push_back(std::move(f));
}

void ImbalanceFinding(const Results& r, std::vector<Finding>* out) {
  const LoadImbalance& li = r.imbalance;
  if (li.members < 2 || li.percent < 10)
    return;
  // The others idle, on average, max - mean each while the slowest finishes.
  uint64_t at_stake = (li.max_compute_ns - li.mean_compute_ns) * li.members;
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
  f.time_at_stake_ns = at_stake;
  f.percent_of_run = li.percent;
  f.subjects = {li.max_label, li.min_label};
  out->push_back(std::move(f));
}

void CollectiveFinding(const Results& r, std::vector<Finding>* out) {
  uint64_t barrier = 0, coll = 0, wall = 0;
  for (const auto& l : r.locations) {
    if (l.kind != "thread" || l.rank < 0)
      continue;
    barrier += l.barrier_wait_ns;
    coll += l.collective_wait_ns;
    wall += l.wall_ns;
  }
  uint64_t total = barrier + coll;
  if (!wall || static_cast<double>(total) < 0.05 * static_cast<double>(wall))
    return;
  const WaitStateResult* worst = nullptr;
  for (const auto& w : r.wait_states)
    if ((w.pattern == "wait at barrier" || w.pattern == "wait at N-to-N") &&
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
  f.time_at_stake_ns = total;
  f.percent_of_run = Percent(total, wall);
  if (worst)
    f.subjects = {worst->location_label};
  out->push_back(std::move(f));
}

void StateFinding(const Results& r,
                  State s,
                  const char* id,
                  const char* what,
                  std::vector<Finding>* out) {
  uint64_t total = 0, wall = 0;
  const LocationResult* worst = nullptr;
  for (const auto& l : r.locations) {
    if (l.kind != "thread")
      continue;
    uint64_t v = l.states[static_cast<int>(s)];
    total += v;
    wall += l.wall_ns;
    if (!worst || v > worst->states[static_cast<int>(s)])
      worst = &l;
  }
  if (!worst || !worst->wall_ns ||
      static_cast<double>(worst->states[static_cast<int>(s)]) <
          kWaitThreshold * static_cast<double>(worst->wall_ns))
    return;
  uint64_t v = worst->states[static_cast<int>(s)];
  Finding f;
  f.id = id;
  f.text = fmt::format("{} spends {} of its time {}", worst->label,
                       FormatPercent(v, worst->wall_ns), what);
  f.evidence =
      fmt::format("{} {} of {}; all threads: {} of {}", FormatDuration(v), what,
                  FormatDuration(worst->wall_ns), FormatDuration(total), FormatDuration(wall));
  f.time_at_stake_ns = total;
  f.percent_of_run = Percent(total, wall);
  f.subjects = {worst->label};
  out->push_back(std::move(f));
}

}  // namespace

void Diagnose(Results* r) {
  std::vector<Finding> f;
  Graph g = BuildGraph(*r);
  LinkFindings(*r, g, &f);
  QueuedFinding(*r, &f);
  ImbalanceFinding(*r, &f);
  CollectiveFinding(*r, &f);
  StateFinding(*r, State::kLockWait, "lock-wait", "waiting on locks", &f);
  StateFinding(*r, State::kIoWait, "io-wait", "waiting on disk I/O", &f);
  StateFinding(*r, State::kTimerWait, "timer-wait", "sleeping (timer waits)", &f);
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
  std::stable_sort(f.begin(), f.end(), [](const Finding& a, const Finding& b) {
    return a.time_at_stake_ns > b.time_at_stake_ns;
  });
  r->findings = std::move(f);
}

}  // namespace parmon::analysis
