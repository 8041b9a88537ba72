// The results builder's part for one location (results_builder.cc builds the rest): its states
// (from the CPU's samples, the thread's samples, or inferred from its instrumented waits), its
// messages and MPI profile, its top regions and its compute time.
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/engine_impl.h"

namespace parmon::analysis {

// A CPU's states: busy and the rest of its samples' spans.
void Engine::Impl::CpuStates(const Loc& l, LocationResult* r, std::vector<StateTimes>* row) const {
  r->states[static_cast<int>(State::kRunning)] = l.cpu_busy;
  r->states[static_cast<int>(State::kOther)] = l.cpu_total - l.cpu_busy;
  r->cpu_ns = l.cpu_busy;
  r->state_source = "sampled";
  // Its samples' spans reach back before its first sample's time: its wall covers them (as a
  // sampled thread's), so that busy never exceeds it.
  r->wall_ns = std::max(r->wall_ns, l.cpu_total);
  *row = l.iv;
}

// A sampled thread's states: the sampler's, less what lies before MPI_Init and what parmon held
// it on a full ring; a spinlock's waiter's running is lock wait.
void Engine::Impl::SampledStates(const Loc& l,
                                 uint64_t held_total,
                                 LocationResult* r,
                                 std::vector<StateTimes>* row) const {
  r->states = l.sampled_states;
  for (int st = 0; st < kStateCount; ++st)  // a rank's states cover its run (mpi_time.h)
    r->states[st] -= std::min(r->states[st], l.mpi_time.before_init[st]);
  r->state_source = "sampled";
  r->cpu_ns = l.kernel_running;  // polling inside MPI calls included: the kernel's CPU clock
  r->wall_ns = std::max(r->wall_ns, Sum(l.sampled_states));
  // Held by parmon on a full ring: the kernel saw a futex wait (or the spin before it), which
  // is parmon's, not the program's.
  uint64_t held = held_total;
  for (State st : {State::kLockWait, State::kTimerWait, State::kOther, State::kIoWait,
                   State::kRunning, State::kRunnable}) {
    const uint64_t take = std::min(held, r->states[static_cast<int>(st)]);
    r->states[static_cast<int>(st)] -= take;
    held -= take;
  }
  r->parmon_held_ns = held_total - held;
  *row = l.iv;
  // A spinlock's waiter ran while it waited: the sampler's running is the program's lock wait.
  auto spin_to_lock = [](StateTimes& st, uint64_t spin) {
    const uint64_t take = std::min(spin, st[static_cast<int>(State::kRunning)]);
    st[static_cast<int>(State::kRunning)] -= take;
    st[static_cast<int>(State::kLockWait)] += take;
  };
  if (l.spin_ns) {
    spin_to_lock(r->states, l.spin_ns);
    for (size_t i = 0; i < iv_count && i < l.iv_spin.size(); ++i)
      spin_to_lock((*row)[i], l.iv_spin[i][static_cast<int>(State::kLockWait)]);
  }
}

// An unsampled thread's states, inferred: the location's life minus the instrumented waits is
// running.
void Engine::Impl::InferredStates(const Loc& l,
                                  uint64_t held_total,
                                  LocationResult* r,
                                  std::vector<StateTimes>* row) const {
  r->states = l.waits;
  uint64_t waits = Sum(l.waits);
  waits += l.mpi_startup_ns + l.mpi_shutdown_ns;  // in no state
  // Paused by `parmon ctl`: nothing was recorded, so it is no state either (not running).
  waits += defs.PausedWithin(l.first, l.last);
  r->parmon_held_ns = held_total;
  waits += held_total;  // held by parmon on a full ring: not the program's running either
  r->states[static_cast<int>(State::kRunning)] = r->wall_ns > waits ? r->wall_ns - waits : 0;
  r->cpu_ns = 0;  // unknown without the sampler
  for (size_t i = 0; i < iv_count; ++i) {
    uint64_t b = bins.Begin(i), e = bins.End(i);
    uint64_t alive = 0;
    if (l.last > l.first) {
      uint64_t ab = std::max(b, l.first), ae = std::min(e, l.last);
      alive = ae > ab ? ae - ab - std::min(ae - ab, defs.PausedWithin(ab, ae)) : 0;
    }
    (*row)[i] = l.iv_waits[i];
    uint64_t w = Sum((*row)[i]);
    (*row)[i][static_cast<int>(State::kRunning)] = alive > w ? alive - w : 0;
  }
}

// Messages, bytes and MPI time; per MPI family, function and call site, dearest first.
void Engine::Impl::LocationMessagesAndMpi(const Loc& l, LocationResult* r) {
  r->messages_sent = l.messages_sent;
  r->bytes_sent = l.bytes_sent;
  r->messages_received = l.messages_received;
  r->bytes_received = l.bytes_received;
  r->mpi_messages_sent = l.mpi_messages_sent;
  r->mpi_bytes_sent = l.mpi_bytes_sent;
  r->mpi_messages_received = l.mpi_messages_received;
  r->mpi_bytes_received = l.mpi_bytes_received;
  r->mpi_ns = l.mpi_ns;
  r->mpi_calls = l.mpi_calls;
  r->mpi_startup_ns = l.mpi_startup_ns;
  r->mpi_shutdown_ns = l.mpi_shutdown_ns;
  r->mpi_init_ns = l.mpi_startup_ns + l.mpi_shutdown_ns;
  r->mpi_kernel_states = l.mpi_time.inside;
  if (auto it = periodic_received.find(r->rank); r->main_thread && it != periodic_received.end()) {
    r->messages_received += it->second.first;  // periodic mode: what the others sent this rank
    r->bytes_received += it->second.second;
    r->mpi_messages_received += it->second.first;
    r->mpi_bytes_received += it->second.second;
  }
  for (size_t fi = 0; fi < l.families.size(); ++fi) {
    // Start-up and shut-down are apart (mpi_startup_ns, mpi_shutdown_ns), not a share of mpi_ns.
    if (!l.families[fi].calls || fi == static_cast<size_t>(MpiFamilyId::kInit))
      continue;
    r->mpi_families.push_back(l.families[fi]);
    r->mpi_families.back().family = MpiFamilyName(static_cast<MpiFamilyId>(fi));
  }
  for (uint32_t id = 0; id < l.mpi_time.by_func.size(); ++id) {
    const MpiFuncAgg& a = l.mpi_time.by_func[id];
    if (a.calls && FuncOf(id).family != MpiFamilyId::kInit)
      r->mpi_functions.push_back({FuncOf(id).name, a.calls, a.ns});
  }
  std::stable_sort(r->mpi_functions.begin(), r->mpi_functions.end(),
                   [](const auto& a, const auto& b) { return a.ns > b.ns; });
  for (const auto& [key, a] : l.mpi_time.by_site) {
    MpiCallSiteStat cs;
    cs.site = defs.Name(static_cast<uint32_t>(key >> 32));
    cs.function = FuncOf(static_cast<uint32_t>(key)).name;
    cs.calls = a.calls;
    cs.ns = a.ns;
    r->mpi_call_sites.push_back(std::move(cs));
  }
  std::sort(r->mpi_call_sites.begin(), r->mpi_call_sites.end(),
            [](const auto& a, const auto& b) {
              return a.ns != b.ns ? a.ns > b.ns
                                  : std::tie(a.site, a.function) < std::tie(b.site, b.function);
            });
  std::sort(r->mpi_families.begin(), r->mpi_families.end(), [](const auto& a, const auto& b) {
    return a.ns != b.ns ? a.ns > b.ns : a.family < b.family;
  });
}

// The location's regions, dearest first; regions still open at the end of the window count up
// to the location's last event.
void Engine::Impl::LocationRegions(Loc& l, LocationResult* r) {
  while (!l.stack.empty())
    RegionLeave(l, l.stack.front().region, l.last);
  for (size_t id = 0; id < l.regions.size(); ++id) {
    const RegionAgg& a = l.regions[id];
    if (!a.count)
      continue;
    r->top_regions.push_back(
        {defs.Name(static_cast<uint32_t>(id)), a.count, a.inclusive, a.exclusive});
  }
  std::sort(r->top_regions.begin(), r->top_regions.end(), [](const auto& a, const auto& b) {
    return a.inclusive_ns != b.inclusive_ns ? a.inclusive_ns > b.inclusive_ns : a.name < b.name;
  });
  if (r->top_regions.size() > options.top_regions)
    r->top_regions.resize(options.top_regions);
}

// The location's waits by kind, and its compute time: its wall less every wait and MPI's
// start-up and shut-down.
void Engine::Impl::LocationWaitsAndCompute(const Loc& l, LocationResult* r) const {
  r->late_sender_ns = l.late_sender;
  r->late_receiver_ns = l.late_receiver;
  r->barrier_wait_ns = l.barrier_wait;
  r->collective_wait_ns = l.collective_wait;
  r->lock_calls_ns = l.waits[static_cast<int>(State::kLockWait)];
  uint64_t waited = Sum(l.waits);
  if (l.sampled) {
    // Of the states of its run (r->states: not before MPI_Init, not held by parmon): the waits
    // before a rank's MPI_Init are outside its run, counted below, not a second time here.
    uint64_t not_running = 0;
    for (int st = 1; st < kStateCount; ++st)
      not_running += r->states[st];
    waited = std::max(waited, not_running);
  }
  // Not computing either: MPI start-up and shut-down (sampled: the time moved out of the states,
  // from the thread's start to MPI_Init's return and from MPI_Finalize's call on).
  uint64_t in_states = Sum(r->states);
  waited += l.sampled ? (r->wall_ns > in_states ? r->wall_ns - in_states : 0)
                      : l.mpi_startup_ns + l.mpi_shutdown_ns;
  r->compute_ns = l.cpu ? l.cpu_busy : (r->wall_ns > waited ? r->wall_ns - waited : 0);
}

// One location's result and its per-interval states.
LocationResult Engine::Impl::BuildLocation(Loc& l, std::vector<StateTimes>* row) {
  Accrue(l, l.last);
  LocationResult r;
  r.id = l.id;
  r.type = l.cpu ? LocationKind::kCpu : LocationKind::kThread;
  r.kind = l.cpu ? "cpu" : "thread";
  r.pid = l.pid;
  r.tid = l.tid;
  r.rank = RankOf(l);
  // The rank's main thread is "rank r" (Label); its MPI links stand for it.
  r.main_thread = !l.cpu && r.rank >= 0 && (l.tid == l.pid || l.tid == 0);
  r.sampled = l.cpu || l.sampled;
  if (auto it = defs.locations.find(l.id); it != defs.locations.end())
    r.name = it->second.name;
  r.label = Label(l);
  r.first_ts = l.first;
  r.last_ts = l.last;
  r.wall_ns = l.last > l.first ? l.last - l.first : 0;
  r.events = l.events;
  r.lost_events = l.lost;
  row->assign(iv_count, StateTimes{});
  // Time parmon held the thread on its full ring (--overflow block), from the END values.
  const auto& held = session.totals().held_by_location;
  const auto held_it = held.find(l.id);
  const uint64_t held_total = held_it == held.end() ? 0 : held_it->second;
  if (l.cpu)
    CpuStates(l, &r, row);
  else if (l.sampled)
    SampledStates(l, held_total, &r, row);
  else
    InferredStates(l, held_total, &r, row);
  LocationMessagesAndMpi(l, &r);
  LocationRegions(l, &r);
  LocationWaitsAndCompute(l, &r);
  return r;
}

}  // namespace parmon::analysis
