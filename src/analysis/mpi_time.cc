// Time inside MPI calls moved out of the kernel's states (mpi_time.h), and the periodic-mode MPI
// records: MpiStats (calls, time and bytes per function per flush) and MpiPeerStats (messages
// and bytes sent per destination rank), which give periodic reports the per-rank counts, MPI
// time and links that trace mode gets from the per-call events.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

using format::Event;
using format::Kind;

// Trace mode: the MPI time of the sample's span is what the location's cumulated call time
// grew by since the previous sample (the open call counted up to the sample's end).
void Engine::Impl::MpiShareOfSample(Loc& l, uint64_t ts, uint64_t* args) {
  MpiTime& t = l.mpi_time;
  uint64_t comm = t.comm, init = t.init;
  if (l.in_mpi && ts > l.mpi_enter)
    (FuncOf(l.mpi_func).family == MpiFamilyId::kInit ? init : comm) += ts - l.mpi_enter;
  uint64_t m = comm > t.at_comm ? comm - t.at_comm : 0;
  uint64_t n = init > t.at_init ? init - t.at_init : 0;
  t.at_comm = std::max(t.at_comm, comm);
  t.at_init = std::max(t.at_init, init);
  if (t.finalize_left && ts > t.finalize_left) {  // after MPI_Finalize returned: shut-down
    uint64_t span = 0;
    for (int i = 0; i < format::kThreadStateCount; ++i)
      span += args[i];
    n += std::min(span, ts - t.finalize_left);
  }
  if (!m && !n)
    return;
  constexpr int kComm = static_cast<int>(State::kCommWait);
  uint64_t inside[format::kThreadStateCount] = {};
  args[kComm] += TakeMpiTime(args, format::kThreadStateCount, m, inside);
  for (int i = 0; i < format::kThreadStateCount; ++i)
    t.inside[static_cast<int>(StateOfArg(i))] += inside[i];
  TakeMpiTime(args, format::kThreadStateCount, n, nullptr);  // start-up, shut-down: no state
}

// The states so far are before the rank's run (MPI_Init's own time is moved as it goes).
void Engine::Impl::MpiRunStarts(Loc& l, uint32_t func) {
  const MpiFunc& f = FuncOf(func);
  if (f.family != MpiFamilyId::kInit || f.name == "MPI_Finalize")
    return;
  l.mpi_time.init_seen = true;
  l.mpi_time.before_init = l.sampled_states;
}

namespace {
constexpr size_t kMaxHeld = 4096;  // samples a location holds at most (then applies the oldest)

uint64_t Overlap(uint64_t b1, uint64_t e1, uint64_t b2, uint64_t e2) {
  uint64_t b = std::max(b1, b2), e = std::min(e1, e2);
  return e > b ? e - b : 0;
}

// Moves a flush's MPI time out of the held samples its span overlaps: taken from their summed
// split (waits first, mpi_time.h), then from each sample in proportion to its part of that state.
void ApplyCell(MpiTime& t, const MpiCell& c) {
  constexpr int kN = format::kThreadStateCount;
  constexpr int kComm = static_cast<int>(State::kCommWait);
  double sum[kN] = {};
  for (const HeldSample& h : t.held) {
    uint64_t ov = Overlap(h.ts - std::min(h.ts, h.span), h.ts, c.from, c.to);
    for (int s = 0; ov && s < kN; ++s)
      sum[s] +=
          static_cast<double>(h.args[s]) * static_cast<double>(ov) / static_cast<double>(h.span);
  }
  uint64_t whole[kN], taken[kN] = {};
  for (int s = 0; s < kN; ++s)
    whole[s] = static_cast<uint64_t>(sum[s]);
  TakeMpiTime(whole, kN, c.ns, taken);
  for (HeldSample& h : t.held) {
    uint64_t ov = Overlap(h.ts - std::min(h.ts, h.span), h.ts, c.from, c.to);
    for (int s = 0; ov && s < kN; ++s) {
      if (!taken[s] || sum[s] <= 0)
        continue;
      double part = static_cast<double>(h.args[s]) * static_cast<double>(ov) /
                    static_cast<double>(h.span) / sum[s];
      uint64_t d = std::min(
          h.args[s], static_cast<uint64_t>(std::llround(static_cast<double>(taken[s]) * part)));
      h.args[s] -= d;
      if (c.comm) {
        h.args[kComm] += d;
        t.inside[static_cast<int>(StateOfArg(s))] += d;
      }
    }
  }
}
}  // namespace

