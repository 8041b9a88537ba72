#include "comm/comm_trace.h"

#include <algorithm>
#include <memory>

#include "format/kinds.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"

namespace parmon::testing {

using format::Kind;

namespace {

struct Sync {
  uint64_t epoch;
  int64_t peer;
  uint64_t t_send, t_recv;
};

// offset(t) of a rank against rank 0 from its (epoch -> offset at time) samples.
double OffsetAt(const std::vector<std::pair<uint64_t, double>>& samples, uint64_t t) {
  if (samples.empty())
    return 0;
  if (t <= samples.front().first)
    return samples.front().second;
  for (size_t i = 1; i < samples.size(); ++i) {
    if (t <= samples[i].first) {
      const auto& [t0, o0] = samples[i - 1];
      const auto& [t1, o1] = samples[i];
      return o0 + (o1 - o0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
    }
  }
  return samples.back().second;
}

}  // namespace

std::string VisitEvents(
    const std::string& path,
    bool align_clocks,
    const std::function<void(const format::Definitions&, const format::Event&)>& visit) {
  auto reader = format::TraceReader::Open(path);
  if (!reader.ok())
    return std::string(reader.status().message());
  model::SessionOptions options;
  options.align_clocks = align_clocks;
  auto session = model::Session::Over(**reader, options);
  if (!session.ok())
    return std::string(session.status().message());
  const auto& defs = (*reader)->definitions();
  model::Merge cursor(**session);
  format::Event e;
  while (cursor.Next(&e))
    visit(defs, e);
  return "";
}

CommTrace LoadCommTrace(const std::string& path, bool align) {
  CommTrace t;
  std::map<std::pair<int64_t, uint64_t>, Sync> syncs;  // (rank, epoch) -> sample
  std::vector<std::pair<uint32_t, format::Event>> mpi_events;
  std::vector<std::string> collective_names;  // of the kMpiCollective events, in order
  // Every file's own clock: this loader aligns them itself when asked (`align`).
  t.error = VisitEvents(path, false, [&](const format::Definitions& defs, const format::Event& e) {
    uint32_t pid = 0;
    if (auto it = defs.locations.find(e.location); it != defs.locations.end())
      pid = it->second.pid;
    switch (e.kind_enum()) {
      case Kind::kMpiInit:
        t.rank_of_pid[pid] = static_cast<int64_t>(e.args[0]);
        break;
      case Kind::kMpiEnter:
        t.calls[defs.Name(static_cast<uint32_t>(e.args[0]))] += 1;
        break;
      case Kind::kMpiStats:
        t.stats_calls[defs.Name(static_cast<uint32_t>(e.args[0]))] += e.args[1];
        break;
      case Kind::kMpiCollective:
        collective_names.push_back(defs.Name(static_cast<uint32_t>(e.args[0])));
        mpi_events.emplace_back(pid, e);
        break;
      case Kind::kMpiSend:
      case Kind::kMpiRecv:
      case Kind::kMpiPeerStats:
      case Kind::kMpiClockSync:
        mpi_events.emplace_back(pid, e);
        break;
      default:
        break;
    }
  });
  if (!t.error.empty())
    return t;
  auto rank_of = [&](uint32_t pid) {
    auto it = t.rank_of_pid.find(pid);
    return it == t.rank_of_pid.end() ? int64_t{-1} : it->second;
  };
  for (const auto& [pid, ev] : mpi_events)
    if (ev.kind_enum() == Kind::kMpiClockSync)
      syncs[{rank_of(pid), ev.args[1]}] = {ev.args[1], static_cast<int64_t>(ev.args[0]), ev.args[2],
                                           ev.args[3]};
  std::map<int64_t, std::vector<std::pair<uint64_t, double>>> offsets;
  // rank 0's samples are keyed (0, epoch) but there is one per peer: collect them separately.
  std::map<std::pair<int64_t, uint64_t>, Sync> ref_samples;  // (peer, epoch) -> rank 0's sample
  for (const auto& [pid, ev] : mpi_events)
    if (ev.kind_enum() == Kind::kMpiClockSync && rank_of(pid) == 0)
      ref_samples[{static_cast<int64_t>(ev.args[0]), ev.args[1]}] = {
          ev.args[1], static_cast<int64_t>(ev.args[0]), ev.args[2], ev.args[3]};
  for (const auto& [key, s] : syncs) {
    auto [rank, epoch] = key;
    if (rank <= 0)
      continue;
    auto it = ref_samples.find({rank, epoch});
    if (it == ref_samples.end())
      continue;
    const Sync& r0 = it->second;
    double off = (static_cast<double>(s.t_recv) + static_cast<double>(s.t_send) -
                  static_cast<double>(r0.t_send) - static_cast<double>(r0.t_recv)) /
                 2.0;
    // An offset within its own uncertainty (half the round trip not spent on rank r) is not
    // significant: ranks sharing one clock always measure such an offset (|offset| <= the
    // uncertainty by construction, t_send0 <= t_recv <= t_send <= t_recv0), and applying it would
    // move their events by up to that much, enough to put a receive before its send.
    double uncertainty = ((static_cast<double>(r0.t_recv) - static_cast<double>(r0.t_send)) -
                          (static_cast<double>(s.t_send) - static_cast<double>(s.t_recv))) /
                         2.0;
    if (off <= uncertainty && off >= -uncertainty)
      off = 0;
    offsets[rank].emplace_back(s.t_recv, off);
    if (!t.clock_offset_ns.count(rank))
      t.clock_offset_ns[rank] = off;
  }
  auto fix = [&](int64_t rank, uint64_t ts) {
    if (!align || rank <= 0)
      return ts;
    auto it = offsets.find(rank);
    if (it == offsets.end())
      return ts;
    return static_cast<uint64_t>(static_cast<double>(ts) - OffsetAt(it->second, ts));
  };
  for (const auto& [pid, ev] : mpi_events) {
    int64_t rank = rank_of(pid);
    if (ev.kind_enum() == Kind::kMpiSend || ev.kind_enum() == Kind::kMpiRecv) {
      MpiMessageEnd m;
      m.rank = rank;
      m.peer = static_cast<int64_t>(ev.args[0]);
      m.tag = static_cast<int64_t>(ev.args[1]);
      m.comm = ev.args[2];
      m.bytes = ev.args[3];
      m.request = ev.args[4];
      m.ts = fix(rank, ev.ts);
      if (ev.kind_enum() == Kind::kMpiRecv) {
        m.posted = fix(rank, ev.args[5]);
        t.recvs.push_back(m);
      } else {
        t.sends.push_back(m);
      }
    } else if (ev.kind_enum() == Kind::kMpiPeerStats) {
      auto& p = t.peer_stats[{rank, static_cast<int64_t>(ev.args[0])}];
      p.first += ev.args[1];
      p.second += ev.args[2];
    } else if (ev.kind_enum() == Kind::kMpiCollective) {
      t.collectives.push_back(
          {rank, collective_names[t.collectives.size()], ev.args[3], ev.args[4]});
    }
  }
  return t;
}

Matching MatchMessages(const CommTrace& t) {
  using Key = std::tuple<int64_t, int64_t, uint64_t, int64_t>;  // sender, receiver, comm, tag
  std::map<Key, std::vector<const MpiMessageEnd*>> sends, recvs;
  for (const auto& s : t.sends)
    sends[{s.rank, s.peer, s.comm, s.tag}].push_back(&s);
  for (const auto& r : t.recvs)
    recvs[{r.peer, r.rank, r.comm, r.tag}].push_back(&r);
  Matching m;
  for (auto& [key, list] : sends) {
    std::stable_sort(list.begin(), list.end(),
                     [](const auto* a, const auto* b) { return a->ts < b->ts; });
    auto& rl = recvs[key];
    std::stable_sort(rl.begin(), rl.end(),
                     [](const auto* a, const auto* b) { return a->posted < b->posted; });
    size_t n = std::min(list.size(), rl.size());
    for (size_t i = 0; i < n; ++i) {
      const auto* s = list[i];
      const auto* r = rl[i];
      if (s->bytes != r->bytes)
        m.problems.push_back("send of " + std::to_string(s->bytes) + " bytes from " +
                             std::to_string(s->rank) + " received as " + std::to_string(r->bytes));
      if (r->ts < s->ts)
        m.problems.push_back("receive on " + std::to_string(r->rank) + " completed " +
                             std::to_string(s->ts - r->ts) + " ns before its send from " +
                             std::to_string(s->rank));
      auto& p = m.pairs[{s->rank, r->rank}];
      p.first += 1;
      p.second += s->bytes;
      ++m.matched;
    }
    if (list.size() != rl.size())
      m.problems.push_back(std::to_string(list.size()) + " sends but " + std::to_string(rl.size()) +
                           " receives from " + std::to_string(std::get<0>(key)) + " to " +
                           std::to_string(std::get<1>(key)) + " tag " +
                           std::to_string(std::get<3>(key)));
  }
  for (auto& [key, rl] : recvs)
    if (!sends.count(key) && !rl.empty())
      m.problems.push_back(std::to_string(rl.size()) + " receives with no send from " +
                           std::to_string(std::get<0>(key)));
  return m;
}

}  // namespace parmon::testing
