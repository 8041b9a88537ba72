// The analyzers that run on nearly every event, inline (engine_impl.h declares them): the
// dispatch (ConsumeAt), the critical path, thread states, regions and the POSIX waits. Included
// by engine_impl.h only.
#ifndef PARMON_SRC_ANALYSIS_ENGINE_INLINE_H_
#define PARMON_SRC_ANALYSIS_ENGINE_INLINE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

namespace parmon::analysis {

// --- critical path ---------------------------------------------------------------------------
inline void Engine::Impl::Accrue(Loc& l, uint64_t t) {
  if (l.cp_mark == kNone || t <= l.cp_mark)
    return;
  uint64_t d = Clip(l.cp_mark, t);
  if (l.switch_timed) {
    const uint64_t now = RunClock(l, t);
    d = std::min(d, now - std::min(now, l.cp_run_at));
  } else if (l.sampled || (has_sched && !l.cpu)) {
    uint64_t run = l.sampled_states[static_cast<int>(State::kRunning)];
    run -= std::min(run, l.spin_ns);
    d = std::min(d, run - std::min(run, l.cp_spent));
    l.cp_spent += d;
  }
  l.cp += d;
  if (track_shares && d) {
    Own(l);
    (*l.shares)[static_cast<size_t>(&l - locs.data())] += d;
  }
  Mark(l, t);
}

inline void Engine::Impl::Mark(Loc& l, uint64_t t) {
  l.cp_mark = t;
  l.cp_run_at = RunClock(l, t);
}

inline uint64_t Engine::Impl::RunClock(const Loc& l, uint64_t t) {
  return l.run_clock + (l.on_cpu != kNone && t > l.on_cpu ? t - l.on_cpu : 0);
}

inline void Engine::Impl::SwitchIn(Loc& l, uint64_t ts) {
  l.switch_timed = true;
  l.on_cpu = ts;
  l.preempted_spells.Close(ts);
  l.blocked_spells.Close(ts);
}

inline uint64_t Engine::Impl::PreemptedWithin(const Loc& l, uint64_t b, uint64_t e) {
  return l.preempted_spells.Within(b, e);
}

inline uint64_t Engine::Impl::BlockedWithin(const Loc& l, uint64_t b, uint64_t e) {
  return l.blocked_spells.Within(b, e);
}

inline void Engine::Impl::SwitchOut(Loc& l, uint64_t ts) {
  if (l.on_cpu != kNone)
    l.run_clock += ts > l.on_cpu ? ts - l.on_cpu : 0;
  else if (!l.switch_timed && l.first != kNone)  // on a CPU since before its first record
    l.run_clock += ts > l.first ? ts - l.first : 0;
  l.switch_timed = true;
  l.on_cpu = kNone;
}

inline void Engine::Impl::TaskStarts(Loc& l, const Event& e) {
  if (l.creator != kNoIndex || !e.args[0] || l.cpu)
    return;
  auto it = loc_of_tid.find(static_cast<uint32_t>(e.args[0]));
  if (it == loc_of_tid.end() || it->second == IndexOf(l))
    return;
  l.creator = it->second;
  Loc& c = locs[l.creator];
  Accrue(c, e.ts);
  Adopt(l, c.cp, ShareSnapshot(c));
}

inline void Engine::Impl::TaskEnds(Loc& l, const Event& e) {
  if (l.exited || l.cpu)
    return;
  l.exited = true;
  Accrue(l, e.ts);
  // Its last switch-out is the exit itself (no record follows): off a CPU from now on.
  if (l.on_cpu != kNone) {
    l.run_clock += e.ts > l.on_cpu ? e.ts - l.on_cpu : 0;
    l.on_cpu = kNone;
  }
  if (l.creator == kNoIndex)
    return;
  Loc& c = locs[l.creator];
  if (c.exited)
    return;
  Accrue(c, e.ts);
  if (l.cp > c.cp)
    joined_paths = true;
  Adopt(c, l.cp, ShareSnapshot(l));
}

inline void Engine::Impl::CondSignal(Loc& l, const Event& e) {
  if (l.cpu || l.in_mpi)
    return;
  Accrue(l, e.ts);
  cond_signals[e.args[0]] = {l.cp, ShareSnapshot(l)};
}

inline void Engine::Impl::CondWoken(Loc& l, const Event& e) {
  auto it = cond_signals.find(e.args[0]);
  if (it == cond_signals.end() || l.cpu)
    return;
  if (it->second.cp > l.cp)
    joined_paths = true;
  Adopt(l, it->second.cp, it->second.shares);
}

inline void Engine::Impl::Own(Loc& l) {
  if (!l.shares)
    l.shares = std::make_shared<Shares>(locs.size(), 0);
  else if (l.shares.use_count() > 1)
    l.shares = CopyShares(*l.shares);
  if (l.shares->size() < locs.size())
    l.shares->resize(locs.size(), 0);
}

inline std::shared_ptr<const Shares> Engine::Impl::ShareSnapshot(Loc& l) {
  if (!track_shares)
    return nullptr;
  Own(l);
  // Copy-on-write: the snapshot and the location share one vector until either changes.
  return l.shares;
}

inline void Engine::Impl::Adopt(Loc& l, uint64_t cp, const std::shared_ptr<const Shares>& shares) {
  if (cp <= l.cp)
    return;
  l.cp = cp;
  if (track_shares && shares) {
    if (l.shares && l.shares.use_count() == 1)
      *l.shares = *shares;
    else
      l.shares = CopyShares(*shares);
  }
}

inline std::shared_ptr<Shares> Engine::Impl::CopyShares(const Shares& from) {
  return CopyIntoSpare(spare_shares, from);
}

inline void Engine::Impl::RecycleShares(std::shared_ptr<const Shares>& v) {
  RecycleInto(spare_shares, v);
}

// --- events ----------------------------------------------------------------------------------
inline void Engine::Impl::Consume(const Event& e) {
  if (e.ts < ws || e.ts > we)
    return;
  ConsumeAt(locs[LocFor(e.location)], e);
}

inline void Engine::Impl::ConsumeAt(Loc& l, const Event& e) {
  if (e.ts >= next_switch_stop) [[unlikely]]
    ApplySwitchStops(e.ts);
  ++events;
  ++l.events;
  if (l.first == kNone) {
    l.first = e.ts;
    Mark(l, e.ts);
  }
  l.last = e.ts;
  if (e.source == format::Source::kRuntime)
    ++runtime_events;
  switch (e.kind_enum()) {
    case Kind::kRegionEnter:
      l.stack.push_back({static_cast<uint32_t>(e.args[0]), e.ts, 0});
      break;
    case Kind::kRegionLeave:
      RegionLeave(l, static_cast<uint32_t>(e.args[0]), e.ts);
      break;
    case Kind::kLost:
    case Kind::kRingLost:
      l.lost += e.args[0];
      break;
    case Kind::kMpiInit:
      MpiInit(l.pid, e);
      l.mpi_time.init_end = l.mpi_time.flush_to = e.ts;  // periodic: MPI_Init returned
      break;
    case Kind::kMpiCommDef:
      comm_size[e.args[0]] = static_cast<uint32_t>(e.args[1]);
      break;
    case Kind::kMpiEnter:
      MpiEnter(l, e);
      break;
    case Kind::kMpiLeave:
      MpiLeave(l, e);
      break;
    case Kind::kMpiStats:
    case Kind::kMpiPeerStats:
      PeriodicMpi(l, e);
      break;
    case Kind::kMpiSend:
      MpiSend(l, e);
      break;
    case Kind::kMpiRecv:
      MpiRecv(l, e);
      break;
    case Kind::kMpiRequestDone:
      MpiRequestDone(l, e);
      break;
    case Kind::kMpiCollective:
      MpiCollective(l, e);
      break;
    case Kind::kChanInfo:
      ChanInfo(l.pid, e);
      break;
    case Kind::kChanRead:
    case Kind::kChanWrite:
      ChanIo(l, e);
      break;
    case Kind::kChanWait:
      BlockingCall(l, State::kCommWait, e.args[3], e.ts);
      break;
    case Kind::kSyncWait:
      SyncWait(l, e);
      break;
    case Kind::kSyncSignal:
      CondSignal(l, e);
      break;
    case Kind::kTimerWait:
      BlockingCall(l, State::kTimerWait, e.args[2], e.ts);
      break;
    case Kind::kThreadStates:
      ThreadStates(l, e);
      break;
    case Kind::kCpuSample:
      CpuSample(l, e);
      break;
    case Kind::kSwitchIn:
      SwitchIn(l, e.ts);
      break;
    case Kind::kSwitchOut:
      SwitchOutRecord(l, e);
      break;
    case Kind::kOmpRuntime:
    case Kind::kOmpThread:
    case Kind::kOmpParallel:
    case Kind::kOmpImplicitTask:
    case Kind::kOmpSyncWait:
    case Kind::kOmpWork:
    case Kind::kOmpMutexWait:
    case Kind::kOmpTask:
    case Kind::kOmpSoloRegion:
      omp.Consume(l.id, l.pid, l.tid, e);
      break;
    case Kind::kFatalSignal:
      FatalSignal(l, e);
      break;
    case Kind::kTaskStart:
      TaskStarts(l, e);
      break;
    case Kind::kTaskExit:
      TaskEnds(l, e);
      break;
    case Kind::kSwitchCounts:
      l.switches += e.args[0];
      l.preempted += e.args[1];
      has_sched = true;
      break;
    default:
      break;
  }
}

// An MPI call starts: what the thread computed since its last call goes on its path.
inline void Engine::Impl::MpiEnter(Loc& l, const Event& e) {
  if (l.call_waits != kNoIndex) {  // the previous call's leave is missing (lost)
    calls[l.call_waits].leave = e.ts;
    FinishCall(calls[l.call_waits]);
    ReleaseCall(l.call_waits);
    l.call_waits = kNoIndex;
  }
  ReleaseCallSends(l);
  Accrue(l, e.ts);
  l.cp_mark = kNone;
  l.in_mpi = true;
  if (!l.mpi_time.init_seen)
    MpiRunStarts(l, static_cast<uint32_t>(e.args[0]));
  l.mpi_time.active = true;
  l.mpi_enter = e.ts;
  l.mpi_func = static_cast<uint32_t>(e.args[0]);
  l.mpi_site = MpiSite(l, l.mpi_func, e.nargs > 1 ? static_cast<uint32_t>(e.args[1]) : 0);
  has_comm = true;
}

// A POSIX lock, condition variable or spin lock wait returned (SyncWait).
inline void Engine::Impl::SyncWait(Loc& l, const Event& e) {
  if (e.args[1] == kSyncSpin && !l.in_mpi && !l.cpu)
    SpinWait(l, e.args[2], e.ts);
  BlockingCall(l, State::kLockWait, e.args[2], e.ts);
  if (e.args[1] == kSyncCond)
    CondWoken(l, e);
}

// A switch-out record: the thread leaves its CPU, preempted (args[1] != 0) or blocked.
inline void Engine::Impl::SwitchOutRecord(Loc& l, const Event& e) {
  SwitchOut(l, e.ts);
  ++l.switches;
  l.preempted += e.args[1] != 0;
  l.preempted_spells.open = e.args[1] != 0 ? e.ts : kNone;
  l.blocked_spells.open = e.args[1] != 0 ? kNone : e.ts;
  has_sched = true;
}

// --- thread states, regions, POSIX waits ----------------------------------------------------
inline void Engine::Impl::ThreadStates(Loc& l, const format::Event& e) {
  uint64_t total = 0, args[format::kThreadStateCount];
  for (int i = 0; i < format::kThreadStateCount; ++i)
    total += args[i] = e.args[i];
  constexpr int kRun = static_cast<int>(State::kRunning);
  if (args[kRun] && total)
    l.kernel_running += WindowPart(args[kRun], e.ts > total ? e.ts - total : 0, e.ts, total);
  if (l.switch_timed)
    l.run_at_sample = RunClock(l, e.ts);
  if (periodic_session && !l.cpu)
    return HoldSample(l, e.ts, total, args);  // until the MPI time of its span is known
  if (l.mpi_time.active)
    MpiShareOfSample(l, e.ts, args);
  ApplySample(l, e.ts, total, args);
}

inline uint64_t Engine::Impl::WindowPart(uint64_t ns,
                                         uint64_t begin,
                                         uint64_t ts,
                                         uint64_t total) const {
  uint64_t inside = Clip(begin, ts);
  if (!defs.paused.empty())
    inside -= std::min(inside, defs.PausedWithin(begin, ts));
  return total ? static_cast<uint64_t>(
                     std::llround(static_cast<double>(ns) * static_cast<double>(inside) /
                                  static_cast<double>(total)))
               : 0;
}

inline void Engine::Impl::ApplySample(Loc& l, uint64_t ts, uint64_t total, const uint64_t* args) {
  uint64_t begin = ts > total ? ts - total : 0;
  for (int i = 0; i < format::kThreadStateCount; ++i) {
    if (!args[i])
      continue;
    l.sampled_states[static_cast<int>(StateOfArg(i))] += WindowPart(args[i], begin, ts, total);
    AddSpread(l.iv, StateOfArg(i), args[i], begin, ts);
  }
  l.sampled = true;
  if (begin < l.first) {
    l.first = std::max(begin, ws);
    // It computed before its first event (a sample): its path starts with it.
    if (l.cp_mark != kNone && l.cp_spent == 0 && l.cp_mark > l.first && !l.switch_timed)
      l.cp_mark = l.first;
  }
  has_sched = true;
}

inline void Engine::Impl::CpuSample(Loc& l, const format::Event& e) {
  uint64_t busy = e.args[0];
  uint64_t total = e.args[0] + e.args[1] + e.args[2] + e.args[3];
  uint64_t begin = e.ts > total ? e.ts - total : 0;
  l.cpu_busy += busy;
  l.cpu_total += total;
  l.cpu_steal += e.args[3];
  AddSpread(l.iv, State::kRunning, busy, begin, e.ts);
  AddSpread(l.iv, State::kOther, total - busy, begin, e.ts);
  has_sched = true;
}

inline void Engine::Impl::RegionLeave(Loc& l, uint32_t region, uint64_t ts) {
  // Unwind to the matching enter (a leave without enter, e.g. before the window, is ignored).
  while (!l.stack.empty()) {
    RegionFrame f = l.stack.back();
    l.stack.pop_back();
    uint64_t incl = ts - f.enter;
    if (f.region >= l.regions.size())
      l.regions.resize(std::max<size_t>(f.region + 1, l.regions.size() * 2));
    RegionAgg& a = l.regions[f.region];
    ++a.count;
    a.inclusive += incl;
    a.exclusive += incl > f.child_ns ? incl - f.child_ns : 0;
    if (!l.stack.empty())
      l.stack.back().child_ns += incl;
    if (f.region == region)
      break;
  }
}

inline void Engine::Impl::AddWaitState(Loc& l, State s, uint64_t b, uint64_t e) {
  uint64_t d = Clip(b, e);
  if (!d || l.cpu)
    return;
  l.waits[static_cast<int>(s)] += d;
  AddSpan(l.iv_waits, s, b, e);
}

inline void Engine::Impl::SpinWait(Loc& l, uint64_t begin, uint64_t end) {
  uint64_t d = Clip(std::min(begin, end), end);
  if (!d)
    return;
  l.spin_ns += d;
  if (l.iv_spin.empty())
    l.iv_spin.resize(iv_count);
  AddSpan(l.iv_spin, State::kLockWait, std::min(begin, end), end);
}

inline void Engine::Impl::BlockingCall(Loc& l, State s, uint64_t begin, uint64_t end) {
  if (l.in_mpi)
    return;  // the MPI call already counts this time
  if (begin > end)
    begin = end;
  Accrue(l, begin);
  AddWaitState(l, s, begin, end);
  Mark(l, end);
}

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_ENGINE_INLINE_H_