void Engine::Impl::HoldSample(Loc& l, uint64_t ts, uint64_t span, const uint64_t* args) {
  HeldSample h;
  h.ts = ts;
  h.span = span;
  std::copy(args, args + format::kThreadStateCount, h.args);
  l.mpi_time.held.push_back(h);
  ApplyMpiCells(l, false);
}

// Applies the flushes whose span the held samples cover, then the samples no later flush can
// reach (all of both at the end).
void Engine::Impl::ApplyMpiCells(Loc& l, bool all) {
  MpiTime& t = l.mpi_time;
  while (!t.cells.empty()) {
    const MpiCell& c = t.cells.front();
    if (!all && (t.held.empty() || t.held.back().ts < c.to))
      break;
    ApplyCell(t, c);
    if (c.comm)
      t.release_to = std::max(t.release_to, c.to);
    t.cells.pop_front();
  }
  // A location that makes no MPI call (no flush) applies its samples once it holds too many.
  while (!t.held.empty() &&
         (all || t.held.front().ts <= t.release_to || t.held.size() > kMaxHeld)) {
    const HeldSample& h = t.held.front();
    ApplySample(l, h.ts, h.span, h.args);
    t.held.pop_front();
  }
}

void Engine::Impl::PeriodicMpi(Loc& l, const Event& e) {
  has_comm = true;
  MpiTime& t = l.mpi_time;
  if (e.kind_enum() == Kind::kMpiPeerStats) {
    int32_t rank = Rank(l);
    auto peer = static_cast<int64_t>(e.args[0]);
    uint64_t messages = e.args[1], bytes = e.args[2];
    l.messages_sent += messages;
    l.bytes_sent += bytes;
    l.mpi_messages_sent += messages;
    l.mpi_bytes_sent += bytes;
    LinkAgg& a = links[MpiLink(rank, peer)];
    a.r.messages += messages;
    a.r.bytes += bytes;
    a.bytes[IntervalOf(e.ts)] += bytes;
    auto& received = periodic_received[peer];
    received.first += messages;
    received.second += bytes;
    return;
  }
  // MpiStats(func, calls, busy_ns, bytes) for the calls since the previous flush.
  const MpiFunc& f = FuncOf(static_cast<uint32_t>(e.args[0]));
  uint64_t calls = e.args[1], busy = e.args[2];
  l.mpi_calls += calls;
  CallFamilyStat& fam = l.families[static_cast<size_t>(f.family)];
  fam.calls += calls;
  fam.ns += busy;
  AddFuncTime(t, static_cast<uint32_t>(e.args[0]), calls, busy);
  if (e.ts != t.flush_to) {  // a new flush: its span starts where the previous one ended
    t.flush_from = t.flush_to ? t.flush_to : e.ts - std::min(e.ts, busy);
    t.flush_to = e.ts;
  }
  MpiCell c{t.flush_from, e.ts, busy, true};
  if (f.family == MpiFamilyId::kInit) {
    // MPI_Init ended at its MpiInit record; MPI_Finalize is flushed as it returns. A rank's
    // states cover its run between them: all time before and after leaves the states.
    bool finalize = f.name == "MPI_Finalize";
    (finalize ? l.mpi_shutdown_ns : l.mpi_startup_ns) += busy;
    c.from = finalize ? e.ts - std::min(e.ts, busy) : 0;
    c.to = finalize ? UINT64_MAX : (t.init_end ? t.init_end : e.ts);
    c.ns = UINT64_MAX;
    c.comm = false;
  } else {
    l.mpi_ns += busy;
  }
  if (c.comm && !t.cells.empty() && t.cells.back().to == c.to && t.cells.back().from == c.from &&
      t.cells.back().comm)
    t.cells.back().ns += busy;  // another function of the same flush
  else
    t.cells.push_back(c);
}

