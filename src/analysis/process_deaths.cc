// Processes that died of a signal (FatalSignal events, runtime/fatal_signals.cc) and what the
// others did afterwards: a rank that crashed leaves its peers waiting in MPI until the launcher
// tears them down, and the report says so (issue 11: a rank stuck in MPI_Barrier after its peer
// crashed was shown computing, and the crash was no finding). Also the MPI calls still open at
// the end: their time up to the location's last event is MPI time, as a finished call's.
#include <signal.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "analysis/engine_impl.h"

namespace parmon::analysis {
namespace {

constexpr size_t kMaxOthers = 64;

// How reports name a signal, and what it means when it is a fault.
struct SignalText {
  int32_t signal;
  const char* name;
  const char* meaning;
};
constexpr SignalText kSignals[] = {
    {SIGSEGV, "SIGSEGV", "invalid memory access"},
    {SIGBUS, "SIGBUS", "bus error"},
    {SIGFPE, "SIGFPE", "arithmetic fault"},
    {SIGILL, "SIGILL", "illegal instruction"},
    {SIGABRT, "SIGABRT", "abort"},
    {SIGTERM, "SIGTERM", "terminated"},
    {SIGKILL, "SIGKILL", "killed"},
    {SIGINT, "SIGINT", "interrupted"},
};

SignalText TextOf(int32_t sig) {
  for (const SignalText& t : kSignals)
    if (t.signal == sig)
      return t;
  return {sig, nullptr, ""};
}

std::string SignalName(int32_t sig) {
  const SignalText t = TextOf(sig);
  return t.name ? t.name : fmt::format("signal {}", sig);
}

}  // namespace

void Engine::Impl::FatalSignal(Loc& l, const format::Event& e) {
  if (l.cpu)
    return;
  SignalDeath d;
  d.loc = IndexOf(l);
  d.ts = e.ts;
  d.signal = static_cast<int32_t>(e.args[0]);
  d.code = static_cast<int64_t>(e.args[1]);
  d.sender = static_cast<uint32_t>(e.args[2]);
  for (const Loc& x : locs) {
    if (x.cpu || x.pid == l.pid || x.first == kNone || x.exited || d.others.size() >= kMaxOthers)
      continue;
    d.others.push_back({IndexOf(x), x.in_mpi, x.mpi_func, x.mpi_enter});
  }
  deaths.push_back(std::move(d));
}

void Engine::Impl::CloseOpenMpiCalls() {
  for (Loc& l : locs) {
    if (!l.in_mpi || l.cpu)
      continue;
    format::Event leave;
    leave.ts = std::max(l.last, l.mpi_enter);
    leave.kind = static_cast<uint16_t>(format::Kind::kMpiLeave);
    MpiLeave(l, leave);
  }
}

void Engine::Impl::BuildDeaths(Results* res) const {
  for (const SignalDeath& d : deaths) {
    const Loc& l = locs[d.loc];
    ProcessDeath p;
    p.pid = l.pid;
    p.rank = RankOf(l);
    p.location = l.id;
    p.label = p.rank >= 0 ? fmt::format("rank {}", p.rank) : Label(l);
    p.signal = d.signal;
    p.signal_name = SignalName(d.signal);
    p.signal_meaning = TextOf(d.signal).meaning;
    p.code = d.code;
    p.sender = d.sender;
    p.crashed = d.code > 0 || d.sender == l.pid;
    p.ts = d.ts;
    for (const SignalDeath::Other& o : d.others) {
      const Loc& x = locs[o.loc];
      const int32_t rank = RankOf(x);
      // With ranks, their main threads; without, every thread of the other processes.
      if (p.rank >= 0 && (rank < 0 || !(x.tid == x.pid || x.tid == 0)))
        continue;
      ProcessDeath::After a;
      a.location = x.id;
      a.label = Label(x);
      if (o.in_mpi) {
        a.mpi_call = defs.Name(o.func);
        a.call_since = o.enter;
      }
      a.until = x.last;
      for (const SignalDeath& e : deaths)
        if (locs[e.loc].pid == x.pid && e.ts >= d.ts) {
          a.end_signal = e.signal;
          a.end_signal_name = SignalName(e.signal);
          break;
        }
      p.others.push_back(std::move(a));
    }
    res->deaths.push_back(std::move(p));
  }
}

}  // namespace parmon::analysis