void Engine::Impl::FinishPeriodicMpi() {
  for (Loc& l : locs)
    if (!l.mpi_time.held.empty() || !l.mpi_time.cells.empty())
      ApplyMpiCells(l, true);
}

// Per rank: its locations' MPI time and functions, and the main thread's run (states sum to
// the time outside start-up and shut-down).
void BuildMpiProfile(Results* res) {
  struct Rank {
    uint64_t mpi = 0, run = 0;
    std::map<std::string, MpiFuncAgg> funcs;
    MpiFuncAgg startup, shutdown;
  };
  std::map<int32_t, Rank> ranks;
  for (const auto& l : res->locations) {
    if (l.type != LocationKind::kThread || l.rank < 0)
      continue;
    Rank& r = ranks[l.rank];
    r.mpi += l.mpi_ns;
    r.startup.ns += l.mpi_startup_ns;
    r.startup.calls += l.mpi_startup_ns ? 1 : 0;
    r.shutdown.ns += l.mpi_shutdown_ns;
    r.shutdown.calls += l.mpi_shutdown_ns ? 1 : 0;
    if (l.main_thread) {
      uint64_t states = Sum(l.states);
      r.run = states ? states : (l.wall_ns > l.mpi_init_ns ? l.wall_ns - l.mpi_init_ns : 0);
    }
    for (const auto& f : l.mpi_functions) {
      r.funcs[f.name].calls += f.calls;
      r.funcs[f.name].ns += f.ns;
    }
  }
  MpiProfile& p = res->mpi;
  std::map<std::string, MpiFunctionStat> funcs;
  for (const auto& [rank, r] : ranks) {
    if (!r.mpi && r.funcs.empty())
      continue;
    ++p.ranks;
    p.mpi_ns += r.mpi;
    p.run_ns += r.run;
    if (r.run &&
        (p.most_rank < 0 || static_cast<double>(r.mpi) * static_cast<double>(p.most_run_ns) >
                                static_cast<double>(p.most_mpi_ns) * static_cast<double>(r.run))) {
      p.most_rank = rank;
      p.most_mpi_ns = r.mpi;
      p.most_run_ns = r.run;
    }
    for (const auto& [name, a] : r.funcs) {
      MpiFunctionStat& f = funcs[name];
      f.name = name;
      f.calls += a.calls;
      f.ns += a.ns;
      if (f.max_rank < 0 || a.ns > f.max_rank_ns) {
        f.max_rank_ns = a.ns;
        f.max_rank = rank;
      }
    }
  }
  for (auto& [name, f] : funcs) {
    f.min_rank_ns = f.max_rank_ns;
    for (const auto& [rank, r] : ranks) {
      auto it = r.funcs.find(name);
      f.min_rank_ns = std::min(f.min_rank_ns, it == r.funcs.end() ? 0 : it->second.ns);
    }
    f.mean_rank_ns = p.ranks ? static_cast<double>(f.ns) / p.ranks : 0;
    p.functions.push_back(f);
  }
  auto spread = [&](MpiFunctionStat& f, MpiFuncAgg Rank::*of) {
    f.min_rank_ns = UINT64_MAX;
    for (const auto& [rank, r] : ranks) {
      if (!r.mpi && r.funcs.empty())
        continue;
      const MpiFuncAgg& a = r.*of;
      f.calls += a.calls;
      f.ns += a.ns;
      f.min_rank_ns = std::min(f.min_rank_ns, a.ns);
      if (f.max_rank < 0 || a.ns > f.max_rank_ns) {
        f.max_rank_ns = a.ns;
        f.max_rank = rank;
      }
    }
    if (f.min_rank_ns == UINT64_MAX)
      f.min_rank_ns = 0;
    f.mean_rank_ns = p.ranks ? static_cast<double>(f.ns) / p.ranks : 0;
  };
  p.startup.name = "start-up";
  spread(p.startup, &Rank::startup);
  p.shutdown.name = "shut-down";
  spread(p.shutdown, &Rank::shutdown);
  BuildMpiCallSites(res);
  std::stable_sort(p.functions.begin(), p.functions.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });
}

}  // namespace parmon::analysis
